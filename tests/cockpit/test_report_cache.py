"""The study's reports are cached one way (annotation/reports.py, ``CachedReport``): one entry
per study holding the version it was computed for, a lock while a job computes it — the
dashboard's round data and the metrics table alike (issue 40: reports.py held two caches)."""
import ast
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation import reports
from annotation.models import PairState, Study
from annotation.selectors.dashboard import dashboard_version
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.clients import researcher_client

pytestmark = pytest.mark.django_db(transaction=True)

REPORTS = Path(reports.__file__)


def test_only_the_cached_report_touches_the_cache():
    """Every read or write of the shared cache in reports.py is a ``CachedReport`` method."""
    tree = ast.parse(REPORTS.read_text())
    inside = {id(node) for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.name == "CachedReport"
              for node in ast.walk(cls)}
    outside = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Name) and node.func.id in ("_cache", "caches") and id(node) not in inside]
    assert outside == [], f"reports.py reaches the cache outside CachedReport at lines {outside}"
    assert [r.key for r in (reports.DASHBOARD, reports.METRICS_TABLE)] == [
        "evalapp:dashboard:9:{}", "evalapp:metrics-table:2:{}"]


def test_both_reports_keep_one_entry_per_study_with_its_version():
    study = study_import(source=bundle_bytes(crowd_rows()))
    # the metrics table: nothing until asked; the job (inline here) stores it with its version
    assert reports.study_metrics_table(study=study) is None
    reports.study_metrics_table_request(study=study)
    version, table = reports.METRICS_TABLE.read(study.pk)
    assert version == reports.metrics_table_version(study=study)
    assert reports.study_metrics_table(study=study) == table
    assert reports.METRICS_TABLE.claim(study.pk), "the job left its lock behind"
    reports.METRICS_TABLE.release(study.pk)
    # a new version: the old entry is not served, and the next job replaces it in place
    Study.objects.filter(pk=study.pk).update(protocol_seed=study.protocol_seed + 1)
    study.refresh_from_db()
    assert reports.study_metrics_table(study=study) is None
    reports.study_metrics_table_request(study=study)
    assert reports.METRICS_TABLE.read(study.pk)[0] == reports.metrics_table_version(study=study) != version
    # the dashboard: computed in the request the first time, then read from its entry
    data = reports.study_dashboard(study=study)
    version, cached = reports.DASHBOARD.read(study.pk)
    assert version == dashboard_version(study=study) == data["round_version"]
    assert cached["pairs"] == data["pairs"]
    # a held lock keeps a second job from being asked for
    assert reports.DASHBOARD.claim(study.pk) and not reports.DASHBOARD.claim(study.pk)
    reports.DASHBOARD.release(study.pk)


def test_a_cached_dashboard_reads_the_pair_rows_once(client):
    """A pair row is wide (its protocol state): at 200 systems one scan of the study's 19,900 is
    13-16 ms on PostgreSQL, and the cached dashboard made two (its version, then the reserved
    quotas of its budget). Both come from one aggregate now, the budget the same."""
    study = study_import(source=bundle_bytes(crowd_rows()))
    researcher_client(client, study)
    reports.study_dashboard(study=study)
    assert client.get(f"/s/{study.slug}/dashboard/").status_code == 200  # the figures' cache too
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/s/{study.slug}/dashboard/")
        data = reports.study_dashboard(study=study)
    assert page.status_code == 200
    scans = [q["sql"] for q in queries.captured_queries if 'FROM "annotation_pairstate" WHERE' in q["sql"]]
    assert len(scans) == 2, scans  # one per read: the page's, then study_dashboard's
    reserved = sum(PairState.objects.filter(study=study).values_list("quota_left", flat=True))
    assert reserved > 0 and data["budget"]["reserved"] == reserved
