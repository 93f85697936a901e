"""The completion code pays for the work the study asks (its minimum), not for skips (issue 21,
finding 3) nor for one judgement on a screen without work (issue 36), over HTTP."""
import csv
import io

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from annotation.models import Judgement
from annotation.services import hits
from annotation.services.studies import study_import, study_settings_update
from protocol.bundle import BundleError
from tests.builders.annotating import workers_of
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.clients import researcher_client
from tests.builders.crowd import current_hit, start_worker

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


def hold_every_open_comparison(study, prefix="holder") -> list:
    """Other workers lease every comparison the open rounds offer (as at a round's end, or while
    a ranking design waits for a merge's comparisons); their HITs."""
    held = []
    for annotator in workers_of([f"{prefix}{n}" for n in range(40)]).values():
        hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
        if hit is None:
            break
        held.append(hit)
    assert held, "the first rounds opened nothing"
    return held


def test_one_judgement_of_ten_earns_no_code_on_the_no_work_screen(admin_client):
    """Issue 36, 8: "no work right now" (others hold every open comparison) showed the code to a
    worker who had judged 1 of the 10 the study asks. The code is for the minimum, whatever the
    screen: the worker is told they judged 1 of 10, that it is saved, that the page checks
    again, and how to return the study; crowd.csv's minimum_met says the same."""
    study = crowd_study(session_hits_min=10, session_hits_max=0)
    worker = Client()
    start_worker(worker, study.slug, "waiting")
    hold_every_open_comparison(study)
    answer_one(worker, study.slug)  # their lease taken on arrival; after it, nothing is free
    page = worker.get(f"/s/{study.slug}/annotate/")
    body = " ".join(page.content.decode().split())
    assert page.context["screen"] == "nowork"
    assert not page.context["code_due"] and "C0DE42" not in body and "completion-code" not in body
    assert "You judged 1 comparison in this study (10 needed for the completion code)" in body
    assert "your judgements are saved" in body
    assert "checks again every 5 seconds" in body and "<strong>return</strong> the study on Prolific" in body
    listed = list(csv.DictReader(io.StringIO(admin_client.get(f"/s/{study.slug}/export/crowd.csv").content.decode())))
    assert [(r["worker_id"], r["judgements"], r["minimum_met"]) for r in listed] == [("waiting", "1", "0")]


def test_the_study_running_out_of_work_pays_only_for_the_minimum():
    """The study, not the worker, ends the session after one judgement of ten (every other
    comparison judged by someone else): no code (the minimum was not met), and the worker is
    told to return the study. Before, rule 2 gave the code for one judgement."""
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
    body = " ".join(page.content.decode().split())
    assert page.context["screen"] in ("finished", "nowork") and not page.context["code_due"]
    assert "C0DE42" not in body and "your judgements are saved" in body and "return" in body


def test_the_completion_code_is_due_exactly_when_the_minimum_is_met():
    """CrowdSession.code_due: the minimum, whatever the screen (no second rule)."""
    from annotation.selectors.serving import CrowdSession

    def session(done, hits_min=10, time_up=False):
        return CrowdSession(done=done, hits_min=hits_min, hits_max=0, started_at=None, ends_at=None, time_up=time_up)

    assert [session(done).code_due for done in (0, 1, 9)] == [False, False, False]
    assert not session(1, time_up=True).code_due
    assert session(10).code_due and session(11).code_due and session(1, hits_min=1).code_due


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
