"""Faults on the serving path, on PostgreSQL: terminated connections, a killed Celery worker,
a round-close task that never ran. Skipped on SQLite (no server connections to terminate).
"""
import collections
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from annotation.models import Annotator, Judgement, PairState, Study
from annotation.selectors.serving import study_serving_audit
from annotation.serving import protocol_state
from annotation.services import hits, runtime
from annotation.services.studies import study_import
from protocol import adaptive
from tests.builders.backends import database_url, redis_answers
from tests.builders.bundles import REPO, bundle_bytes, crowd_rows
from tests.builders.studies import first_rounds_filled_unclosed

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="needs PostgreSQL server connections"),
]
FORM = re.compile(r'<form method="post" action="([^"]+/hits/\d+/)"')
NEXT = re.compile(r'<form method="post" action="([^"]+/next/)"')
KEY = re.compile(r'name="key" value="([^"]+)"')
RECHECK = re.compile(r'<meta http-equiv="refresh"')  # the no-work screen's reload


def terminate_other_backends() -> int:
    """pg_terminate_backend every other connection to this test database; returns how many."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


class Terminator(threading.Thread):
    """Terminates the other connections every ``every`` seconds until stopped."""

    def __init__(self, every: float):
        super().__init__(daemon=True)
        self.every, self.stopped, self.kills = every, threading.Event(), 0

    def run(self):
        try:
            while not self.stopped.wait(self.every):
                self.kills += terminate_other_backends()
        finally:
            connection.close()


def test_terminated_connections_are_retried_never_a_500_to_an_annotator():
    """Crowd workers annotate over HTTP (the views, no JavaScript) while every database
    connection but the terminator's is killed every 0.3 s. The workers enter through the
    start link before the faults begin: the session it writes is saved by Django's session
    middleware after the view, outside what evalapp retries."""
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=120)))
    connection.close()
    statuses, acknowledged, failures = [], [], []
    guard = threading.Lock()
    # until enough answers were acknowledged under the faults, or a bound in time: a fixed 25 s
    # let a busy machine (a second test run beside it) acknowledge 15, short of the 20 asked
    # for; so did workers who left at the no-work screen, which a worker's page reloads, and
    # workers who left at a 429 (15 acknowledged in 34.5 s, 8 answers 429, in a suite run)
    enough, deadline = 30, time.monotonic() + 90
    entered = threading.Barrier(9)

    def crowd_worker(n: int) -> None:
        client, rng = Client(), random.Random(n)
        try:
            response = client.get(f"/s/{study.slug}/start/?PROLIFIC_PID=fault{n}&STUDY_ID=s&SESSION_ID=f{n}")
            entered.wait(30)
            annotate = response["Location"]
            response = client.get(annotate)
            statuses.append(response.status_code)
            body = response.content.decode()
            while time.monotonic() < deadline and len(acknowledged) < enough:
                if response.status_code == 429:
                    # throttled (this worker reloads the no-work screen faster than its page
                    # does): wait as the answer says, then reload, as a worker would
                    time.sleep(min(float(response.get("Retry-After", 1)), 2.0))
                    response = client.get(annotate)
                    with guard:
                        statuses.append(response.status_code)
                    body = response.content.decode()
                    continue
                if RECHECK.search(body):
                    # no HIT right now (the rounds wait for their close, whose connection the
                    # terminator kills too): the page reloads itself, and so does the worker
                    time.sleep(0.2)
                    response = client.get(annotate)
                    with guard:
                        statuses.append(response.status_code)
                    body = response.content.decode()
                    continue
                if not (FORM.search(body) or NEXT.search(body)):
                    break  # no more work for this worker
                if not FORM.search(body):  # no live lease: ask for the next (htmx does on load)
                    response = client.post(NEXT.search(body).group(1), follow=True)
                    with guard:
                        statuses.append(response.status_code)
                    body = response.content.decode()
                    continue
                key = KEY.search(body).group(1)
                response = client.post(FORM.search(body).group(1),
                                       {"key": key, "answer": rng.choice(["left", "tie", "right"])}, follow=True)
                with guard:
                    statuses.append(response.status_code)
                    if response.status_code < 400:
                        acknowledged.append(key)
                body = response.content.decode()
        except Exception as error:  # noqa: BLE001 — reported by the assertion below
            with guard:
                failures.append(traceback.format_exc()[-1500:])
        finally:
            connection.close()

    terminator = Terminator(0.3)
    workers = [threading.Thread(target=crowd_worker, args=(n,)) for n in range(8)]
    for w in workers:
        w.start()
    entered.wait(30)
    terminator.start()
    for w in workers:
        w.join(120)
    terminator.stopped.set()
    terminator.join(10)
    connection.close()
    assert terminator.kills > 0
    assert failures == [] and 500 not in statuses, (failures[:3], sorted(set(statuses)))
    audit = study_serving_audit(study=study, acknowledged_keys=acknowledged)
    assert audit["problems"] == [] and audit["duplicates"] == 0 and audit["lost"] == 0, audit
    assert len(acknowledged) > 20, (len(acknowledged), sorted(collections.Counter(statuses).items()),
                                    round(time.monotonic() - deadline + 90, 1))


def test_a_filled_round_whose_close_never_ran_is_closed_by_the_sweep(settings):
    """The close task was queued on a broker that no worker serves (lost): the sweep closes it."""
    if not redis_answers():
        pytest.skip("no Redis on 127.0.0.1:6379")
    from evalapp.celery import app

    study = study_import(source=bundle_bytes(crowd_rows(items=10, batch=3, budget=30)))
    settings.EVALAPP_BACKGROUND_WORK = "celery"
    previous = (app.conf.task_always_eager, app.conf.broker_url)
    app.conf.task_always_eager, app.conf.broker_url = False, "redis://127.0.0.1:6379/15"
    app._pool, app.amqp._producer_pool = None, None
    try:
        annotators = [Annotator.objects.create(platform="prolific", external_id=f"s{n}") for n in range(3)]
        for annotator in annotators:  # one pair's first round (3 judgements) fills
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            hits.judgement_submit(assignment=hit, annotator=annotator, shown_value=1,
                                  idempotency_key=hits.new_idempotency_key())
    finally:
        app.conf.task_always_eager, app.conf.broker_url = previous
        app._pool, app.amqp._producer_pool = None, None
        subprocess.run([sys.executable, "-m", "celery", "-A", "evalapp", "purge", "-f", "-Q",
                        settings.CELERY_TASK_DEFAULT_QUEUE], cwd=REPO, capture_output=True, timeout=60,
                       env={**os.environ, "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15"})
    assert PairState.objects.filter(study=study, status=adaptive.FILLED).count() == 1
    assert runtime.protocol_sweep()["pairs_closed"] == 1
    assert not PairState.objects.filter(study=study, status=adaptive.FILLED).exists()
    assert Study.objects.get(pk=study.pk).protocol_closes == 1


def test_a_worker_killed_mid_close_and_restarted_converges_to_the_same_decisions(tmp_path):
    """kill -9 a Celery worker while it is closing rounds (between deciding and applying);
    nothing is applied, the restarted worker (with beat: the periodic sweep) closes the rounds,
    and the decisions equal the ones the same close computes in this process."""
    if not redis_answers():
        pytest.skip("no Redis on 127.0.0.1:6379")
    # Every pair's first round filled with the round close switched off (left to the worker).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(settings, "EVALAPP_BACKGROUND_WORK", "celery")
        study = first_rounds_filled_unclosed("k")  # the task is sent below
    rows = list(PairState.objects.filter(study=study))
    expected = adaptive.close_rounds(protocol_state.study_state_load(Study.objects.get(pk=study.pk), rows))
    broker = "redis://127.0.0.1:6379/15"
    env = {**os.environ, "CELERY_BROKER_URL": broker, "DATABASE_URL": database_url(),
           "DJANGO_SETTINGS_MODULE": "evalapp.settings.test", "EVALAPP_BACKGROUND_WORK": "celery",
           "EVALAPP_CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE, "EVALAPP_CELERY_VISIBILITY_TIMEOUT": "3",
           "EVALAPP_FAULT_PAUSE_BEFORE_APPLY": "4"}
    subprocess.run([sys.executable, "-m", "celery", "-A", "evalapp", "purge", "-f", "-Q",
                    settings.CELERY_TASK_DEFAULT_QUEUE], env=env, cwd=REPO, capture_output=True, timeout=60)

    def start_worker(name: str, extra: dict | None = None, beat: bool = False) -> subprocess.Popen:
        log = open(tmp_path / f"{name}.log", "w")
        command = [sys.executable, "-m", "celery", "-A", "evalapp", "worker", "--pool", "solo", "--loglevel", "INFO",
                   "--without-heartbeat", "--without-mingle", "--without-gossip"]
        if beat:
            command += ["-B", "--schedule", str(tmp_path / "beat-schedule")]
        return subprocess.Popen(command, env={**env, **(extra or {})}, cwd=REPO, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)

    first = start_worker("first")
    try:
        from evalapp.celery import app
        from annotation.tasks import rounds_close_task

        app.conf.task_always_eager = False
        try:
            with app.connection_for_write(broker) as conn:
                rounds_close_task.apply_async((study.pk,), connection=conn,
                                              queue=settings.CELERY_TASK_DEFAULT_QUEUE)
        finally:
            app.conf.task_always_eager = True
        log = tmp_path / "first.log"
        deadline = time.monotonic() + 60
        while "rounds_close_task" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # inside the 4 s pause between deciding and applying
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        assert PairState.objects.filter(study=study, status=adaptive.FILLED).count() == 3  # nothing applied
        second = start_worker("second", {"EVALAPP_FAULT_PAUSE_BEFORE_APPLY": "0", "EVALAPP_SWEEP_SECONDS": "2"},
                              beat=True)
        try:
            deadline = time.monotonic() + 90
            while PairState.objects.filter(study=study, status=adaptive.FILLED).exists() \
                    and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            second.terminate()
            second.wait(20)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        subprocess.run([sys.executable, "-m", "celery", "-A", "evalapp", "purge", "-f", "-Q",
                        settings.CELERY_TASK_DEFAULT_QUEUE], env=env, cwd=REPO, capture_output=True, timeout=60)
        print((tmp_path / "first.log").read_text()[-2000:])
        if (tmp_path / "second.log").exists():
            print((tmp_path / "second.log").read_text()[-2000:])
    after = {(r.state["first"], r.state["second"]): r for r in PairState.objects.filter(study=study)}
    for pair in expected.pairs:
        row = after[pair.key]
        assert len(row.state["theta"]) == len(pair.theta)
        if pair.theta:
            assert row.state["theta"][-1] == pair.theta[-1] and row.decision == pair.decision
    assert Study.objects.get(pk=study.pk).protocol_closes == 1
    assert Judgement.objects.filter(comparison__study=study).count() == 12


def test_a_connection_the_server_ended_between_requests_is_replaced_before_the_next_ones_first_statement():
    """The health check polls the connection's socket instead of sending SELECT 1
    (evalapp/postgresql_backend): a connection the server ended while it was idle has its last
    message and the end of the stream to read, so it is replaced, not handed to the request."""
    connection.ensure_connection()
    ended = connection.connection.info.backend_pid
    with psycopg.connect(connection.connection.info.dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [ended])
        for _ in range(100):  # until the server has let go of it
            if other.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [ended]).fetchone()[0] == 0:
                break
            time.sleep(0.02)
    connection.close_if_unusable_or_obsolete()  # a request starts (Django's close_old_connections)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != ended
