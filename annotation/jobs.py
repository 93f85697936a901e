"""Background work: the one way services hand work to run off the request path.

Where it runs is one setting, ``EVALAPP_BACKGROUND_WORK`` (its old name, ``EVALAPP_BACKGROUND_WORK``,
still read: evalapp/settings/base.py), naming one backend class of ``BACKENDS``: ``celery``
(a task on the broker), ``thread`` (the embedded default: a background thread of this
process, and a sweep thread every ``EVALAPP_SWEEP_SECONDS``; the lanes named in
``EVALAPP_PROCESS_LANES`` run in a child process of this one instead) or ``inline`` (at once,
in the caller; the tests). Every backend runs the same Celery task (annotation/tasks.py),
found by name in Celery's registry: services import this module, tasks import services, and
nothing here imports tasks (the app's ``ready`` imports them so that they are registered).
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import django
from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, connection
from kombu.exceptions import OperationalError as KombuOperationalError

log = logging.getLogger(__name__)

ROUNDS_CLOSE = "annotation.tasks.rounds_close_task"
PROTOCOL_SWEEP = "annotation.tasks.protocol_sweep_task"
PLAN_JOB = "annotation.tasks.plan_job_task"
STUDY_SEPARABILITY = "annotation.tasks.study_separability_task"
STUDY_METRICS_TABLE = "annotation.tasks.study_metrics_table_task"
STUDY_DASHBOARD = "annotation.tasks.study_dashboard_task"
JUDGE_RUN = "annotation.tasks.judge_run_task"
# A close already queued for the study (the celery backend): a burst of filled rounds sends one task.
QUEUED_KEY = "evalapp:rounds-close-queued:{}"


def _task(name: str):
    return current_app.tasks[name]


class Backend:
    """Where background work runs: a round close (``rounds_close``) and any other job
    (``run``: the task named ``task`` with ``argument``, in the backend's ``lane``)."""

    name = ""

    def rounds_close(self, study_id: int) -> None:
        self.run(ROUNDS_CLOSE, study_id, "rounds")

    def run(self, task: str, argument: int, lane: str) -> None:
        raise NotImplementedError


class InlineBackend(Backend):
    """At once, in the caller (the tests: decisions are there when the submit returns)."""

    name = "inline"

    def run(self, task: str, argument: int, lane: str) -> None:
        _task(task)(argument)


class CeleryBackend(Backend):
    """A task on the broker; Celery beat runs the sweep."""

    name = "celery"

    def rounds_close(self, study_id: int) -> None:
        # Coalesce a burst of filled rounds into one task (the task closes all of them).
        if cache.add(QUEUED_KEY.format(study_id), 1, timeout=1):
            _send_or_leave_to_the_sweep(ROUNDS_CLOSE, study_id)

    def run(self, task: str, argument: int, lane: str) -> None:
        _task(task).delay(argument)


class ThreadBackend(Backend):
    """A thread of this process per lane (a child process for the lanes of
    EVALAPP_PROCESS_LANES), and a sweep thread."""

    name = "thread"

    def rounds_close(self, study_id: int) -> None:
        with _guard:
            if study_id in _pending:
                return
            _pending.add(study_id)
        _executor("rounds").submit(_close_in_thread, study_id)
        sweeper_ensure()

    def run(self, task: str, argument: int, lane: str) -> None:
        if lane in settings.EVALAPP_PROCESS_LANES:
            _in_child_process(lane, task, argument)
        else:
            _executor(lane).submit(_in_background, task, argument)


BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (InlineBackend(), CeleryBackend(), ThreadBackend())}


def backend() -> Backend:
    """The backend settings.EVALAPP_BACKGROUND_WORK names (read at each call: a test switches it)."""
    return BACKENDS[settings.EVALAPP_BACKGROUND_WORK]


def rounds_close(study_id: int) -> None:
    """Have the study's filled rounds closed soon, off this request; call after commit."""
    backend().rounds_close(study_id)


# While the broker does not answer, a filled round waits for the sweep (Celery beat runs it on
# the same broker once it is back; it closes what a lost task left), instead of failing the
# submit whose answer is already stored. After a failure the broker is not asked again for this
# long (each send waits for the broker's retries); the warning is logged at most once a minute.
BROKER_RETRY_SECONDS = 5
BROKER_WARN_SECONDS = 60
_broker = {"retry_at": 0.0, "warned_at": -1e9}


def _send_or_leave_to_the_sweep(task: str, argument: int) -> None:
    now = time.monotonic()
    if now < _broker["retry_at"]:
        return
    try:
        _task(task).delay(argument)
    except KombuOperationalError as error:
        _broker["retry_at"] = now + BROKER_RETRY_SECONDS
        if now - _broker["warned_at"] >= BROKER_WARN_SECONDS:
            _broker["warned_at"] = now
            log.warning("Celery broker unreachable (%s): round closes are left to the sweep, which closes "
                        "them once the broker is back; asking it again every %d s", error, BROKER_RETRY_SECONDS)


def plan_job(job_id: int) -> None:
    """Run a planner job where background work runs; call after its commit."""
    # One plan at a time (the "plans" thread): a plan is CPU-bound, more would share the cores.
    backend().run(PLAN_JOB, job_id, "plans")


def study_separability(study_id: int) -> None:
    """Compute a study's separability in a worker (eagerly, in this process, without a broker)."""
    _task(STUDY_SEPARABILITY).delay(study_id)


def study_metrics_table(study_id: int) -> None:
    """Compute a study's metrics table where background work runs (off the request: seconds at 50
    systems, which the embedded server used to spend in the page's request)."""
    backend().run(STUDY_METRICS_TABLE, study_id, "reports")


def judge_run(run_id: int) -> None:
    """Run an LLM judge run where background work runs; call after its commit. Its own lane
    ("judges"): a run waits on the endpoint for minutes, and must not hold up plans or reports."""
    backend().run(JUDGE_RUN, run_id, "judges")


def study_dashboard(study_id: int) -> None:
    """Compute a study's dashboard for its current round where background work runs (off the request)."""
    backend().run(STUDY_DASHBOARD, study_id, "reports")


# --- This process's threads (the thread backend) ------------------------------------------------

_executors: dict[str, ThreadPoolExecutor] = {}
_processes: dict[str, ProcessPoolExecutor] = {}
_pending: set[int] = set()
_guard = threading.Lock()
_sweeper: threading.Thread | None = None


def _executor(lane: str) -> ThreadPoolExecutor:
    with _guard:
        if lane not in _executors:
            _executors[lane] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"evalapp-{lane}")
        return _executors[lane]


def _in_child_process(lane: str, name: str, *args) -> None:
    """Run the task in this lane's child process (started on first use, one job at a time).

    A job of seconds of CPU in a thread of a web process holds the interpreter its request
    threads need, and a crowd worker's start link beside the metrics table's job was markedly
    slower (docs/benchmarks.md). The child is spawned, not forked (a fork of a
    threaded process can inherit a held lock), sets Django up once, and reads and writes the
    database and the shared cache like any other process. A child that died is replaced."""
    for _ in range(2):
        with _guard:
            if lane not in _processes:
                _processes[lane] = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                       initializer=_child_start)
            pool = _processes[lane]
        try:
            pool.submit(_in_background, name, *args)
            return
        except BrokenProcessPool:
            with _guard:
                if _processes.get(lane) is pool:
                    del _processes[lane]
    log.error("background job %s%r not run: lane %s's process keeps failing", name, args, lane)


# A lane's child yields the cores to the web processes and the database: its jobs are reports a
# researcher waits seconds for, the crowd's requests are milliseconds each.
CHILD_NICENESS = 10


def _child_start() -> None:
    """A lane's child process, once: lower its priority, set Django up."""
    os.nice(CHILD_NICENESS)
    django.setup()


def processes_stop() -> None:
    """Stop this process's lane processes (gunicorn's ``worker_exit``; a test's cleanup)."""
    with _guard:
        pools = list(_processes.values())
        _processes.clear()
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)


def _close_in_thread(study_id: int) -> None:
    with _guard:
        # Cleared before the close runs: a round that fills meanwhile schedules another close.
        _pending.discard(study_id)
    _in_background(ROUNDS_CLOSE, study_id)


def _in_background(name: str, *args) -> None:
    """Run a task in a lane's thread or child process: errors are logged (nobody to raise to),
    the connection closed."""
    try:
        _task(name)(*args)
    except Exception:  # a background thread has nobody to raise to; the sweep retries
        log.exception("background job %s%r failed", name, args)
    finally:
        connection.close()


def sweeper_ensure() -> None:
    """Start this process's sweep thread (the thread backend, no broker) unless it runs already."""
    global _sweeper
    if settings.EVALAPP_BACKGROUND_WORK != ThreadBackend.name or (_sweeper is not None and _sweeper.is_alive()):
        return
    with _guard:
        if _sweeper is None or not _sweeper.is_alive():
            _sweeper = threading.Thread(target=_sweep_forever, name="evalapp-sweep", daemon=True)
            _sweeper.start()


def _sweep_forever() -> None:
    """Sweep every EVALAPP_SWEEP_SECONDS while background work runs in threads; a process whose
    backend changes (the test suite switches it per test) stops its sweeper rather than sweep
    behind the back of a test that runs closes another way."""
    while True:
        waited = 0.0
        while waited < settings.EVALAPP_SWEEP_SECONDS:
            if settings.EVALAPP_BACKGROUND_WORK != ThreadBackend.name:
                return
            step = min(1.0, settings.EVALAPP_SWEEP_SECONDS - waited)
            time.sleep(step)
            waited += step
        if settings.EVALAPP_BACKGROUND_WORK != ThreadBackend.name:
            return
        try:
            close_old_connections()
            _task(PROTOCOL_SWEEP)()
        except Exception:
            log.exception("protocol sweep failed")
        finally:
            connection.close()
