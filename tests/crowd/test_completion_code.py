"""The completion code pays for judgements, not for skips (issue 21, finding 3), over HTTP."""
import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from annotation.models import Judgement
from annotation.services import study_import, study_settings_update
from protocol.bundle import BundleError
from tests.factories import bundle_bytes, crowd_rows, current_hit, researcher_client, start_worker

pytestmark = pytest.mark.django_db(transaction=True)


def crowd_study(**settings):
    rows = crowd_rows(items=6, batch=3, budget=18)
    rows[0].update(settings)
    return study_import(source=bundle_bytes(rows))


def skip_everything(worker, slug) -> tuple[int, dict]:
    """Skip every HIT served; the number skipped and the end screen's context."""
    skipped = 0
    while True:
        assignment, context = current_hit(worker, slug)
        if assignment is None:
            return skipped, context
        response = worker.post(f"/s/{slug}/hits/{assignment.pk}/skip/", {"key": context["key"]})
        assert response.status_code == 302, response.status_code
        skipped += 1


def answer_one(worker, slug) -> None:
    assignment, context = current_hit(worker, slug)
    response = worker.post(f"/s/{slug}/hits/{assignment.pk}/", {"answer": "left", "key": context["key"]})
    assert response.status_code == 302


def test_one_judgement_and_skips_do_not_earn_the_code_of_a_study_asking_for_ten():
    study = crowd_study(session_hits_min=10)
    worker = Client()
    start_worker(worker, study.slug, "skipper")
    answer_one(worker, study.slug)
    skipped, context = skip_everything(worker, study.slug)
    assert skipped >= 5 and Judgement.objects.count() == 1
    page = worker.get(f"/s/{study.slug}/annotate/")
    assert page.context["screen"] == "skipped" and not page.context["code_due"]
    assert "C0DE42" not in page.content.decode()
    assert "skipped the remaining comparisons" in page.content.decode()


def test_the_study_running_out_of_work_still_pays_for_work_done():
    """Rule 2 stands where the study, not the worker's skips, ends the session: after one
    judgement, with every other comparison judged by someone else, the code is due."""
    study = crowd_study(session_hits_min=10, session_hits_max=0)
    worker, others = Client(), Client()
    start_worker(worker, study.slug, "paid")
    answer_one(worker, study.slug)
    start_worker(others, study.slug, "other")
    while current_hit(others, study.slug)[0] is not None:
        answer_one(others, study.slug)
    # the worker's own lease, taken after their answer, is the one comparison left
    while current_hit(worker, study.slug)[0] is not None:
        answer_one(worker, study.slug)
    page = worker.get(f"/s/{study.slug}/annotate/")
    assert page.context["screen"] in ("finished", "nowork") and page.context["code_due"]
    assert "C0DE42" in page.content.decode()


@pytest.mark.django_db
def test_a_prolific_study_cannot_be_made_or_left_without_a_completion_code(toy_rows):
    """Issue 36: a study that recruits on Prolific, launched without a code, left its workers unpaid."""
    rows = [dict(toy_rows[0], prolific_study_id="6501abc"), *toy_rows[1:]]
    with pytest.raises(BundleError, match="a Prolific study .* needs a completion_code"):
        study_import(source=bundle_bytes(rows), slug="no-code")
    rows[0]["completion_code"] = "C0DE42"
    study = study_import(source=bundle_bytes(rows), slug="with-code")
    with pytest.raises(ValidationError, match="needs a completion_code"):
        study_settings_update(study=study, changes={"completion_code": ""})


@pytest.mark.django_db
def test_the_draft_settings_and_dashboard_say_what_a_worker_sees_without_a_code(client, toy_rows):
    study = study_import(source=bundle_bytes(toy_rows), slug="plain-no-code", start=False)
    researcher_client(client, study)
    notice = "A Prolific or MTurk worker who finishes this study sees “This study has no completion code”"
    assert notice in client.get("/s/plain-no-code/settings/").content.decode()
    running = study_import(source=bundle_bytes(toy_rows), slug="running-no-code")
    researcher_client(client, running)
    assert notice in client.get("/s/running-no-code/dashboard/").content.decode()
    assert notice in client.get("/s/running-no-code/settings/").content.decode()
    study_settings_update(study=running, changes={"completion_code": "DONE-1"})
    assert notice not in client.get("/s/running-no-code/dashboard/").content.decode()
