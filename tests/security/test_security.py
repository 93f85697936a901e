"""Hostile names and texts, formula cells, a foreign metric, and the deployment checklist."""
import csv
import io
import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from annotation.models import Metric, Study
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import REPO, bundle_bytes
from tests.builders.hostile import IMG, SCRIPT, hostile_rows

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEMS = (SCRIPT, IMG, "=HYPERLINK(\"http://x\")", "+cmd|calc", "-2+3", "@SUM(1)")


@pytest.fixture
def hostile_study():
    study = study_import(source=bundle_bytes(hostile_rows()), slug="hostile")
    researcher = User.objects.create_user("res", is_staff=True, is_superuser=True)
    study_membership_set(study=study, user=researcher, role="researcher")
    client = Client()
    client.force_login(researcher)
    return study, client


def assert_escaped(body: str):
    assert SCRIPT not in body and IMG not in body and "<img src=x" not in body
    assert "&lt;script&gt;" in body or "\\u003Cscript\\u003E" in body


def test_hostile_text_is_escaped_on_the_annotate_page(hostile_study):
    study, _ = hostile_study
    worker = Client()
    worker.get("/s/hostile/start/?PROLIFIC_PID=w&SESSION_ID=s")
    page = worker.get("/s/hostile/annotate/")
    assert page.context["assignment"] is not None
    assert_escaped(page.content.decode())


def test_hostile_names_are_escaped_on_the_dashboard_and_in_the_admin(hostile_study):
    study, client = hostile_study
    for url in ("/s/hostile/dashboard/", "/s/hostile/settings/", "/", "/admin/annotation/study/",
                f"/admin/annotation/study/{study.pk}/change/", "/admin/annotation/system/",
                "/admin/annotation/item/", "/admin/annotation/output/", "/admin/annotation/comparison/",
                "/admin/annotation/judgement/", "/admin/annotation/annotator/", "/admin/annotation/pairstate/",
                f"/admin/annotation/output/{study.items.first().outputs.first().pk}/change/"):
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert SCRIPT not in body and IMG not in body, url


def test_csv_exports_neutralise_formulas_and_are_not_sniffed_as_html(hostile_study):
    study, client = hostile_study
    worker = Client()
    worker.get("/s/hostile/start/?PROLIFIC_PID=%3Devil()&SESSION_ID=s")
    hit = worker.get("/s/hostile/annotate/").context
    assert worker.post(f"/s/hostile/hits/{hit['assignment'].pk}/",
                       {"answer": "right", "key": hit["key"]}).status_code == 302
    every_cell = []
    for name in ("judgements", "decisions"):
        response = client.get(f"/s/hostile/export/{name}.csv")
        assert response["Content-Type"] == "text/csv; charset=utf-8" and response["X-Content-Type-Options"] == "nosniff"
        assert response["Content-Disposition"].startswith("attachment;")
        body = b"".join(response.streaming_content if response.streaming else [response.content]).decode()
        cells = [cell for line in csv.reader(io.StringIO(body)) for cell in line]
        every_cell += cells
        assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")], name
        # A cell starting with "-" is a number (a preference, a θ), never text a spreadsheet would run.
        for cell in (c for c in cells if c.startswith("-")):
            float(cell)
    assert {"'=HYPERLINK(\"http://x\")", "'-2+3", "'+cmd|calc", "'@SUM(1)", "'=1+0"} <= set(every_cell)
    judgements = list(csv.DictReader(io.StringIO(client.get("/s/hostile/export/judgements.csv").getvalue().decode())))
    assert {j["annotator"] for j in judgements} == {"'=cmd()", "'=evil()"}
    assert {j["value"] for j in judgements} <= {"-1", "0", "1"}  # numbers are left as they are


def test_a_study_cannot_use_another_studys_metric(hostile_study):
    study, client = hostile_study
    other = study_import(source=bundle_bytes(hostile_rows()), slug="other")
    foreign = Metric.objects.get(study=other, name="m")
    study.metric = foreign
    with pytest.raises(ValidationError, match="belongs to another study"):
        study.full_clean()
    page = client.get(f"/admin/annotation/study/{study.pk}/change/")
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and not isinstance(v, list)}
    data.update({"metric": foreign.pk, "memberships-TOTAL_FORMS": 0, "memberships-INITIAL_FORMS": 0,
                 "systems-TOTAL_FORMS": 0, "systems-INITIAL_FORMS": 0})
    # The protocol has started (at import): the metric is read-only in the admin, a forged
    # value is ignored. A study not started yet is tested in test_study_management.py.
    assert "metric" not in form.fields
    client.post(f"/admin/annotation/study/{study.pk}/change/", data)
    assert Study.objects.get(pk=study.pk).metric.study_id == study.pk


def test_check_deploy_is_clean_under_prod_settings():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}  # the browser tests' own
    env = {**env, "DJANGO_SETTINGS_MODULE": "evalapp.settings.prod",
           "DJANGO_SECRET_KEY": "x7Kq2-a long random production secret, 50+ characters, not this one",
           "DJANGO_ALLOWED_HOSTS": "evalapp.example.org", "EVALAPP_CACHE_URL": "redis://127.0.0.1:6379/0"}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    # Without Redis the rate limits are counted in files every process of the host shares: clean too.
    del env["EVALAPP_CACHE_URL"]
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "no issues" in result.stdout, result.stdout + result.stderr


def test_check_deploy_warns_when_rate_limits_count_per_process(settings, tmp_path):
    from django.core.checks import run_checks

    settings.CACHES = {**settings.CACHES, "throttle": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(tmp_path)}}
    assert not [m for m in run_checks(include_deployment_checks=True) if m.id == "evalapp.W001"]
    settings.CACHES = {**settings.CACHES, "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert [m.id for m in run_checks(include_deployment_checks=True) if m.id == "evalapp.W001"] == ["evalapp.W001"]


def test_a_nul_in_a_query_parameter_is_a_400_on_pages_and_the_api(client):
    """No text column holds a NUL (PostgreSQL raised, a 500): schemathesis sent one in the
    report's ?metric= on PostgreSQL; a page's ?first= took the same path."""
    study = study_import(source=bundle_bytes(hostile_rows()))
    researcher = User.objects.create_user("nul-r", password="pw-12345678", is_staff=True)
    client.force_login(researcher)
    page = client.get(f"/s/{study.slug}/pair/", {"first": "a\x00b", "second": "c"})
    assert page.status_code == 400 and b"NUL character" in page.content
    api = client.get(f"/api/studies/{study.slug}/report/", {"metric": "m\x00"})
    assert api.status_code == 400 and api.json()["code"] == "invalid" and "metric" in api.json()["errors"]
