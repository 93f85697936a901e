"""Studies managed in the app (issue 12, item 6): the upload's metric choice, the members page,
protocol parameters fixed once the protocol has started, and a study's metric being its own."""
import gzip
import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from annotation import models
from annotation.services.members import study_membership_remove, study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes
from tests.builders.clients import admin_client, admin_form_data, group_researcher_client

pytestmark = pytest.mark.django_db


def upload_file(rows, name="toy.jsonl.gz"):
    data = io.BytesIO(gzip.compress(bundle_bytes(rows)))
    data.name = name
    return data


def staged_token(response) -> str:
    match = re.search(r'name="staged" value="([^"]+)"', response.content.decode())
    assert match, "the metric step carries the staged upload's token"
    return match.group(1)


# --- upload: the metric picker -------------------------------------------------------------


def test_upload_lists_the_bundles_metrics_and_imports_nothing_yet(toy_rows):
    _, client = group_researcher_client()
    response = client.post("/studies/upload/", {"bundle": upload_file(toy_rows), "slug": "picked"})
    assert response.status_code == 200
    body = response.content.decode()
    # Both of the bundle's metrics are offered, by kind, with the bundle's own setting selected.
    assert '<option value="metric:rouge" selected>rouge (score per output)</option>' in body
    assert '<option value="metric:judge">judge (pairwise preference)</option>' in body
    assert '<option value="none">No metric: human-only study</option>' in body
    assert "human-only" in body and "without a metric" in body.lower()
    assert "3 systems" in body and "2 items" in body and "6 comparisons" in body and "2 human judgements" in body
    assert models.Study.objects.count() == 0


def test_choosing_a_metric_imports_and_lands_on_the_new_study(toy_rows):
    user, client = group_researcher_client()
    token = staged_token(client.post("/studies/upload/", {"bundle": upload_file(toy_rows), "slug": "picked"}))
    response = client.post("/studies/upload/", {"staged": token, "metric": "metric:judge", "slug": "picked"})
    assert response.status_code == 302 and response["Location"] == "/s/picked/dashboard/"
    study = models.Study.objects.get(slug="picked")
    assert study.metric.name == "judge"  # the researcher's choice, not the bundle's "rouge"
    assert study.memberships.get().user == user
    page = client.get(response["Location"])
    assert "Imported study Toy study" in page.content.decode()
    # The staged upload is gone: posting its token again imports nothing a second time.
    again = client.post("/studies/upload/", {"staged": token, "metric": "metric:judge", "slug": "picked-2"})
    assert again.status_code == 400 and "expired or was imported already" in again.content.decode()
    assert models.Study.objects.count() == 1


def test_no_metric_chosen_is_refused_and_human_only_must_be_explicit(toy_rows):
    _, client = group_researcher_client()
    rows = [{**toy_rows[0]}] + toy_rows[1:]
    del rows[0]["metric"]  # the bundle names no metric: nothing is preselected
    first = client.post("/studies/upload/", {"bundle": upload_file(rows), "slug": "h"})
    assert '<option value="" selected>' in first.content.decode()
    token = staged_token(first)
    response = client.post("/studies/upload/", {"staged": token, "metric": "", "slug": "h"})
    assert response.status_code == 400
    assert "Choose the metric for the protocol, or &quot;No metric: human-only study&quot;" in \
        response.content.decode()
    assert models.Study.objects.count() == 0
    response = client.post("/studies/upload/", {"staged": token, "metric": "none", "slug": "h"})
    assert response.status_code == 302 and response["Location"] == "/s/h/dashboard/"
    assert models.Study.objects.get(slug="h").metric is None


def test_human_only_overrides_the_bundles_metric_setting(toy_rows):
    _, client = group_researcher_client()
    token = staged_token(client.post("/studies/upload/", {"bundle": upload_file(toy_rows), "slug": "h2"}))
    assert client.post("/studies/upload/", {"staged": token, "metric": "none", "slug": "h2"}).status_code == 302
    assert models.Study.objects.get(slug="h2").metric is None


def test_a_metric_not_in_the_bundle_and_a_taken_slug_are_named(toy_rows):
    _, client = group_researcher_client()
    study_import(source=bundle_bytes(toy_rows), slug="taken")
    response = client.post("/studies/upload/", {"bundle": upload_file(toy_rows), "slug": "taken"})
    assert response.status_code == 400 and "a study with slug &#x27;taken&#x27; exists already" in \
        response.content.decode()
    token = staged_token(client.post("/studies/upload/", {"bundle": upload_file(toy_rows), "slug": "fresh"}))
    response = client.post("/studies/upload/", {"staged": token, "metric": "metric:bleu", "slug": "fresh"})
    assert response.status_code == 400 and "metric:bleu is not one of the available choices" in \
        response.content.decode()
    # The upload is still staged after an error: a corrected choice imports it.
    response = client.post("/studies/upload/", {"staged": token, "metric": "metric:rouge", "slug": "fresh"})
    assert response.status_code == 302


def test_a_staged_upload_belongs_to_its_uploader(toy_rows):
    _, client = group_researcher_client()
    token = staged_token(client.post("/studies/upload/", {"bundle": upload_file(toy_rows), "slug": "mine"}))
    _, other = group_researcher_client("otto")
    response = other.post("/studies/upload/", {"staged": token, "metric": "metric:rouge", "slug": "mine"})
    assert response.status_code == 400 and models.Study.objects.count() == 0
    for bad in ("../../etc/passwd", "x", ""):
        assert other.post("/studies/upload/", {"staged": bad, "metric": "none"}).status_code == 400


# --- members -------------------------------------------------------------------------------


@pytest.fixture
def study(toy_rows):
    owner = User.objects.create_user("owner", email="owner@example.org", password="pw-owner-123")
    return study_import(source=bundle_bytes(toy_rows), slug="team", created_by=owner)


def test_member_add_by_username_or_email(study):
    from annotation.services.members import study_member_add

    User.objects.create_user("ann", email="Ann@Example.org")
    User.objects.create_user("bob", email="bob@example.org")
    assert study_member_add(study=study, identifier="ann@example.org", role="annotator").user.username == "ann"
    assert study_member_add(study=study, identifier="bob", role="researcher").role == "researcher"
    with pytest.raises(ValueError, match="no user with the username or e-mail 'carol'"):
        study_member_add(study=study, identifier="carol", role="annotator")
    with pytest.raises(ValueError, match="'ann' is a member already \\(annotator\\)"):
        study_member_add(study=study, identifier="ann", role="researcher")
    User.objects.create_user("cid")
    with pytest.raises(ValidationError):
        study_member_add(study=study, identifier="cid", role="owner")
    assert not study.memberships.filter(user__username="cid").exists()


def test_member_invite_creates_a_user_who_sets_a_password_once(study):
    from annotation.services.members import study_member_invite

    user = study_member_invite(study=study, username="newbie", email="newbie@example.org", role="annotator")
    assert not user.has_usable_password()
    assert study.memberships.get(user=user).role == "annotator"
    with pytest.raises(ValidationError, match="already exists"):
        study_member_invite(study=study, username="newbie", email="x@example.org", role="annotator")
    with pytest.raises(ValueError, match="e-mail 'NEWBIE@example.org' belongs to 'newbie'"):
        study_member_invite(study=study, username="other", email="NEWBIE@example.org", role="annotator")


def test_the_last_researcher_stays(study):
    owner = User.objects.get(username="owner")
    with pytest.raises(ValueError, match="at least one researcher"):
        study_membership_remove(study=study, user=owner)
    with pytest.raises(ValueError, match="at least one researcher"):
        study_membership_set(study=study, user=owner, role="annotator")
    assert study.memberships.get(user=owner).role == "researcher"
    second = User.objects.create_user("second")
    study_membership_set(study=study, user=second, role="researcher")
    study_membership_set(study=study, user=owner, role="annotator")
    study_membership_remove(study=study, user=owner)
    assert list(study.memberships.values_list("user__username", "role")) == [("second", "researcher")]


def test_members_page_add_invite_change_remove_without_javascript(study):
    owner = User.objects.get(username="owner")
    client = Client()
    client.force_login(owner)
    User.objects.create_user("ann", email="ann@example.org")
    page = client.get("/s/team/members/")
    assert page.status_code == 200 and "owner" in page.content.decode()
    response = client.post("/s/team/members/", {"action": "add", "identifier": "ann@example.org", "role": "annotator"})
    assert response.status_code == 302 and response["Location"] == "/s/team/members/"
    assert study.memberships.get(user__username="ann").role == "annotator"
    response = client.post("/s/team/members/", {"action": "add", "identifier": "nobody", "role": "annotator"})
    assert response.status_code == 400 and "no user with the username or e-mail &#x27;nobody&#x27;" in \
        response.content.decode()
    response = client.post("/s/team/members/", {"action": "invite", "username": "newbie",
                                                "email": "newbie@example.org", "role": "researcher"})
    assert response.status_code == 200
    link = re.search(r'http://testserver(/accounts/reset/[^/"]+/set-password/)|'
                     r'http://testserver(/accounts/reset/[^/"]+/[^/"]+/)', response.content.decode())
    assert link, "the invite shows a set-password link"
    # The invited user sets a password with the link, then can log in and see the study.
    anonymous = Client()
    form = anonymous.get(link.group(0).replace("http://testserver", ""), follow=True)
    assert form.status_code == 200 and "new_password1" in form.content.decode()
    done = anonymous.post(form.redirect_chain[-1][0], {"new_password1": "Fresh-pass-9876",
                                                       "new_password2": "Fresh-pass-9876"})
    assert done.status_code == 302
    assert anonymous.login(username="newbie", password="Fresh-pass-9876")
    assert anonymous.get("/s/team/dashboard/").status_code == 200
    # The link works once.
    assert "new_password1" not in Client().get(link.group(0).replace("http://testserver", ""),
                                               follow=True).content.decode()
    ann = User.objects.get(username="ann")
    response = client.post("/s/team/members/", {"action": "role", "user": ann.pk, "role": "researcher"})
    assert response.status_code == 302 and study.memberships.get(user=ann).role == "researcher"
    response = client.post("/s/team/members/", {"action": "remove", "user": ann.pk})
    assert response.status_code == 302 and not study.memberships.filter(user=ann).exists()


def test_members_page_refuses_the_last_researcher_and_outsiders(study):
    owner = User.objects.get(username="owner")
    client = Client()
    client.force_login(owner)
    response = client.post("/s/team/members/", {"action": "remove", "user": owner.pk})
    assert response.status_code == 400 and "at least one researcher" in response.content.decode()
    response = client.post("/s/team/members/", {"action": "role", "user": owner.pk, "role": "annotator"})
    assert response.status_code == 400 and study.memberships.get(user=owner).role == "researcher"
    annotator = User.objects.create_user("ann")
    study_membership_set(study=study, user=annotator, role="annotator")
    member = Client()
    member.force_login(annotator)
    assert member.get("/s/team/members/").status_code == 403
    assert member.post("/s/team/members/", {"action": "remove", "user": owner.pk}).status_code == 403
    outsider = Client()
    outsider.force_login(User.objects.create_user("out"))
    assert outsider.get("/s/team/members/").status_code == 404
    assert study.memberships.count() == 2


# --- protocol parameters fixed once started; the metric is the study's own --------------------


def test_protocol_parameters_are_fixed_once_the_protocol_has_started(study):
    assert study.protocol_started
    for field, value in (("gamma", 0.2), ("batch_size", 7), ("allocation_policy", "paper"),
                         ("protocol_rule", "bayes"), ("family_control", "none"), ("ratings_per_item", 3), ("metric", study.metrics.get(name="judge"))):
        fresh = models.Study.objects.get(pk=study.pk)
        setattr(fresh, field, value)
        with pytest.raises(ValidationError) as error:
            fresh.full_clean()
        assert field in error.value.message_dict
        assert "fixed once the protocol has started" in error.value.message_dict[field][0]
    fresh = models.Study.objects.get(pk=study.pk)
    fresh.budget = 50
    fresh.instructions = "New instructions"
    fresh.full_clean()  # what a researcher may change stays changeable


def test_a_metric_of_another_study_is_refused_by_model_validation(study, toy_rows):
    other = study_import(source=bundle_bytes(toy_rows), slug="other")
    study.metric = other.metrics.get(name="rouge")
    with pytest.raises(ValidationError, match="belongs to another study"):
        study.full_clean()


def test_admin_shows_protocol_parameters_read_only_after_the_start(study, toy_rows):
    client = admin_client()
    page, data = admin_form_data(client, study)
    form_fields = set(page.context["adminform"].form.fields)
    for field in ("metric", "gamma", "batch_size", "allocation_policy", "ratings_per_item", "protocol_closes"):
        assert field not in form_fields, f"{field} is editable in the admin after the start"
    # A forged POST of the frozen fields changes nothing; the editable ones are saved.
    other = study_import(source=bundle_bytes(toy_rows), slug="other")
    data.update(gamma="0.3", batch_size="9", protocol_closes="99", metric=other.metrics.get(name="rouge").pk,
                instructions="Edited in the admin")
    response = client.post(f"/admin/annotation/study/{study.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    fresh = models.Study.objects.get(pk=study.pk)
    assert (fresh.gamma, fresh.batch_size, fresh.protocol_closes) == (study.gamma, study.batch_size,
                                                                      study.protocol_closes)
    assert fresh.metric_id == study.metric_id and fresh.instructions == "Edited in the admin"
    # The study's dashboard still answers.
    assert client.get("/s/team/dashboard/").status_code == 200


def test_admin_refuses_another_studys_metric_on_a_study_not_started(study, toy_rows):
    """A study whose protocol has not started (an older database) keeps its metric editable in
    the admin, but only among its own metrics."""
    models.PairState.objects.filter(study=study).update(state={})
    assert not models.Study.objects.get(pk=study.pk).protocol_started
    other = study_import(source=bundle_bytes(toy_rows), slug="other")
    client = admin_client()
    page, data = admin_form_data(client, study)
    assert "metric" in page.context["adminform"].form.fields
    data["metric"] = other.metrics.get(name="rouge").pk
    response = client.post(f"/admin/annotation/study/{study.pk}/change/", data)
    assert response.status_code == 200
    assert "metric" in response.context["adminform"].form.errors
    assert models.Study.objects.get(pk=study.pk).metric_id == study.metric_id
    data["metric"] = study.metrics.get(name="judge").pk
    assert client.post(f"/admin/annotation/study/{study.pk}/change/", data).status_code == 302
    assert models.Study.objects.get(pk=study.pk).metric.name == "judge"


def test_admin_metric_cannot_move_to_another_study(study, toy_rows):
    other = study_import(source=bundle_bytes(toy_rows), slug="other")
    client = admin_client()
    metric = study.metric
    page = client.get(f"/admin/annotation/metric/{metric.pk}/change/")
    assert "study" not in page.context["adminform"].form.fields
    client.post(f"/admin/annotation/metric/{metric.pk}/change/", {"study": other.pk, "name": metric.name,
                                                                  "kind": metric.kind, "tie_margin": "0"})
    assert models.Metric.objects.get(pk=metric.pk).study_id == study.pk


def test_settings_page_shows_the_protocol_parameters_read_only(study):
    client = Client()
    client.force_login(User.objects.get(username="owner"))
    body = client.get("/s/team/settings/").content.decode()
    assert "Protocol parameters (fixed)" in body
    assert "<dd>rouge</dd>" in body and "<dd>2</dd>" in body
    assert 'name="gamma"' not in body and 'name="batch_size"' not in body
    assert "/s/team/members/" in body


def test_api_refuses_demoting_the_last_researcher(study):
    client = Client()
    client.force_login(User.objects.get(username="owner"))
    response = client.post("/api/studies/team/members/", {"username": "owner", "role": "annotator"},
                           content_type="application/json")
    assert response.status_code == 409 and "at least one researcher" in response.json()["detail"]
    assert study.memberships.get().role == "researcher"


# --- drafts: saved without starting, protocol parameters editable until the launch ------------


def test_save_as_draft_then_edit_the_protocol_parameters_and_launch(toy_rows):
    user, client = group_researcher_client()
    token = staged_token(client.post("/studies/upload/", {"bundle": upload_file(toy_rows), "slug": "d"}))
    response = client.post("/studies/upload/", {"staged": token, "metric": "metric:rouge", "slug": "d",
                                                "start": "draft"})
    assert response.status_code == 302 and response["Location"] == "/s/d/settings/"
    study = models.Study.objects.get(slug="d")
    assert study.status == "draft" and not study.protocol_started
    page = client.get("/s/d/settings/").content.decode()
    assert "Draft: not served yet" in page and 'name="batch_size"' in page and 'name="gamma"' in page
    # Its comparisons counted from its outputs (3 pairs x 2 items; one is stored so far), and the planner.
    assert "6 comparisons (items × pairs of systems)" in page and 'href="/s/d/plan/"' in page
    # The dashboard of a draft sends the researcher to its settings (nothing to show yet).
    assert client.get("/s/d/dashboard/")["Location"] == "/s/d/settings/"
    draft = {"action": "draft", "metric": "metric:judge", "gamma": "0.1", "batch_size": "3", "budget": "20",
             "ratings_per_item": "2", "allocation_policy": "adaptive", "item_choice": "uniform",
             "protocol_rule": "bayes", "family_control": "none", "pair_design": "all_pairs"}
    response = client.post("/s/d/settings/", {**draft, "gamma": "1.5"})
    assert response.status_code == 400 and models.Study.objects.get(pk=study.pk).gamma == 0.05
    response = client.post("/s/d/settings/", draft)
    assert response.status_code == 302 and response["Location"] == "/s/d/settings/"
    study.refresh_from_db()
    assert (study.metric.name, study.gamma, study.batch_size, study.budget, study.ratings_per_item,
            study.allocation_policy, study.protocol_rule, study.family_control) == (
        "judge", 0.1, 3, 20, 2, "adaptive", "bayes", "none")
    response = client.post("/s/d/settings/", {"action": "launch"})
    assert response.status_code == 302 and response["Location"] == "/s/d/dashboard/"
    study.refresh_from_db()
    assert study.status == "running" and study.protocol_started
    assert models.PairState.objects.filter(study=study, status="open").exists()
    # Launched: the parameters are fixed, the draft form refused.
    assert client.post("/s/d/settings/", {**draft, "batch_size": "4"}).status_code == 400
    assert models.Study.objects.get(pk=study.pk).batch_size == 3
    assert client.post("/s/d/settings/", {"action": "launch"}).status_code == 400


def test_a_draft_is_not_served_and_no_page_fails_on_it(toy_rows):
    owner = User.objects.create_user("owner", password="pw-owner-123")
    study = study_import(source=bundle_bytes(toy_rows), slug="d", created_by=owner, start=False)
    annotator = User.objects.create_user("ann")
    study_membership_set(study=study, user=annotator, role="annotator")
    member = Client()
    member.force_login(annotator)
    assert member.get("/s/d/annotate/").status_code == 404
    assert member.post("/s/d/next/").status_code == 404
    assert member.post("/api/studies/d/hits/next/").status_code == 404
    assert Client().get("/s/d/start/?PROLIFIC_PID=p&SESSION_ID=s").status_code == 404
    client = Client()
    client.force_login(owner)
    answers = {}
    for method, url in (("get", "/s/d/dashboard/"), ("get", "/s/d/pair/?first=A&second=B"), ("get", "/s/d/metrics/"),
                        ("get", "/s/d/settings/"), ("get", "/s/d/members/"), ("get", "/s/d/export/judgements.csv"),
                        ("get", "/s/d/export/decisions.csv"), ("get", "/api/studies/d/"),
                        ("get", "/api/studies/d/settings/"), ("get", "/api/studies/d/decisions/"),
                        ("get", "/api/studies/d/leaderboard/"), ("get", "/api/studies/d/judgements/"),
                        ("get", "/api/studies/d/report/"), ("get", "/api/studies/", ), ("get", "/"),
                        ("patch", "/api/studies/d/settings/")):
        response = client.patch(url, {"budget": 30}, content_type="application/json") if method == "patch" \
            else client.get(url)
        answers[f"{method} {url}"] = response.status_code
    assert all(code < 500 for code in answers.values()), answers
    assert answers["get /api/studies/d/settings/"] == 200 and answers["get /s/d/settings/"] == 200
    assert answers["get /s/d/dashboard/"] == 302
    # The API's settings change does not launch a draft: it says so.
    response = client.patch("/api/studies/d/settings/", {"status": "running"}, content_type="application/json")
    assert response.status_code == 409 and "draft" in str(response.json())
    assert not models.Study.objects.get(pk=study.pk).protocol_started


def test_protocol_sweep_does_not_start_a_draft(toy_rows):
    from django.core.management import call_command

    study = study_import(source=bundle_bytes(toy_rows), slug="d", start=False)
    call_command("protocol_sweep", stdout=io.StringIO())
    assert not models.Study.objects.get(pk=study.pk).protocol_started


def test_status_cannot_bypass_the_launch(toy_rows, study):
    draft = study_import(source=bundle_bytes(toy_rows), slug="d", start=False)
    draft.status = "running"
    with pytest.raises(ValidationError, match="launched from its settings page"):
        draft.full_clean()
    study.status = "draft"
    with pytest.raises(ValidationError, match="cannot become a draft again"):
        study.full_clean()


def test_admin_keeps_the_last_researcher(study):
    client = admin_client()
    page, data = admin_form_data(client, study)
    prefix = next(f.formset.prefix for f in page.context["inline_admin_formsets"]
                  if f.formset.model is models.StudyMembership)
    data[f"{prefix}-0-DELETE"] = "on"
    response = client.post(f"/admin/annotation/study/{study.pk}/change/", data)
    assert response.status_code == 200
    assert "at least one researcher" in response.content.decode()
    assert study.memberships.filter(role="researcher").count() == 1
    data.pop(f"{prefix}-0-DELETE")
    data[f"{prefix}-0-role"] = "annotator"
    response = client.post(f"/admin/annotation/study/{study.pk}/change/", data)
    assert "at least one researcher" in response.content.decode()
    assert study.memberships.get().role == "researcher"
    # The membership list is for looking things up only.
    membership = study.memberships.get()
    assert client.post(f"/admin/annotation/studymembership/{membership.pk}/delete/", {"post": "yes"}).status_code == 403
    assert study.memberships.count() == 1


def test_an_import_that_loses_the_race_for_its_slug_is_told_so(toy_rows):
    """Two uploads of one bundle at once both pass the slug check; the later writer gets a
    BundleError naming the slug (the upload page shows it), not a server error."""
    from annotation.services.studies import _store_bundle
    from protocol.bundle import BundleError, read_bundle

    study_import(source=bundle_bytes(toy_rows), slug="same")
    with pytest.raises(BundleError, match="a study with slug 'same' exists already"):
        _store_bundle(read_bundle(bundle_bytes(toy_rows)), "same", lambda *args: None)
    assert models.Study.objects.filter(slug="same").count() == 1
