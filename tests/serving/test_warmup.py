"""A worker's warm-up before it serves (evalapp/warmup.py, gunicorn's post_worker_init)."""
import gc
import logging
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core.wsgi import get_wsgi_application
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from annotation.models import Annotator, Assignment, Comparison, CrowdSession, Study
from annotation.services.studies import study_import
from evalapp.warmup import warm_worker
from tests.builders.backends import WRITE_STATEMENT
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def test_the_warm_up_answers_a_running_studys_entry_and_writes_nothing():
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert study.status == Study.Status.RUNNING
    with CaptureQueriesContext(connection) as captured:
        statuses = warm_worker(get_wsgi_application())
    assert statuses == ["302 Found", "302 Found"]  # the start link without a worker id, the landing
    assert [q["sql"] for q in captured.captured_queries if WRITE_STATEMENT.match(q["sql"])] == []
    for model in (Annotator, CrowdSession, Assignment, Comparison):
        assert not model.objects.exists(), model.__name__


def test_each_request_thread_answers_once_and_keeps_its_connection_open():
    study_import(source=bundle_bytes(crowd_rows()))
    pool = ThreadPoolExecutor(max_workers=3)
    try:
        statuses = warm_worker(get_wsgi_application(), executor=pool, threads=3)
        assert statuses == ["302 Found", "302 Found"] * 3
        assert len(pool._threads) == 3  # one thread a task, as a gunicorn worker's pool
        barrier = threading.Barrier(3, timeout=10)

        def connection_open() -> bool:
            is_open = connection.connection is not None
            barrier.wait()  # so each of the three threads answers once
            return is_open

        assert [task.result() for task in [pool.submit(connection_open) for _ in range(3)]] == [True] * 3
    finally:
        closing = threading.Barrier(3, timeout=10)

        def close() -> None:
            connections.close_all()
            closing.wait()

        for task in [pool.submit(close) for _ in range(3)]:
            task.result()
        pool.shutdown()


def test_without_a_running_study_or_with_a_failing_app_the_worker_is_left_as_it_was(caplog):
    assert warm_worker(get_wsgi_application()) == []
    study_import(source=bundle_bytes(crowd_rows()))

    def broken(environ, start_response):
        raise RuntimeError("boom")

    logger = logging.getLogger("evalapp.warmup")
    logger.addHandler(caplog.handler)  # the project's logging does not propagate to the root
    try:
        assert warm_worker(broken) == []
    finally:
        logger.removeHandler(caplog.handler)
    assert "warm-up failed" in caplog.text


def test_gunicorn_loads_the_hooks():
    run = subprocess.run([sys.executable, "-m", "gunicorn", "--check-config", "-c", "python:evalapp.gunicorn_conf",
                          "evalapp.wsgi"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_warm_up_loads_the_running_studys_metric_labels():
    """A web process's first submit need not read the study's scores: the warm-up has."""
    from annotation.serving import metric_labels

    study = study_import(source=bundle_bytes(crowd_rows()))
    metric_labels._sources.clear()
    metric_labels._lanes.clear()
    warm_worker(get_wsgi_application())
    assert any(key[0] == study.pk for key in metric_labels._sources.keys())


def test_the_warm_up_freezes_the_heap_it_leaves():
    """The collector's full passes skip what a worker holds for good (a pause of 77-87 ms at
    50 x 2,000 otherwise, on whichever request tripped it)."""
    study_import(source=bundle_bytes(crowd_rows()))
    gc.unfreeze()
    held = ["a long-lived object"]
    try:
        warm_worker(get_wsgi_application())
        assert gc.get_freeze_count() > 0
        assert not any(o is held for o in gc.get_objects(generation=2))  # frozen, not in the oldest
    finally:
        gc.unfreeze()
