"""The REST API: import, study state, researcher endpoints, HIT next/submit, tokens, error bodies."""
import io
import json
import logging

import pytest
import yaml
from django.db.models.signals import post_init
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotation import models, reports, serializers
from annotation.access import RESEARCHER_GROUP
from annotation.models import Assignment, Judgement, Study, StudyMembership
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, chat_rows, crowd_rows, rubric_rows
from tests.builders.clients import api_for, api_upload
from tests.builders.files import STUDY_FILE_MODELS, study_files

pytestmark = pytest.mark.django_db(transaction=True)


def assert_error(response, status, code):
    assert response.status_code == status, response.content[:300]
    body = response.json()
    assert body["code"] == code and isinstance(body["detail"], str) and body["detail"], body


@pytest.fixture
def study_with_annotator():
    researcher, _ = api_for("r", researcher=True)
    assert api_upload(researcher, crowd_rows(), slug="s2").status_code == 201
    annotator, user = api_for("ann")
    study_membership_set(study=Study.objects.get(slug="s2"), user=user, role="annotator")
    return researcher, annotator


def test_import_through_the_api_reports_problems_with_lines():
    client, _ = api_for("r", researcher=True)
    bad = crowd_rows()[:3] + [{"kind": "output", "item": "i99", "system": "A", "text": "x"}]
    response = api_upload(client, bad)
    assert_error(response, 422, "invalid_bundle")  # a well-formed upload whose content is refused
    assert response.json()["problems"] == [{"line": 4, "message": "output refers to unknown item 'i99'"}]
    assert Study.objects.count() == 0
    response = api_upload(client, crowd_rows(), slug="api-study")
    assert response.status_code == 201 and response.json()["slug"] == "api-study"
    listed = client.get("/api/studies/").json()
    assert [s["slug"] for s in listed] == ["api-study"]
    detail = client.get("/api/studies/api-study/").json()
    assert detail["budget"]["total"] == 90 and detail["pair_count"] == 3
    assert detail["pairs_url"] == "http://testserver/api/studies/api-study/pairs/"
    assert client.get(detail["pairs_url"]).json()["count"] == 3
    assert sorted(r["system"] for r in detail["leaderboard"]) == ["A", "B", "C"]


def test_an_empty_or_missing_bundle_is_an_invalid_bundle_not_a_malformed_request():
    """Schemathesis sends a schema-valid multipart whose bundle part is empty (some clients'
    parts then reach Django as no file at all): either is a bundle the app cannot read, 422."""
    client, _ = api_for("r", researcher=True)
    empty = io.BytesIO(b"")
    empty.name = "bundle"
    response = client.post("/api/studies/", {"bundle": empty, "human_only": "false"}, format="multipart")
    assert_error(response, 422, "invalid_bundle")
    assert response.json()["problems"] == [{"line": 0, "message": "no bundle: the file is missing or empty"}]
    response = client.post("/api/studies/", {"human_only": "false"}, format="multipart")
    assert_error(response, 422, "invalid_bundle")
    assert Study.objects.count() == 0


def test_a_page_that_is_not_a_positive_integer_is_a_400(study_with_annotator):
    researcher, _ = study_with_annotator
    for page in ("", "0", "x", "-1"):
        response = researcher.get(f"/api/studies/s2/judgements/?page={page}")
        assert_error(response, 400, "invalid")
        assert "page" in response.json()["errors"], page
    assert researcher.get("/api/studies/s2/judgements/?page=1").status_code == 200

def test_studies_the_caller_may_not_know_answer_404_and_errors_have_one_shape():
    client, user = api_for("a")
    assert_error(api_upload(client, crowd_rows()), 403, "permission_denied")
    researcher, _ = api_for("r", researcher=True)
    api_upload(researcher, crowd_rows(), slug="s1")
    # Not a member: the study does not exist for this caller (same answer as a missing slug).
    for path in ("/api/studies/s1/", "/api/studies/s1/decisions/", "/api/studies/nope/"):
        assert_error(client.get(path), 404, "not_found")
    assert_error(client.post("/api/studies/s1/hits/next/"), 404, "not_found")
    assert client.get("/api/studies/").json() == []
    # An annotator of the study knows it exists: researcher endpoints answer 403.
    study_membership_set(study=Study.objects.get(slug="s1"), user=user, role="annotator")
    assert_error(client.get("/api/studies/s1/decisions/"), 403, "permission_denied")
    anonymous = APIClient().get("/api/studies/")
    assert_error(anonymous, 401, "not_authenticated")
    assert anonymous["WWW-Authenticate"] == "Token"
    assert_error(researcher.patch("/api/studies/s1/settings/", {"budget": -1}, format="json"), 400, "invalid")
    assert "budget" in researcher.patch("/api/studies/s1/settings/", {"budget": -1}, format="json").json()["errors"]


def test_hit_next_and_idempotent_submit(study_with_annotator):
    _, client = study_with_annotator
    hit = client.post("/api/studies/s2/hits/next/").json()
    assert set(hit) == {"id", "input", "left", "right", "expires_at", "criteria", "input_messages", "left_messages",
                         "right_messages"} and hit["criteria"] == []
    for _ in range(2):
        response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "right"}, format="json",
                               HTTP_IDEMPOTENCY_KEY="key-123")
        assert response.status_code == 200
    assert Judgement.objects.count() == 1
    response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "sideways"}, format="json",
                           HTTP_IDEMPOTENCY_KEY="key-124")
    assert_error(response, 400, "invalid")
    assert "answer" in response.json()["errors"]
    response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "left"}, format="json")
    assert_error(response, 400, "idempotency_key_required")
    # Another key is another submit: the HIT is answered already, the first answer stands.
    response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "left"}, format="json",
                           HTTP_IDEMPOTENCY_KEY="key-123-other-hit-reuse")
    assert_error(response, 409, "conflict")
    assert "already answered" in response.json()["detail"] and Judgement.objects.get().value == -1 * (
        -1 if Assignment.objects.get(pk=hit["id"]).shown_swapped else 1)
    # Another user's HIT does not exist for this caller, even as a member of the study.
    other, user = api_for("other")
    study_membership_set(study=Study.objects.get(slug="s2"), user=user, role="annotator")
    response = other.post(f"/api/hits/{hit['id']}/submit/", {"answer": "left"}, format="json",
                          HTTP_IDEMPOTENCY_KEY="key-9")
    assert_error(response, 404, "not_found")


def test_pause_resume_budget_through_the_settings_endpoint(study_with_annotator):
    researcher, annotator = study_with_annotator
    response = researcher.patch("/api/studies/s2/settings/", {"status": "paused"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "paused"
    assert Study.objects.get(slug="s2").status == "paused"
    assert annotator.post("/api/studies/s2/hits/next/").status_code == 204
    assert researcher.patch("/api/studies/s2/settings/", {"status": "running"}, format="json").json()["status"] \
        == "running"
    hit = annotator.post("/api/studies/s2/hits/next/")
    assert hit.status_code == 200
    # The budget cannot go below what is spent and asked for in open rounds.
    response = researcher.patch("/api/studies/s2/settings/", {"budget": 1}, format="json")
    assert_error(response, 409, "conflict")  # a valid value the study's state refuses
    assert "cannot be below" in response.json()["detail"]
    response = researcher.patch("/api/studies/s2/settings/", {"budget": 120}, format="json")
    assert response.status_code == 200 and response.json()["budget"] == 120
    assert researcher.get("/api/studies/s2/settings/").json()["budget"] == 120
    assert_error(annotator.patch("/api/studies/s2/settings/", {"status": "finished"}, format="json"), 403,
                 "permission_denied")
    assert researcher.patch("/api/studies/s2/settings/", {"status": "finished"}, format="json").status_code == 200
    assert Study.objects.get(slug="s2").status == "finished"


def answer_hits(client, slug, n):
    for k in range(n):
        hit = client.post(f"/api/studies/{slug}/hits/next/")
        if hit.status_code == 204:
            return k
        left = hit.json()["left"].split()[0]
        right = hit.json()["right"].split()[0]
        answer = "left" if left < right else "right"  # A beats B beats C, whatever the side
        response = client.post(f"/api/hits/{hit.json()['id']}/submit/", {"answer": answer}, format="json",
                               HTTP_IDEMPOTENCY_KEY=f"k-{slug}-{k}")
        assert response.status_code == 200
    return n


def test_decisions_judgements_and_report(study_with_annotator):
    researcher, annotator = study_with_annotator
    assert answer_hits(annotator, "s2", 12) == 12
    decisions = researcher.get("/api/studies/s2/decisions/").json()
    assert decisions["systems"] == ["A", "B", "C"] and len(decisions["pairs"]) == 3
    assert sum(p["judgements"] for p in decisions["pairs"]) == 12
    page = researcher.get("/api/studies/s2/judgements/", {"page_size": 5}).json()
    assert page["count"] == 12 and len(page["results"]) == 5 and page["next"]
    second = researcher.get(page["next"]).json()
    assert {j["id"] for j in second["results"]}.isdisjoint(j["id"] for j in page["results"])
    # A pair in either order; every judgement says first (A) is better, as answered.
    ab = researcher.get("/api/studies/s2/judgements/", {"first": "B", "second": "A"}).json()
    assert ab["count"] == sum(p["judgements"] for p in decisions["pairs"] if (p["first"], p["second"]) == ("A", "B"))
    assert {(j["first"], j["second"], j["value"]) for j in ab["results"]} <= {("A", "B", 1)}
    mine = researcher.get("/api/studies/s2/judgements/", {"annotator": "user-%d" % User.objects.get(
        username="ann").pk}).json()
    assert mine["count"] == 12
    assert researcher.get("/api/studies/s2/judgements/", {"annotator": "nobody"}).json()["count"] == 0
    # One system alone: every pair of it. Which pairs the 12 HITs reached depends on the order
    # the pairs' rounds opened (on PostgreSQL all 12 can go to B-C), so each system is checked.
    for system in ("A", "B", "C"):
        rows = researcher.get("/api/studies/s2/judgements/", {"first": system, "page_size": 50}).json()
        assert rows["count"] == sum(p["judgements"] for p in decisions["pairs"] if system in (p["first"], p["second"]))
        assert all(system in (row["first"], row["second"]) for row in rows["results"])
    assert max(researcher.get("/api/studies/s2/judgements/", {"second": s}).json()["count"] for s in "ABC") > 0
    report = researcher.get("/api/studies/s2/report/")
    assert report.status_code == 200, report.content
    body = report.json()
    assert body["metric"] == "m" and body["systems"] == ["A", "B", "C"]
    assert sum(sum(map(sum, p["confusion"])) for p in body["pairs"]) == 12
    assert_error(researcher.get("/api/studies/s2/report/", {"metric": "bleu"}), 409, "conflict")


def test_members_list_add_remove(study_with_annotator):
    researcher, annotator = study_with_annotator
    User.objects.create_user("newbie")
    assert researcher.get("/api/studies/s2/members/").json() == [
        {"username": "ann", "role": "annotator"}, {"username": "r", "role": "researcher"}]
    response = researcher.post("/api/studies/s2/members/", {"username": "newbie", "role": "annotator"}, format="json")
    assert response.status_code == 200 and response.json() == {"username": "newbie", "role": "annotator"}
    assert_error(researcher.post("/api/studies/s2/members/", {"username": "ghost", "role": "annotator"},
                                 format="json"), 404, "not_found")
    assert researcher.delete("/api/studies/s2/members/newbie/").status_code == 204
    assert not StudyMembership.objects.filter(user__username="newbie").exists()
    assert_error(researcher.delete("/api/studies/s2/members/newbie/"), 404, "not_found")
    assert_error(researcher.delete("/api/studies/s2/members/r/"), 409, "conflict")
    assert_error(annotator.post("/api/studies/s2/members/", {"username": "ann", "role": "researcher"},
                                format="json"), 403, "permission_denied")


def test_token_created_and_revoked_in_the_app(client):
    user = User.objects.create_user("pipeline", password="pw-12345678")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    client.force_login(user)
    assert "You have no token" in client.get("/account/api-token/").content.decode()
    response = client.post("/account/api-token/", {"action": "create"})
    key = response.context["new_key"]
    assert response.status_code == 200 and key in response.content.decode()
    assert key not in client.get("/account/api-token/").content.decode()  # shown once only
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/studies/").status_code == 200
    assert api_upload(api, crowd_rows(), slug="by-token").status_code == 201
    client.post("/account/api-token/", {"action": "revoke"})
    assert_error(api.get("/api/studies/"), 401, "authentication_failed")


def test_schema_describes_every_endpoint_with_its_errors(client):
    from django.urls import get_resolver

    schema = client.get("/api/schema/", {"format": "json"}).json()
    operations = {(path, method): op for path, item in schema["paths"].items()
                  for method, op in item.items()}
    api_patterns = [p for p in get_resolver().url_patterns if str(p.pattern) == "api/"][0].url_patterns
    documented_routes = {path.removeprefix("/api/") for path in schema["paths"]}
    for pattern in api_patterns:
        if pattern.name in ("api_schema", "api_docs", "api_not_found"):
            continue
        route = str(pattern.pattern).replace("<slug:slug>", "{slug}").replace("<int:hit_id>", "{hit_id}").replace(
            "<str:username>", "{username}").replace("<int:annotator_id>", "{annotator_id}")
        assert route in documented_routes, route
    for (path, method), op in operations.items():
        assert {"401", "429"} <= set(op["responses"]), (path, method)
        for code, response in op["responses"].items():
            if code >= "400":
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.rsplit("/", 1)[-1] in ("Error", "ValidationError", "BundleError"), (path, code)
    submit = operations[("/api/hits/{hit_id}/submit/", "post")]
    assert "400" in submit["responses"] and "409" in submit["responses"] and "428" not in submit["responses"]
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in submit["parameters"])
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])


def test_the_schema_says_strings_refuse_a_nul_character(client):
    """DRF refuses a NUL in any string; the schema says so, so a schema-valid metric name is
    never a 400 (schemathesis found one)."""
    schema = yaml.safe_load(client.get("/api/schema/").content)
    metric = schema["components"]["schemas"]["StudyImportRequest"]["properties"]["metric"]
    assert metric["pattern"] == "^[^\\u0000]*$"
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/studies/{slug}/judgements/"]["get"]["parameters"]}
    assert parameters["annotator"]["pattern"] == "^[^\\u0000]*$"
    researcher, _ = api_for("r", researcher=True)
    response = api_upload(researcher, crowd_rows(), metric="m\x00")
    assert_error(response, 400, "invalid")


def test_a_403_logs_one_line_without_traceback(client, caplog):
    study_membership_set(study=Study.objects.create(slug="x", name="X"), user=User.objects.create_user("ann"),
                         role="annotator")
    client.force_login(User.objects.get(username="ann"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get("/s/x/dashboard/").status_code == 403
    records = [r for r in caplog.records if getattr(r, "status_code", None) == 403]
    assert len(records) == 1
    assert records[0].exc_info is None and "\n" not in records[0].getMessage()
    assert "Only the study's researchers" in records[0].getMessage()


def test_undefined_statistics_are_null_not_a_server_error():
    """One human judgement agreeing with the metric: its Favi-Score is undefined (NaN) -> null."""
    researcher, _ = api_for("r", researcher=True)
    rows = crowd_rows() + [{"kind": "human_preference", "item": "i00", "first": "A", "second": "B",
                            "preference": 1, "annotator": "expert"}]
    api_upload(researcher, rows, slug="nan")
    response = researcher.get("/api/studies/nan/")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["favi_summary"]["mean_abs_favi"] is None


def test_leaderboard_ranks_by_the_protocols_decisions(study_with_annotator):
    researcher, annotator = study_with_annotator
    study = Study.objects.get(slug="s2")
    assert researcher.get("/api/studies/s2/leaderboard/").json() == [
        {"rank": 1, "system": s, "wins": 0, "losses": 0, "undecided": 2} for s in "ABC"]
    # As if rounds had closed: A beats B, B beats C, A vs C still open.
    from annotation.models import PairState

    PairState.objects.filter(study=study, first__name="A", second__name="B").update(decision=1, status="decided")
    PairState.objects.filter(study=study, first__name="B", second__name="C").update(decision=1, status="decided")
    assert researcher.get("/api/studies/s2/leaderboard/").json() == [
        {"rank": 1, "system": "A", "wins": 1, "losses": 0, "undecided": 1},
        {"rank": 2, "system": "B", "wins": 1, "losses": 1, "undecided": 0},
        {"rank": 3, "system": "C", "wins": 0, "losses": 1, "undecided": 1}]
    assert_error(annotator.get("/api/studies/s2/leaderboard/"), 403, "permission_denied")


def test_import_without_a_metric_choice_is_refused_unless_human_only_is_asked_for(toy_rows):
    """A bundle with metrics but no protocol metric named never silently becomes human-only."""
    client, _ = api_for("r", researcher=True)
    rows = [dict(row) for row in toy_rows]
    del rows[0]["metric"]
    response = api_upload(client, rows, slug="unnamed")
    assert_error(response, 422, "invalid_bundle")
    assert "names no metric for the protocol" in response.json()["problems"][0]["message"]
    assert "judge, rouge" in response.json()["problems"][0]["message"]
    assert Study.objects.count() == 0
    assert api_upload(client, rows, slug="chosen", metric="judge").json()["metric"] == "judge"
    response = api_upload(client, rows, slug="humans", human_only="true")
    assert response.status_code == 201 and response.json()["metric"] is None


def test_settings_api_changes_crowd_and_quality_settings(study_with_annotator):
    researcher, _ = study_with_annotator
    shown = researcher.get("/api/studies/s2/settings/").json()
    assert {"session_minutes", "min_seconds_per_hit", "check_every", "exclude_too_fast"} <= set(shown)
    response = researcher.patch("/api/studies/s2/settings/", {"session_minutes": 25, "min_seconds_per_hit": 4,
                                                              "exclude_too_fast": True}, format="json")
    assert response.status_code == 200, response.content
    study = Study.objects.get(slug="s2")
    assert (study.session_minutes, study.min_seconds_per_hit, study.exclude_too_fast) == (25, 4, True)
    # Checks need check items: refused with the reason, and nothing of the request is applied.
    response = researcher.patch("/api/studies/s2/settings/", {"check_every": 10, "session_minutes": 30},
                                format="json")
    assert_error(response, 409, "conflict")
    assert "no check items" in str(response.json())
    study.refresh_from_db()
    assert (study.check_every, study.session_minutes) == (0, 25)


def test_a_rubric_hit_lists_its_criteria_and_takes_answers():
    researcher, _ = api_for("r", researcher=True)
    assert api_upload(researcher, rubric_rows(imported=0), slug="rub").status_code == 201
    client, user = api_for("ann")
    study_membership_set(study=Study.objects.get(slug="rub"), user=user, role="annotator")
    hit = client.post("/api/studies/rub/hits/next/").json()
    assert [c["name"] for c in hit["criteria"]] == ["helpfulness", "correctness", "style"]
    assert [o["value"] for o in hit["criteria"][0]["scale"]] == [2, 1, 0, -1, -2]
    response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "left"}, format="json",
                           HTTP_IDEMPOTENCY_KEY="r1")
    assert_error(response, 409, "conflict")
    assert "choose an answer for" in response.json()["detail"]
    answers = {"helpfulness": {"value": -2}, "correctness": {"value": 1, "reason": "fewer bugs"},
               "style": {"value": 0}}
    response = client.post(f"/api/hits/{hit['id']}/submit/", {"answers": answers, "read_seconds": 7.5},
                           format="json", HTTP_IDEMPOTENCY_KEY="r2")
    assert response.status_code == 200, response.json()
    judgement = Judgement.objects.get()
    sign = -1 if judgement.assignment.shown_swapped else 1
    assert judgement.answers["helpfulness"] == {"value": -sign, "strength": 2}
    assert judgement.answers["correctness"] == {"value": sign, "reason": "fewer bugs"}
    assert judgement.read_seconds == 7.5


def test_the_api_imports_a_table_with_its_column_roles_and_computed_metrics():
    """Issue 37: the files researchers have, through the API (a token's client)."""
    client, _ = api_for("table-api", researcher=True)
    table = "question,generator,answer,reference\n" + "".join(
        f"Q{p},{m},Answer {p} by {m},Answer {p}\n" for p in range(6) for m in ("m1", "m2"))
    response = client.post("/api/studies/", {"bundle": SimpleUploadedFile("answers.csv", table.encode()),
                                             "columns": "prompt=question,model=generator,response=answer",
                                             "compute": ["chrf", "length"], "metric": "chrf", "slug": "api-table"},
                           format="multipart")
    assert response.status_code == 201, response.content
    study = models.Study.objects.get(slug="api-table")
    assert study.metric.name == "chrf" and study.items.count() == 6 and study.items.first().reference == "Answer 0"
    bad = client.post("/api/studies/", {"bundle": SimpleUploadedFile("answers.csv", table.encode()),
                                        "columns": "prompt=nope"}, format="multipart")
    assert bad.status_code == 422 and "no column 'nope' for the prompt" in str(bad.json())
    malformed = client.post("/api/studies/", {"bundle": SimpleUploadedFile("answers.csv", table.encode()),
                                              "columns": "nonsense"}, format="multipart")
    assert malformed.status_code == 400 and "columns" in malformed.json()["errors"]
    answers = [SimpleUploadedFile(f"{m}.json", json.dumps([{"instruction": f"Tip {n}", "output": f"{m} {n}",
                                                            "generator": m} for n in range(3)]).encode())
               for m in ("gpt4", "llama")]
    pair = client.post("/api/studies/", {"bundle": answers[0], "files": [answers[1]], "human_only": True,
                                         "slug": "api-alpaca"}, format="multipart")
    assert pair.status_code == 201, pair.content
    assert models.Study.objects.get(slug="api-alpaca").pair_states.count() == 1


# Each kind of file researchers have (tests/builders/files.study_files), through the API: the form
# fields it takes, and the study it makes (items, systems, metric).
API_KINDS = {
    "csv": ({"metric": "judge_score"}, 8, 3, "judge_score"),
    "parquet": ({"metric": "judge_score"}, 8, 3, "judge_score"),
    "dataset": ({"metric": "judge_score"}, 8, 3, "judge_score"),
    "alpacaeval": ({"human_only": True}, 4, 2, None),
    "mtbench": ({"human_only": True}, 8, 2, None),
    "references": ({"compute": ["chrf"], "metric": "chrf"}, 8, 3, "chrf"),
}


@pytest.mark.parametrize("kind", list(API_KINDS))
def test_the_api_imports_each_kind_of_file(tmp_path, kind):
    fields, items, systems, metric = API_KINDS[kind]
    client, _ = api_for(f"kind-{kind}", researcher=True)
    first, *others = [SimpleUploadedFile(p.name, p.read_bytes()) for p in study_files(kind, tmp_path)]
    response = client.post("/api/studies/", {"bundle": first, "files": others, "slug": f"from-{kind}", **fields},
                           format="multipart")
    assert response.status_code == 201, response.content
    study = models.Study.objects.get(slug=f"from-{kind}")
    assert study.items.count() == items
    assert sorted(study.systems.values_list("name", flat=True)) == sorted(STUDY_FILE_MODELS[:systems])
    assert (study.metric.name if study.metric_id else None) == metric


def test_hits_next_returns_a_chat_studys_conversations_as_lists():
    client, user = api_for("chat-api", researcher=True)
    study = study_import(source=bundle_bytes(chat_rows(2)), slug="chat-api-study")
    study_membership_set(study=study, user=user, role="annotator")
    hit = client.post("/api/studies/chat-api-study/hits/next/").json()
    assert hit["input_messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert hit["left_messages"][0]["role"] == "assistant" and hit["right_messages"][0]["role"] == "assistant"
    assert "assistant: " in hit["left"]  # the flattened text stays, for clients that want one string


def test_the_decisions_and_study_endpoints_read_the_rounds_report_not_every_pair_row(study_with_annotator):
    """Like the dashboard and the decisions CSV, the API reads the dashboard's data per round
    from the cache: computed in the request, /api/studies/<slug>/decisions/ took 40 s and the
    study's detail 52 s at 200 systems (19,900 pair rows decoded, the projection recomputed)."""
    researcher, annotator = study_with_annotator
    assert answer_hits(annotator, "s2", 6) == 6
    csv_rows = researcher.get("/s/s2/export/decisions.csv")  # the round's report, computed once
    assert csv_rows.status_code in (200, 302, 403)
    reports.study_dashboard(study=Study.objects.get(slug="s2"))
    loaded = []

    def count(sender, instance, **kwargs):
        loaded.append(instance.pk)

    post_init.connect(count, sender=models.PairState)
    try:
        decisions = researcher.get("/api/studies/s2/decisions/")
        detail = researcher.get("/api/studies/s2/")
        pairs = researcher.get("/api/studies/s2/pairs/")
    finally:
        post_init.disconnect(count, sender=models.PairState)
    assert decisions.status_code == 200 and detail.status_code == 200 and pairs.status_code == 200
    assert len(decisions.json()["pairs"]) == 3 and detail.json()["pair_count"] == 3 and pairs.json()["count"] == 3
    assert sum(p["judgements"] for p in decisions.json()["pairs"]) == 6
    assert loaded == [], f"the API loaded {len(loaded)} pair rows"


def test_the_pairs_are_paged_and_the_study_detail_links_to_them(study_with_annotator, monkeypatch):
    """At 200 systems the study's detail and its decisions serialised all 19,900 pairs (5 MB
    each, a second): the detail names the pairs' count and links to their pages, the
    decisions serve a page of them; the pages together are every pair once."""
    researcher, annotator = study_with_annotator
    assert answer_hits(annotator, "s2", 4) == 4
    every = reports.study_dashboard(study=Study.objects.get(slug="s2"), current=True)["pairs"]
    keys = [(p["first"], p["second"]) for p in every]
    serialised = []
    original = serializers.PairSerializer.to_representation
    monkeypatch.setattr(serializers.PairSerializer, "to_representation",
                        lambda self, row: serialised.append(row) or original(self, row))
    detail = researcher.get("/api/studies/s2/").json()
    assert "pairs" not in detail and detail["pair_count"] == 3 and serialised == []
    first = researcher.get(detail["pairs_url"] + "?page_size=2").json()
    assert first["count"] == 3 and first["previous"] is None and len(first["results"]) == 2
    assert len(serialised) == 2
    second = researcher.get(first["next"]).json()
    assert second["next"] is None and len(second["results"]) == 1
    assert [(p["first"], p["second"]) for p in first["results"] + second["results"]] == keys
    assert set(first["results"][0]) == set(serializers.PairSerializer().fields)
    serialised.clear()
    decisions = researcher.get("/api/studies/s2/decisions/?page_size=2").json()
    assert len(serialised) == 2 and decisions["count"] == 3 and decisions["previous"] is None
    assert [(p["first"], p["second"]) for p in decisions["pairs"]] == keys[:2]
    rest = researcher.get(decisions["next"]).json()
    assert [(p["first"], p["second"]) for p in rest["pairs"]] == keys[2:] and rest["next"] is None
    assert rest["systems"] == decisions["systems"] and rest["budget"] == decisions["budget"]
    for bad in ("page_size=0", "page_size=20001", "page=0"):
        assert_error(researcher.get(f"/api/studies/s2/decisions/?{bad}"), 400, "invalid")
        assert_error(researcher.get(f"/api/studies/s2/pairs/?{bad}"), 400, "invalid")


def test_the_report_of_a_study_without_human_labels_is_refused_before_the_study_is_read():
    """Before its first judgement a study has no human label: at 200 x 2,000 the report read
    the whole study as a bundle (400,000 outputs, a minute) to answer that 409."""
    client, _ = api_for("r", researcher=True)
    assert api_upload(client, crowd_rows(), slug="unlabelled").status_code == 201
    built = []
    post_init.connect(lambda sender, instance, **kw: built.append(instance.pk), sender=models.Output, weak=False,
                      dispatch_uid="report-outputs")
    try:
        refused = client.get("/api/studies/unlabelled/report/")
        unknown = client.get("/api/studies/unlabelled/report/", {"metric": "bleu"})
    finally:
        post_init.disconnect(sender=models.Output, dispatch_uid="report-outputs")
    assert_error(refused, 409, "conflict")
    assert_error(unknown, 409, "conflict")
    assert "human" in refused.json()["detail"] and "unknown metric 'bleu'" in unknown.json()["detail"]
    assert built == []
