"""A NUL character (or a lone surrogate) in what a client sends is refused with a message that
names the field, never stored (issue 36, finding 4): no PostgreSQL text or jsonb value can hold
a NUL ("\\u0000" in jsonb neither), and a lone surrogate cannot be encoded for any database,
so each was a 500 (an HTML one on the API too). Run on SQLite and on PostgreSQL
(DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres)."""
import gzip
import io
import json

import pytest
from django.test import Client

from annotation.models import AnnotatorExclusion, ItemFlag, Judgement, Study
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows, rubric_rows
from tests.builders.clients import api_for, group_researcher_client, researcher_client
from tests.builders.crowd import current_hit, judged_crowd_study, start_worker

pytestmark = pytest.mark.django_db(transaction=True)


def rubric_worker():
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)), slug="rubric")
    worker = Client()
    start_worker(worker, study.slug, "pid-nul")
    assignment, context = current_hit(worker, study.slug)
    return study, worker, assignment, context


def rubric_post(context, reason):
    return {"answer": "rubric", "key": context["key"], "criterion-helpfulness": "1", "criterion-correctness": "-1",
            "reason-correctness": reason, "criterion-style": "0"}


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
def test_a_nul_in_a_rubric_reason_is_refused_on_the_hit_page(htmx):
    study, worker, assignment, context = rubric_worker()
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", rubric_post(context, "bad\x00reason"), **headers)
    assert response.status_code == (200 if htmx else 400)
    assert "reason-correctness" in response.context["error"] and "NUL" in response.context["error"]
    assert response.context["assignment"].pk == assignment.pk  # the same HIT, to answer again
    assert not Judgement.objects.exists()
    # The same answer without the NUL is taken.
    assert worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", rubric_post(context, "a fine reason")).status_code == 302
    assert Judgement.objects.get().answers["correctness"]["reason"] == "a fine reason"


def test_a_nul_in_any_field_the_hit_page_reads_is_refused():
    study = study_import(source=bundle_bytes(crowd_rows()))
    worker = Client()
    start_worker(worker, study.slug, "pid-key")
    assignment, context = current_hit(worker, study.slug)
    for field, value in (("key", context["key"] + "\x00"), ("answer", "left\x00"), ("seconds", "3\x00")):
        data = {"answer": "left", "key": context["key"], field: value}
        response = worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", data)
        assert response.status_code == 400 and field in response.context["error"], field
    assert not Judgement.objects.exists()


def test_a_nul_in_a_flag_note_is_refused_naming_the_note():
    study = study_import(source=bundle_bytes(crowd_rows()))
    worker = Client()
    start_worker(worker, study.slug, "pid-flag")
    assignment, context = current_hit(worker, study.slug)
    response = worker.post(f"/s/{study.slug}/hits/{assignment.pk}/flag/",
                           {"key": context["key"], "reason": "broken", "note": "cut\x00off"})
    assert response.status_code == 400 and "note" in response.context["error"]
    assert not ItemFlag.objects.exists()
    response = worker.post(f"/s/{study.slug}/hits/{assignment.pk}/flag/",
                           {"key": context["key"], "reason": "broken", "note": "cut off"})
    assert response.status_code == 302 and ItemFlag.objects.get().note == "cut off"


@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])
def test_the_api_answers_a_json_400_naming_the_field(bad):
    researcher, _ = api_for("r", researcher=True)
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)), slug="rub")
    client, user = api_for("ann")
    study_membership_set(study=study, user=user, role="annotator")
    hit = client.post("/api/studies/rub/hits/next/").json()
    answers = {"helpfulness": {"value": 1}, "correctness": {"value": 1, "reason": f"x{bad}y"}, "style": {"value": 0}}
    body = json.dumps({"answers": answers})  # "\ud800" travels as its JSON escape
    response = client.post(f"/api/hits/{hit['id']}/submit/", body, content_type="application/json",
                           HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()["code"] == "invalid" and "reason" in json.dumps(response.json()["errors"])
    # A criterion's name (a key of answers) with either is refused too, as JSON.
    answers = {"helpfulness": {"value": 1}, f"correct{bad}ness": {"value": 1, "reason": "r"}, "style": {"value": 0}}
    response = client.post(f"/api/hits/{hit['id']}/submit/", json.dumps({"answers": answers}),
                           content_type="application/json", HTTP_IDEMPOTENCY_KEY="k2")
    assert 400 <= response.status_code < 500 and response["Content-Type"] == "application/json"
    assert not Judgement.objects.exists()


BAD_STRINGS = [("nul", "\\u0000", "a NUL character (\\u0000), which no text can store"),
               ("lone-surrogate", "\\ud800", "a lone surrogate (\\ud800), which is not Unicode text")]


def bundle_with(escape: str) -> bytes:
    rows = [json.dumps(r) for r in crowd_rows(items=4)]
    rows[2] = rows[2].replace('"Input 1"', f'"Input{escape}1"')  # line 3: an item's input
    return ("\n".join(rows) + "\n").encode()


@pytest.mark.parametrize("name,escape,what", BAD_STRINGS, ids=[b[0] for b in BAD_STRINGS])
def test_a_bundle_with_either_is_refused_with_its_line_on_the_api_and_the_upload_page(name, escape, what):
    data = bundle_with(escape)
    api, _ = api_for("importer", researcher=True)
    upload = io.BytesIO(gzip.compress(data))
    upload.name = "bad.jsonl.gz"
    response = api.post("/api/studies/", {"bundle": upload}, format="multipart")
    assert response.status_code == 422, response.content[:300]
    assert response.json()["problems"] == [{"line": 3, "message": f"field 'input' holds {what}; remove it"}]
    _, page = group_researcher_client()
    upload = io.BytesIO(data)
    upload.name = "bad.jsonl"
    response = page.post("/studies/upload/", {"bundle": upload})
    assert response.status_code == 400 and f"line 3: field &#x27;input&#x27; holds {what}" in response.content.decode()
    assert not Study.objects.exists()


def test_a_nul_in_an_exclusion_reason_is_refused_naming_the_reason():
    """The quality panel's exclusion form reads its reason from the POST itself."""
    client = Client()
    study = judged_crowd_study(client, budget=10)
    researcher = researcher_client(Client(), study)
    annotator = Judgement.objects.filter(comparison__study=study).first().annotator
    response = researcher.post(f"/s/{study.slug}/annotators/{annotator.pk}/exclusion/",
                               {"action": "exclude", "reason": "spam\x00mer"})
    assert response.status_code == 400 and "reason" in response.content.decode()
    assert not AnnotatorExclusion.objects.exists()


def test_an_unhandled_error_under_api_answers_json_elsewhere_the_500_page():
    """Whatever is left unhandled, an API client gets JSON in the API's error shape."""
    from django.test import RequestFactory
    from django.urls import get_resolver

    handler = get_resolver().resolve_error_handler(500)
    response = handler(RequestFactory().post("/api/hits/1/submit/"))
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"detail": "A server error occurred.", "code": "server_error"}
    page = handler(RequestFactory().get("/s/some-study/annotate/"))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")
