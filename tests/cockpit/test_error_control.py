"""Error control by default (issue 19, the app's side): a new study decides with the
error-controlled rule unless the researcher picks another, every screen, the API and the
decisions export say what a decision guarantees, the paper policy carries its measured
false-decision rate, and the item choice temperature is bounded."""
import csv
import io

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from annotation import guarantees
from annotation.models import MIN_ITEM_CHOICE_TEMPERATURE, PlanJob, Study
from annotation.serving import protocol_state
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from protocol.bundle import BundleError
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.clients import (admin_client, admin_form_data, api_for, api_upload, group_researcher_client,
                                    planner_form_data)

pytestmark = pytest.mark.django_db(transaction=True)

PAPER = {"allocation_policy": "paper", "protocol_rule": "bayes"}


def owned_study(rows, slug, **study_settings):
    """A started study from ``rows`` (its study line updated) and a logged-in researcher's client."""
    rows = [{**rows[0], **study_settings}, *rows[1:]]
    owner = User.objects.create_user(f"owner-{slug}", password="pw-owner-123")
    study = study_import(source=bundle_bytes(rows), slug=slug, created_by=owner)
    client = Client()
    client.force_login(owner)
    return study, client


# --- the default -----------------------------------------------------------------------------


def test_a_bundle_without_a_policy_gets_the_error_controlled_rule(toy_rows):
    assert not {"allocation_policy", "protocol_rule", "family_control"} & set(toy_rows[0])
    study = study_import(source=bundle_bytes(toy_rows), slug="new")
    assert (study.allocation_policy, study.protocol_rule, study.family_control) == ("adaptive", "eprocess", "ebh")
    settings = protocol_state.protocol_settings(study)
    assert (settings.policy, settings.rule) == ("adaptive", "eprocess")
    assert study.guarantee == guarantees.ANYTIME and study.policy_warning == ""


def test_the_bundle_may_ask_for_the_paper_policy_and_a_bad_rule_is_named(toy_rows):
    study = study_import(source=bundle_bytes([{**toy_rows[0], **PAPER, "family_control": "none"}, *toy_rows[1:]]),
                         slug="paper")
    settings = protocol_state.protocol_settings(study)
    assert (settings.policy, settings.rule, study.family_control) == ("paper", "bayes", "none")
    assert study.guarantee == guarantees.PER_LOOK and study.policy_warning == guarantees.PAPER_POLICY_WARNING
    # the bundle reader refuses it itself, naming the choices (the table of study settings)
    with pytest.raises(BundleError, match="study setting 'protocol_rule' must be one of \"eprocess\", \"bayes\", "
                                          "got \"sometimes\""):
        study_import(source=bundle_bytes([{**toy_rows[0], "protocol_rule": "sometimes"}, *toy_rows[1:]]), slug="bad")
    assert not Study.objects.filter(slug="bad").exists()


def test_the_rule_and_family_control_are_fixed_once_started(toy_rows):
    study = study_import(source=bundle_bytes(toy_rows), slug="fixed")
    for field, value in (("protocol_rule", "bayes"), ("family_control", "none")):
        fresh = Study.objects.get(pk=study.pk)
        setattr(fresh, field, value)
        with pytest.raises(ValidationError, match="fixed once the protocol has started"):
            fresh.full_clean()


def test_existing_studies_keep_the_paper_rule_through_the_migration():
    """Rows made before migration 0012 keep what they ran with (the Bayesian rule, no family control);
    rows made after get the error-controlled defaults."""
    executor = MigrationExecutor(connection)
    before = [("annotation", "0011_harden_crowd_identity")]  # the migration under test is the next one
    executor.migrate(before)
    try:
        OldStudy = executor.loader.project_state(before).apps.get_model("annotation", "Study")
        OldStudy.objects.create(slug="old", name="Old", allocation_policy="paper", item_choice="weighted",
                                item_choice_temperature=0.02)
        OldStudy.objects.create(slug="old-adaptive", name="Old adaptive", allocation_policy="adaptive",
                                protocol_strict=True)
    finally:
        # Forward to the latest state, whatever migrations came since: the next tests need it.
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    old, old_adaptive = Study.objects.get(slug="old"), Study.objects.get(slug="old-adaptive")
    assert (old.allocation_policy, old.protocol_rule, old.family_control) == ("paper", "bayes", "none")
    assert old.item_choice_temperature == MIN_ITEM_CHOICE_TEMPERATURE  # raised to the floor, not left to fail
    assert old_adaptive.item_choice_temperature == 0.25
    assert (old_adaptive.allocation_policy, old_adaptive.protocol_rule) == ("adaptive", "bayes")
    assert old.guarantee == guarantees.PER_LOOK and old.policy_warning == guarantees.PAPER_POLICY_WARNING
    assert old_adaptive.guarantee == guarantees.PLANNED_LOOKS and old_adaptive.policy_warning == ""
    new = Study.objects.create(slug="brand-new", name="New")
    assert (new.allocation_policy, new.protocol_rule, new.family_control) == ("adaptive", "eprocess", "ebh")


# --- what every screen says --------------------------------------------------------------------


def test_guarantee_wording_is_one_function_of_rule_and_looks():
    assert guarantees.decision_guarantee(rule="eprocess", strict=False) == "false ± ≤ γ under any number of looks"
    assert guarantees.decision_guarantee(rule="eprocess", strict=True) == guarantees.ANYTIME
    assert guarantees.decision_guarantee(rule="bayes", strict=True) == "false ± ≤ γ over the planned looks"
    assert guarantees.decision_guarantee(rule="bayes", strict=False) == "false ± ≤ γ per look only"
    assert guarantees.policy_warning(policy="paper", rule="bayes", strict=False) == (
        "paper policy: decides about one truly null pair in five at γ = 0.05 "
        "(measured 0.21 on SummEval relevance, docs/results.md)")
    assert guarantees.policy_warning(policy="paper", rule="eprocess", strict=False) == ""
    assert guarantees.policy_warning(policy="paper", rule="bayes", strict=True) == ""


def test_the_help_page_explains_each_guarantee(client):
    page = _text(client.get("/help/"))
    for text in (guarantees.ANYTIME, guarantees.PER_LOOK, guarantees.PLANNED_LOOKS, guarantees.PAPER_POLICY_WARNING):
        assert text in page


def _text(response) -> str:
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def test_settings_dashboard_and_pair_page_state_the_guarantee_and_the_paper_warning(toy_rows):
    paper, client = owned_study(toy_rows, "paper", **PAPER)
    for url in ("/s/paper/settings/", "/s/paper/dashboard/", "/s/paper/pair/?first=A&second=B"):
        page = _text(client.get(url))
        assert guarantees.PER_LOOK in page, url
        assert guarantees.PAPER_POLICY_WARNING in page, url
    controlled, client = owned_study(toy_rows, "controlled")
    for url in ("/s/controlled/settings/", "/s/controlled/dashboard/", "/s/controlled/pair/?first=A&second=B"):
        page = _text(client.get(url))
        assert guarantees.ANYTIME in page and guarantees.PAPER_POLICY_WARNING not in page, url
    assert "Error-controlled (e-process)" in _text(client.get("/s/controlled/settings/"))
    assert "e-process (its betting wealth) reaches 1/γ" in _text(client.get("/s/controlled/pair/?first=A&second=B"))
    strict, client = owned_study(toy_rows, "strict", **PAPER)
    Study.objects.filter(pk=strict.pk).update(protocol_strict=True)
    page = _text(client.get("/s/strict/dashboard/"))
    assert guarantees.PLANNED_LOOKS in page and guarantees.PAPER_POLICY_WARNING not in page


def test_a_draft_offers_the_rule_labels_the_paper_policy_and_launches_with_the_choice(toy_rows):
    rows = [{**toy_rows[0]}, *toy_rows[1:]]
    study = study_import(source=bundle_bytes(rows), slug="d", start=False)
    user, client = group_researcher_client()
    study_membership_set(study=study, user=user, role="researcher")
    page = _text(client.get("/s/d/settings/"))
    assert 'name="protocol_rule"' in page and 'name="family_control"' in page
    assert f"Paper (Algorithm 2) — {guarantees.PAPER_POLICY_WARNING}" in page
    assert guarantees.ANYTIME in page  # the draft's default
    draft = {"action": "draft", "metric": "metric:rouge", "gamma": "0.05", "batch_size": "2", "budget": "12",
             "ratings_per_item": "1", "allocation_policy": "paper", "item_choice": "uniform",
             "protocol_rule": "bayes", "family_control": "none", "pair_design": "all_pairs"}
    assert client.post("/s/d/settings/", draft).status_code == 302
    page = _text(client.get("/s/d/settings/"))
    assert guarantees.PER_LOOK in page and guarantees.PAPER_POLICY_WARNING in page
    assert client.post("/s/d/settings/", {"action": "launch"}).status_code == 302
    study.refresh_from_db()
    assert protocol_state.protocol_settings(study).rule == "bayes"


def test_admin_adds_a_study_with_the_error_controlled_rule_and_freezes_it_once_started(toy_rows):
    client = admin_client()
    page = client.get("/admin/annotation/study/add/")
    form = page.context["adminform"].form
    assert form["protocol_rule"].value() == "eprocess" and form["allocation_policy"].value() == "adaptive"
    assert form["family_control"].value() == "ebh"
    study = study_import(source=bundle_bytes(toy_rows), slug="adm")
    page, _ = admin_form_data(client, study)
    assert "protocol_rule" not in page.context["adminform"].form.fields
    assert "family_control" not in page.context["adminform"].form.fields


def test_the_api_shows_the_rule_and_guarantee_and_takes_them_at_import():
    researcher, _ = api_for("r", researcher=True)
    assert api_upload(researcher, crowd_rows(), slug="s1").status_code == 201
    body = researcher.get("/api/studies/s1/").json()
    assert (body["allocation_policy"], body["protocol_rule"], body["family_control"]) == ("adaptive", "eprocess", "ebh")
    assert body["guarantee"] == guarantees.ANYTIME and body["policy_warning"] == ""
    response = api_upload(researcher, crowd_rows(), slug="s2", protocol_rule="bayes", allocation_policy="paper")
    assert response.status_code == 201, response.content[:300]
    assert response.json()["guarantee"] == guarantees.PER_LOOK
    listed = {s["slug"]: s for s in researcher.get("/api/studies/").json()}
    assert listed["s2"]["policy_warning"] == guarantees.PAPER_POLICY_WARNING
    assert protocol_state.protocol_settings(Study.objects.get(slug="s2")).rule == "bayes"
    decisions = researcher.get("/api/studies/s2/decisions/").json()
    assert (decisions["rule"], decisions["guarantee"], decisions["policy_warning"]) == (
        "bayes", guarantees.PER_LOOK, guarantees.PAPER_POLICY_WARNING)
    response = api_upload(researcher, crowd_rows(), slug="s3", protocol_rule="often")
    assert response.status_code == 400 and "protocol_rule" in response.json()["errors"]


def test_decisions_csv_names_the_rule_and_what_it_guarantees(toy_rows):
    for slug, settings, guarantee, warning in (("p", PAPER, guarantees.PER_LOOK, guarantees.PAPER_POLICY_WARNING),
                                               ("e", {}, guarantees.ANYTIME, "")):
        study, client = owned_study(toy_rows, slug, **settings)
        rows = list(csv.DictReader(io.StringIO(_text(client.get(f"/s/{slug}/export/decisions.csv")))))
        assert len(rows) == 3
        assert {(r["rule"], r["guarantee"], r["warning"]) for r in rows} == {(study.protocol_rule, guarantee, warning)}


# --- the temperature bound ---------------------------------------------------------------------


def test_the_item_choice_temperature_is_bounded_with_a_reason(toy_rows):
    study, client = owned_study(toy_rows, "t")
    form = {"status": "running", "budget": study.budget, "lease_timeout_seconds": 900, "completion_code": "",
            "instructions": "", "item_choice": "weighted"}
    response = client.post("/s/t/settings/", {**form, "item_choice_temperature": "0.05"})
    assert response.status_code == 400
    error = str(response.context["form"].errors["item_choice_temperature"])
    assert f"at least {MIN_ITEM_CHOICE_TEMPERATURE}" in error and "design weights" in error
    assert "because temperatures below 0.1" in _text(client.get("/s/t/settings/"))  # the page says why
    assert client.post("/s/t/settings/", {**form, "item_choice_temperature": "0.1"}).status_code == 302
    assert Study.objects.get(pk=study.pk).item_choice_temperature == 0.1

    researcher, _ = api_for("r", researcher=True)
    assert api_upload(researcher, crowd_rows(), slug="a").status_code == 201
    response = researcher.patch("/api/studies/a/settings/", {"item_choice_temperature": 0.01}, format="json")
    assert response.status_code == 400
    assert "design weights" in str(response.json()["errors"]["item_choice_temperature"])
    # The admin (model validation) refuses it too.
    fresh = Study.objects.get(pk=study.pk)
    fresh.item_choice_temperature = 0.02
    with pytest.raises(ValidationError, match="at least 0.1"):
        fresh.full_clean()


# --- the planner -------------------------------------------------------------------------------


def test_the_planner_replays_the_studys_rule():
    
    researcher, _ = api_for("r", researcher=True)
    assert api_upload(researcher, crowd_rows(), slug="pl", protocol_rule="eprocess").status_code == 201
    study = Study.objects.get(slug="pl")
    user, client = group_researcher_client()
    study_membership_set(study=study, user=user, role="researcher")
    assert "Error-controlled (e-process)" in _text(client.get("/s/pl/plan/"))
    assert client.post("/s/pl/plan/", planner_form_data()).status_code == 302
    job = PlanJob.objects.get(study=study)
    assert job.params["rule"] == "eprocess"
