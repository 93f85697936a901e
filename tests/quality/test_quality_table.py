"""The annotator quality table: dashboard panel (sortable without JavaScript), CSV, API, and the
exclude / re-include actions on it; exports mark excluded workers' judgements."""
import csv
import io
import random

import pytest
from django.contrib.auth.models import User

from annotation.models import Annotator, ExclusionEvent, Study
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.annotating import workers_of
from tests.builders.spam import HONEST, annotate_with_spammer, spam_bundle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spammed(client):
    study = study_import(source=spam_bundle("table", items=10))
    annotate_with_spammer(study, workers_of(HONEST[:3] + ["spammer"]), random.Random(5), spammer="spammer")
    user = User.objects.create_user("res", password="pw-12345678")
    study_membership_set(study=study, user=user, role="researcher")
    client.force_login(user)
    return study, Annotator.objects.get(external_id="spammer")


def test_dashboard_panel_sorts_without_javascript_and_flags_the_spammer(client, spammed):
    study, spammer = spammed
    page = client.get(f"/s/{study.slug}/dashboard/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="quality"' in html and "too_fast" in html
    rows = page.context["quality"]
    assert rows[0]["annotator"] == "spammer"  # default: most flags first
    by_speed = client.get(f"/s/{study.slug}/dashboard/?qsort=median_seconds&qorder=desc").context["quality"]
    assert by_speed[-1]["annotator"] == "spammer" and by_speed[0]["median_seconds"] >= 15
    assert "?qsort=median_seconds&amp;qorder=asc#quality" in client.get(
        f"/s/{study.slug}/dashboard/?qsort=median_seconds&qorder=desc").content.decode()
    assert client.get(f"/s/{study.slug}/dashboard/?qsort=nonsense").status_code == 400


def test_csv_and_api_list_every_worker(client, spammed):
    study, spammer = spammed
    response = client.get(f"/s/{study.slug}/export/quality.csv?sort=agreement&order=asc")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {r["annotator"] for r in rows} == set(HONEST[:3]) | {"spammer"}
    spam = next(r for r in rows if r["annotator"] == "spammer")
    assert "too_fast" in spam["flags"] and spam["excluded"] == "0"
    api = client.get(f"/api/studies/{study.slug}/annotators/?sort=judgements&order=desc").json()
    assert [r["judgements"] for r in api] == sorted((r["judgements"] for r in api), reverse=True)
    assert next(r for r in api if r["annotator"] == "spammer")["flags"] == ["too_fast"] or \
        "too_fast" in next(r for r in api if r["annotator"] == "spammer")["flags"]
    assert client.get(f"/api/studies/{study.slug}/annotators/?sort=x").status_code == 400


def test_exclude_and_reinclude_from_the_panel_and_the_api(client, spammed):
    study, spammer = spammed
    url = f"/s/{study.slug}/annotators/{spammer.pk}/exclusion/"
    response = client.post(url, {"action": "exclude", "reason": "clicks through"})
    assert response.status_code == 302 and response["Location"].endswith("/dashboard/#quality")
    study.refresh_from_db()
    assert study.exclusions_active == 1 and study.protocol_lost_judgements > 0
    page = client.get(f"/s/{study.slug}/dashboard/")
    row = next(r for r in page.context["quality"] if r["annotator"] == "spammer")
    assert row["excluded"] and "Re-include" in page.content.decode()
    assert "clicks through" in page.content.decode()  # the exclusion log
    assert f"{study.protocol_lost_judgements} judgement" in page.content.decode()  # the budget says so
    judgements = list(csv.DictReader(io.StringIO(b"".join(
        client.get(f"/s/{study.slug}/export/judgements.csv").streaming_content).decode())))
    spam_rows = [r for r in judgements if r["annotator"] == "spammer"]
    assert spam_rows and all(r["excluded"] == "1" and r["counted"] == "0" for r in spam_rows)
    assert all(r["counted"] == "1" for r in judgements if r["annotator"] != "spammer")
    api_rows = client.get(f"/api/studies/{study.slug}/judgements/?annotator=spammer").json()["results"]
    assert api_rows and all(r["excluded"] and r["kind"] == "real" for r in api_rows)

    api = f"/api/studies/{study.slug}/annotators/{spammer.pk}/exclusion/"
    answer = client.post(api, {"excluded": False, "reason": "fine after all"}, content_type="application/json")
    assert answer.status_code == 200 and answer.json() == {"annotator_id": spammer.pk, "excluded": False,
                                                           "changed": True}
    study.refresh_from_db()
    assert (study.exclusions_active, study.protocol_lost_judgements) == (0, 0)
    assert list(ExclusionEvent.objects.filter(study=study).order_by("id").values_list("action", "reason")) == [
        ("exclude", "clicks through"), ("include", "fine after all")]
    # A worker of another study cannot be named here.
    other = Annotator.objects.create(platform="prolific", external_id="stranger")
    assert client.post(f"/api/studies/{study.slug}/annotators/{other.pk}/exclusion/", {"excluded": True},
                       content_type="application/json").status_code == 404
    assert not Study.objects.get(pk=study.pk).exclusions_active


def test_settings_page_sets_checks_and_exclusion_rules(client, spammed):
    study, _ = spammed
    page = client.get(f"/s/{study.slug}/settings/")
    assert "Exclude workers flagged too fast" in page.content.decode()
    base = {"status": "running", "budget": study.budget, "lease_timeout_seconds": 900, "completion_code": "",
            "instructions": "", "item_choice": "uniform", "item_choice_temperature": 0.25}
    response = client.post(f"/s/{study.slug}/settings/", {**base, "quality_form": "1", "check_every": 0,
                                                          "onboarding_checks": 0, "exclude_too_fast": "on"})
    assert response.status_code == 302
    study.refresh_from_db()
    assert (study.exclude_too_fast, study.exclude_failed_checks) == (True, False)
    # This study has no check lines: asking for checks is refused and names why.
    response = client.post(f"/s/{study.slug}/settings/", {**base, "quality_form": "1", "check_every": 10,
                                                          "exclude_too_fast": "on"})
    assert response.status_code == 400 and "no check items" in response.content.decode()
    # A post without the quality fieldset leaves the rules alone.
    assert client.post(f"/s/{study.slug}/settings/", base).status_code == 302
    study.refresh_from_db()
    assert study.exclude_too_fast and study.check_every == 0


def test_admin_shows_exclusions_read_only(client, spammed):
    study, spammer = spammed
    client.post(f"/s/{study.slug}/annotators/{spammer.pk}/exclusion/", {"action": "exclude"})
    staff = User.objects.create_superuser("boss", password="pw-12345678")
    client.force_login(staff)
    for model in ("annotatorexclusion", "exclusionevent", "checkitem"):
        assert client.get(f"/admin/annotation/{model}/").status_code == 200
    assert "spammer" in client.get("/admin/annotation/exclusionevent/").content.decode()
    assert client.get("/admin/annotation/exclusionevent/add/").status_code == 403
