"""Background jobs in a lane's child process (annotation/jobs.py, settings.EVALAPP_PROCESS_LANES):
the embedded default computes the metrics table and the dashboard's data in a child of the web
process, so a crowd request never waits for the interpreter behind seconds of a report's CPU."""
import multiprocessing
import time

import pytest

from annotation import jobs, reports
from annotation.services.studies import study_import
from tests.builders.backends import database_url
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reports_in_a_child_process(settings, monkeypatch, tmp_path):
    """Mode "thread" with the reports lane in a child process that reads this test's database
    and shares its cache through files (as gunicorn's processes share var/cache)."""
    cache = {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(tmp_path / "cache")}
    settings.CACHES = {**settings.CACHES, "shared": cache}
    settings.EVALAPP_BACKGROUND_WORK = "thread"
    settings.EVALAPP_PROCESS_LANES = frozenset({"reports"})
    # what the spawned child reads: the embedded settings on this test's database and files
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "evalapp.settings.dev")
    monkeypatch.setenv("DATABASE_URL", database_url())
    monkeypatch.setenv("EVALAPP_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("EVALAPP_CACHE_URL", raising=False)
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    yield
    jobs.processes_stop()


def test_the_metrics_table_is_computed_in_the_lanes_child_process_not_a_thread(reports_in_a_child_process):
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert reports.study_metrics_table(study=study) is None
    reports.study_metrics_table_request(study=study)
    deadline = time.monotonic() + 90
    table = None
    while table is None and time.monotonic() < deadline:
        time.sleep(0.2)
        table = reports.study_metrics_table(study=study)
    assert table is not None, "the child process did not compute the table"
    assert [row["name"] for row in table["rows"]] == ["m"]
    # the lane's child is alive (the thread lane starts no process; its thread may be left idle
    # by another test of this process, so threads say nothing here)
    assert [p for p in multiprocessing.active_children() if p.name.startswith("SpawnProcess")], \
        "no child process: the table was computed in a thread of this process"
    # a second request is served by the same child (no new process per job)
    pools = dict(jobs._processes)
    reports.study_metrics_table_request(study=study)
    assert dict(jobs._processes) == pools
