"""The researcher dashboard and exports through HTTP."""
import csv
import io
import json

import pytest
from django.contrib.auth.models import User

from annotation.models import Judgement
from annotation.services import study_import, study_membership_set
from tests.annotation.test_serving import crowd_rows, current_hit, start_worker, truthful_answer
from tests.conftest import BUNDLES, bundle_bytes

pytestmark = pytest.mark.django_db(transaction=True)


def researcher_client(client, study, role="researcher"):
    user = User.objects.create_user(f"{role}-{study.slug}", password="pw-12345678")
    study_membership_set(study=study, user=user, role=role)
    client.force_login(user)
    return client


def test_only_researchers_see_the_dashboard(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert client.get(f"/s/{study.slug}/dashboard/").status_code == 302  # to the login page
    researcher_client(client, study, role="annotator")
    assert client.get(f"/s/{study.slug}/dashboard/").status_code == 403
    assert client.get(f"/s/{study.slug}/export/judgements.csv").status_code == 403


def test_dashboard_follows_the_judgements(client):
    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=60)))
    worker = client.__class__()
    start_worker(worker, study.slug, "pid-dash")
    for _ in range(60):
        assignment, context = current_hit(worker, study.slug)
        if assignment is None:
            break
        worker.post(f"/s/{study.slug}/hits/{assignment.pk}/",
                    {"answer": truthful_answer(context["left"], context["right"]), "key": context["key"]})
    researcher_client(client, study)
    response = client.get(f"/s/{study.slug}/dashboard/")
    assert response.status_code == 200
    data = response.context["data"]
    spent = Judgement.objects.count()
    assert data["budget"]["spent"] == spent
    assert data["budget"]["spent"] + data["budget"]["reserved"] + data["budget"]["left"] == 60
    ab = next(p for p in data["pairs"] if (p["first"], p["second"]) == ("A", "B"))
    assert ab["decision"] == 1 and ab["status"] == "decided"
    charts = {c["name"]: c["figure"] for c in response.context["charts"]}
    assert {"dag-protocol", "dag-human", "dag-metric", "timeline"} <= set(charts)
    protocol_dag = charts["dag-protocol"]
    assert {a["text"] for a in protocol_dag["layout"]["annotations"]} == {""}
    partial = client.get(f"/s/{study.slug}/dashboard/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="dashboard-body"') and "<html" not in partial
    rows = list(csv.reader(io.StringIO(b"".join(client.get(
        f"/s/{study.slug}/export/judgements.csv").streaming_content).decode())))
    assert rows[0][:4] == ["item", "first", "second", "value"] and len(rows) == spent + 1
    decisions = list(csv.DictReader(io.StringIO(client.get(f"/s/{study.slug}/export/decisions.csv").content.decode())))
    assert {(d["first"], d["second"]) for d in decisions} == {("A", "B"), ("A", "C"), ("B", "C")}


def test_dashboard_of_an_imported_study_shows_metric_comparison(client):
    study = study_import(source=BUNDLES / "pandalm.jsonl.gz", metric="gpt35", slug="pandalm")
    researcher_client(client, study)
    data = client.get(f"/s/{study.slug}/dashboard/").context["data"]
    assert data["budget"]["imported"] == 2895
    assert 0.6 < data["favi_summary"]["sample_accuracy"] < 0.8
    assert data["spa"] is not None and 0 <= data["spa"]["spa"] <= 1
    assert len(data["per_system_favi"]) == 5


def test_researcher_changes_budget_and_pauses_the_study(client):
    from annotation.models import PairState, Study

    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=6)))
    worker = client.__class__()
    start_worker(worker, study.slug, "pid-settings")
    assignment, context = current_hit(worker, study.slug)
    worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "left", "key": context["key"]})
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/settings/")
    assert page.status_code == 200 and 'name="budget" value="6"' in page.content.decode()
    # A budget of 6 funds a round of 5 and a round of 1; serving fills the round of 1 first,
    # so after one judgement that round is closed and 5 stay asked for.
    assert sorted(PairState.objects.filter(study=study).values_list("quota_left", flat=True)) == [0, 0, 5]
    form = {"status": "running", "budget": 2, "lease_timeout_seconds": 600, "completion_code": "X1",
            "instructions": "Be careful.", "item_choice": "uniform", "item_choice_temperature": 0.25}
    response = client.post(f"/s/{study.slug}/settings/", form)
    assert response.status_code == 400 and "the budget cannot be below 6" in response.content.decode()
    assert Study.objects.get(pk=study.pk).budget == 6
    response = client.post(f"/s/{study.slug}/settings/", {**form, "budget": 40})
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.budget == 40 and study.completion_code == "X1" and study.lease_timeout_seconds == 600
    # The larger budget opens rounds for the two waiting pairs at once.
    assert sorted(PairState.objects.filter(study=study).values_list("quota_left", flat=True)) == [5, 5, 5]
    leased, _ = current_hit(worker, study.slug)
    client.post(f"/s/{study.slug}/settings/", {**form, "budget": 40, "status": "paused"})
    assignment, _ = current_hit(worker, study.slug)
    assert assignment.pk == leased.pk  # the worker's open lease is still theirs ...
    fresh = client.__class__()
    start_worker(fresh, study.slug, "pid-new")
    assert current_hit(fresh, study.slug)[0] is None  # ... but a paused study leases nothing new
