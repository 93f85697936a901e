"""A Redis outage is no 500 (issue 36, finding 1).

In deployment mode (EVALAPP_CACHE_URL) every cache is Redis: rate-limit counts, the sessions'
cache, the round closes' coalescing, the reports. With Redis unreachable every rate-limited
request (login, crowd start, submit) answered 500. The caches are declared here exactly as
evalapp.settings.base declares them for EVALAPP_CACHE_URL, pointed at a loopback port where
nothing listens (a real refused connection), or at a redis-server of the test's own that is
stopped (SIGSTOP: it accepts connections and never answers) and resumed.
"""
import json
import shutil
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from django.conf import settings as django_settings
from django.core.cache import caches
from django.test import Client

from annotation import jobs
from annotation.models import Judgement, Study
from annotation.services.studies import study_import
from tests.builders.bundles import REPO, bundle_bytes, crowd_rows
from tests.builders.crowd import current_hit
from tests.builders.throttling import assert_throttled, rates

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def deployment_caches(url: str) -> dict:
    """CACHES as evalapp.settings.base declares them with EVALAPP_CACHE_URL=url, each with a
    key prefix of this run's own."""
    env = {**os.environ, "EVALAPP_CACHE_URL": url}
    declared = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from evalapp.settings import base; print(json.dumps(base.CACHES))"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True).stdout)
    run = f"outage-test-{os.getpid()}-{time.monotonic_ns()}"
    return {alias: {**cache, "KEY_PREFIX": f"{run}-{alias}"} for alias, cache in declared.items()}


def outage_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "unreachable" in r.getMessage()]


def test_with_redis_unreachable_logins_crowd_pages_and_submits_answer_and_limits_still_count(settings, caplog):
    settings.CACHES = deployment_caches(f"redis://127.0.0.1:{free_port()}/0")
    rates(settings, login="3/minute", submit="1000/minute")
    caplog.set_level(logging.WARNING)
    study = study_import(source=bundle_bytes(crowd_rows()))
    # Login: its limit still holds (a count per process while Redis is away).
    from django.contrib.auth.models import User
    User.objects.create_user("u", password="right-password-1")
    login = Client(raise_request_exception=False)
    statuses = [login.post("/accounts/login/", {"username": "u", "password": "wrong"}).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429], statuses
    # A crowd worker enters, sees the HIT page and answers HITs.
    worker = Client(raise_request_exception=False)
    response = worker.get(f"/s/{study.slug}/start/?PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=s1")
    assert response.status_code == 302, response.status_code
    for n in range(5):
        assignment, context = current_hit(worker, study.slug)
        response = worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "left", "key": context["key"]})
        assert response.status_code == 302, (n, response.status_code)
    assert Judgement.objects.filter(annotator__external_id="p1").count() == 5
    # A logged-in researcher's pages (sessions, the dashboard's shared cache) answer too.
    researcher = Client(raise_request_exception=False)
    researcher.force_login(User.objects.create_user("r", password="pw-r-123456", is_staff=True))
    assert researcher.get(f"/s/{study.slug}/dashboard/").status_code == 200
    # Said in the log, once for the outage, not once per request.
    assert len(outage_warnings(caplog)) == 1, outage_warnings(caplog)


def test_a_submit_that_fills_a_round_survives_redis_as_cache_and_broker_being_down(settings, caplog):
    """Deployment mode keeps its broker in the same Redis: a submit that fills a round asks
    for the close after its commit; with the broker away that was a 500 for an answer already
    stored. Now the close waits for the sweep (beat), which closes what a lost task left."""
    from evalapp.celery import app
    from annotation.models import PairState
    from annotation.services import runtime

    url = f"redis://127.0.0.1:{free_port()}/0"
    settings.CACHES = deployment_caches(url)
    settings.EVALAPP_BACKGROUND_WORK = "celery"
    caplog.set_level(logging.WARNING)
    study = study_import(source=bundle_bytes(crowd_rows(items=10, batch=2, budget=30)))

    def use_broker(eager: bool, broker: str) -> None:
        app.conf.task_always_eager, app.conf.broker_url = eager, broker
        app._pool = None
        app.amqp._producer_pool = None

    previous = (app.conf.task_always_eager, app.conf.broker_url)
    use_broker(False, url)
    try:
        worker = Client(raise_request_exception=False)
        assert worker.get(f"/s/{study.slug}/start/?PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=s1").status_code == 302
        started = time.monotonic()
        for n in range(4):
            assignment, context = current_hit(worker, study.slug)
            response = worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "left", "key": context["key"]})
            assert response.status_code == 302, (n, response.status_code)
        seconds = time.monotonic() - started
    finally:
        use_broker(*previous)
        jobs._broker["retry_at"] = 0.0  # the next test that sends asks the broker at once
    assert Judgement.objects.count() == 4
    assert PairState.objects.filter(study=study, status="filled").exists()
    assert any("broker" in message for message in outage_warnings(caplog)), outage_warnings(caplog)
    print(f"4 answers with the broker away: {seconds:.2f} s")
    settings.EVALAPP_BACKGROUND_WORK = "inline"
    runtime.protocol_sweep()  # what beat runs once the broker is back
    assert not PairState.objects.filter(study=study, status="filled").exists()


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own on a free port (no persistence), stopped at the end."""
    if not shutil.which("redis-server"):
        pytest.skip("no redis-server")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    yield server, port
    os.kill(server.pid, signal.SIGCONT)
    server.terminate()
    server.wait(timeout=10)


def test_a_redis_that_stops_answering_and_comes_back_serves_no_stale_session(settings, caplog, own_redis):
    """Redis stopped (SIGSTOP: connections are accepted and never answered) while a worker
    enters a second study: their session is saved to the database, Redis keeps its copy from
    before. When Redis answers again the keys written meanwhile are deleted from it first, so
    the worker keeps the second study (read back stale, the session lacked it: a 403)."""
    server, port = own_redis
    caches_declared = deployment_caches(f"redis://127.0.0.1:{port}/0")
    for cache in caches_declared.values():
        cache["OPTIONS"] = {**cache["OPTIONS"], "retry_seconds": 1}  # the test waits less than 5 s
    settings.CACHES = caches_declared
    caplog.set_level(logging.WARNING)
    first = study_import(source=bundle_bytes(crowd_rows()), slug="first")
    second = study_import(source=bundle_bytes(crowd_rows()), slug="second")
    worker = Client(raise_request_exception=False)
    assert worker.get("/s/first/start/?PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=s1").status_code == 302
    assert worker.get("/s/first/annotate/").status_code == 200
    os.kill(server.pid, signal.SIGSTOP)
    started = time.monotonic()
    assert worker.get("/s/second/start/?PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=s1").status_code == 302
    assert worker.get("/s/second/annotate/").status_code == 200
    assert worker.get("/s/first/annotate/").status_code == 200
    stopped_for = time.monotonic() - started
    assert len(outage_warnings(caplog)) == 1
    os.kill(server.pid, signal.SIGCONT)
    time.sleep(1.1)  # retry_seconds: the next call asks Redis again
    for slug in ("second", "first"):
        assert worker.get(f"/s/{slug}/annotate/").status_code == 200, slug
    assert any("answers again" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    # Counts are Redis's again: a limit holds across this process's cache objects.
    rates(settings, crowd_start="1/minute")
    assert Client().get("/s/first/start/?PROLIFIC_PID=p2&STUDY_ID=x&SESSION_ID=s2").status_code == 302
    assert_throttled(Client().get("/s/first/start/?PROLIFIC_PID=p3&STUDY_ID=x&SESSION_ID=s3"))
    print(f"three requests while Redis was stopped: {stopped_for:.2f} s")
