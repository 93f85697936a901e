"""The background separability task through a real Celery worker on Redis."""
import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings

from annotation.models import Study
from annotation.tasks import study_separability_task
from annotation.services.studies import study_import
from tests.builders.backends import database_url, redis_answers
from tests.builders.bundles import REPO, bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def celery_worker_process(tmp_path):
    if not redis_answers():
        if os.environ.get("CI"):
            pytest.fail("Redis does not answer on 127.0.0.1:6379 (the CI machine runs one)")
        pytest.skip("no Redis on 127.0.0.1:6379")
    broker = "redis://127.0.0.1:6379/15"
    # The worker listens on this run's own queue (evalapp.settings.test), so a second test run
    # on the machine never takes these tasks.
    env = {**os.environ, "CELERY_BROKER_URL": broker, "DATABASE_URL": database_url(),
           "DJANGO_SETTINGS_MODULE": "evalapp.settings.test",
           "EVALAPP_CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE}
    subprocess.run([sys.executable, "-m", "celery", "-A", "evalapp", "purge", "-f",
                    "-Q", settings.CELERY_TASK_DEFAULT_QUEUE], env=env, cwd=REPO,
                   capture_output=True, timeout=60)
    # A file, not a pipe: an unread pipe fills up and blocks the worker's logging.
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "evalapp", "worker", "--pool", "solo", "--loglevel", "INFO",
         "--without-heartbeat", "--without-mingle", "--without-gossip"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True,
    )
    yield broker
    worker.terminate()
    try:
        worker.wait(timeout=20)
    except subprocess.TimeoutExpired:
        worker.kill()
    log.close()
    print((tmp_path / "worker.log").read_text()[-3000:])  # shown by pytest when a test fails


def test_separability_task_runs_in_a_worker(toy_rows, celery_worker_process):
    study = study_import(source=bundle_bytes(toy_rows), separability="skip")
    assert study.separability_status == "none"
    # Send through the real broker (the test settings otherwise run tasks eagerly).
    from evalapp.celery import app

    app.conf.task_always_eager = False
    try:
        with app.connection_for_write(celery_worker_process) as conn:
            study_separability_task.apply_async((study.id,), connection=conn)
    finally:
        app.conf.task_always_eager = True
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        study.refresh_from_db()
        if study.separability_status in ("done", "failed"):
            break
        time.sleep(0.5)
    assert study.separability_status == "done", study.separability_error
    assert study.comparisons.exclude(separability=None).count() == 6
    assert settings.CELERY_TASK_ALWAYS_EAGER  # the suite's default stays eager
    assert Study.objects.count() == 1


def test_a_filled_round_is_closed_by_the_worker(celery_worker_process):
    """Submits enqueue the round-closing task on the broker; the worker decides the pair."""
    from evalapp.celery import app
    from annotation.services import hits
    from annotation.models import Annotator, PairStateHistory

    study = study_import(source=bundle_bytes(crowd_rows(items=10, batch=3, budget=30)))
    annotators = [Annotator.objects.create(platform="prolific", external_id=f"w{n}") for n in range(3)]
    def use_broker(eager: bool, url: str) -> None:
        # The app caches its pools (built from broker_url); drop the references (not the
        # pools: kombu shares them process-wide per URL) so the next send uses ``url``.
        app.conf.task_always_eager, app.conf.broker_url = eager, url
        app._pool = None
        app.amqp._producer_pool = None

    previous = (app.conf.task_always_eager, app.conf.broker_url)
    use_broker(False, celery_worker_process)
    try:
        for annotator in annotators:  # one pair's first round (3 judgements) fills
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            hits.judgement_submit(assignment=hit, annotator=annotator, shown_value=1,
                                  idempotency_key=hits.new_idempotency_key())
    finally:
        use_broker(*previous)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not PairStateHistory.objects.filter(
            pair_state__study=study, round=1).exists():
        time.sleep(0.5)
    closed = PairStateHistory.objects.filter(pair_state__study=study, round=1)
    assert closed.count() == 1 and closed.get().judgements == 3
    study.refresh_from_db()
    assert study.protocol_closes == 1


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for a parent that does not reap it is dead)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_worker_killed_with_sigkill_leaves_no_child_behind(tmp_path):
    """``celery worker -B`` (scripts/bench/deployment.sh, README) runs beat in a child process;
    a worker killed with SIGKILL left it running (issue 36, finding 9): it went on sending the
    sweep, and a restarted worker started a second beat. Every child must die with it."""
    if not redis_answers():
        pytest.skip("no Redis on 127.0.0.1:6379")
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-kill-{time.monotonic_ns()}"
    env = {**os.environ, "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15", "DATABASE_URL": database_url(),
           "DJANGO_SETTINGS_MODULE": "evalapp.settings.test", "EVALAPP_CELERY_QUEUE": queue}
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "evalapp", "worker", "-B", "--concurrency", "1", "-Q", queue,
         "--loglevel", "INFO", "--schedule", str(tmp_path / "beat-schedule"), "--without-heartbeat",
         "--without-mingle", "--without-gossip"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    children: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (
                "beat: Starting" in (tmp_path / "worker.log").read_text() and len(_children(worker.pid)) >= 2):
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.2)
        children = _children(worker.pid)
        assert len(children) >= 2, (children, (tmp_path / "worker.log").read_text()[-3000:])  # the pool's and beat
        worker.kill()
        worker.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(map(_alive, children)):
            time.sleep(0.1)
        survivors = [pid for pid in children if _alive(pid)]
        assert survivors == [], [open(f"/proc/{pid}/cmdline").read() for pid in survivors]
    finally:
        for pid in children:  # what the test started and the worker left behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if worker.poll() is None:
            worker.kill()
        log.close()
