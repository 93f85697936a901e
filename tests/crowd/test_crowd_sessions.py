"""Crowd sessions through HTTP: quotas, the completion-code rule, end screens, skip, flag,
minimum time on task, MTurk submit, framing headers."""
import re
from datetime import timedelta

import pytest
from django.test import Client

from annotation.models import Assignment, Comparison, Item, ItemFlag, Judgement, Study
from annotation.selectors.serving import study_serving_audit
from annotation.services.studies import study_import
from protocol.bundle import BundleError
from tests.builders.bundles import BUNDLES, bundle_bytes, bundle_slice, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)
CODE = "C0DE42"


def crowd_study(**settings) -> Study:
    rows = crowd_rows(items=12, batch=4, budget=40)
    rows[0].update(settings)
    return study_import(source=bundle_bytes(rows))


def prolific(study, pid="p1") -> Client:
    client = Client()
    response = client.get(f"/s/{study.slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=t")
    assert response.status_code == 302
    return client


def screen(client, study, query=""):
    response = client.get(f"/s/{study.slug}/annotate/{query}")
    assert response.status_code == 200
    return response.context, response.content.decode()


def answer(client, study) -> str:
    context, _ = screen(client, study)
    assert context["screen"] == "hit", context["screen"]
    response = client.post(f"/s/{study.slug}/hits/{context['assignment'].pk}/",
                           {"answer": "left", "key": context["key"]})
    assert response.status_code == 302, response.content.decode()[:500]
    return response["Location"]


def test_code_only_when_the_minimum_is_met_and_the_maximum_stops_serving():
    study = crowd_study(session_hits_min=3, session_hits_max=3)
    worker = prolific(study)
    for n in range(3):
        context, body = screen(worker, study)
        assert context["screen"] == "hit"
        assert f"Comparison {n + 1} of 3" in " ".join(body.split())
        assert CODE not in body and "get my completion code" not in body
        assert answer(worker, study).endswith("?notice=saved")
    context, body = screen(worker, study, "?notice=saved")
    assert context["screen"] == "share" and context["code_due"]
    assert "Saved ✓" in body and "You have done your share" in body
    assert CODE in body and f"https://app.prolific.com/submissions/complete?cc={CODE}" in body
    assert Judgement.objects.filter(comparison__study=study).count() == 3
    assert not Assignment.objects.filter(state=Assignment.State.LEASED).exists()  # nothing leased past the share


def test_a_worker_who_did_nothing_gets_no_code_paused_and_finished_say_so():
    study = crowd_study(session_hits_min=3)
    study.status = Study.Status.PAUSED
    study.save()
    context, body = screen(prolific(study, "idle"), study)
    assert context["screen"] == "paused" and not context["code_due"]
    assert "paused" in body and CODE not in body and "return" in body
    study.status = Study.Status.FINISHED
    study.save()
    context, body = screen(prolific(study, "idle"), study)
    assert context["screen"] == "finished" and CODE not in body


def test_a_pause_before_the_minimum_gives_no_code_and_says_come_back_or_return():
    # The study pauses after the worker judged two of the three needed: the code pays for the
    # minimum only (CrowdSession.code_due, issue 36); the screen says their work is saved, that
    # they may come back with the same link, or return the study.
    study = crowd_study(session_hits_min=3)
    worker = prolific(study)
    answer(worker, study)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.PAUSED)
    answer(worker, study)  # the HIT leased before the pause stays theirs; after it, nothing new
    context, body = screen(worker, study)
    body = " ".join(body.split())
    assert context["screen"] == "paused" and not context["code_due"] and CODE not in body
    assert "You judged 2 comparisons in this study (3 needed for the completion code); your judgements are saved" in body
    assert "come back later with the same study link" in body and "<strong>return</strong> the study on Prolific" in body


def test_a_study_without_a_completion_code_tells_the_worker_what_to_do():
    """Issue 36, 9: a worker who met the minimum of a study without a completion code got
    "Thank you — you can stop here" and nothing else: no code, no way back to be paid. Now the
    screen says so and what to do: a Prolific worker messages the researchers on Prolific, an
    MTurk worker submits the HIT with the button."""
    study = crowd_study(session_hits_min=1, session_hits_max=3)
    Study.objects.filter(pk=study.pk).update(completion_code="")
    worker = prolific(study)
    answer(worker, study)
    context, body = screen(worker, study)
    assert "Stop here</a>" in body and "get my completion code" not in body
    context, body = screen(worker, study, "?finish=1")
    body = " ".join(body.split())
    assert context["screen"] == "stopped" and context["code_due"] and 'class="completion-code"' not in body
    assert "You judged 1 comparison in this study; your judgements are saved." in body
    assert "This study has no completion code. Please send the researchers a message on Prolific" in body
    assert "submissions/complete" not in body
    mturk = Client()
    mturk.get(f"/s/{study.slug}/start/?workerId=W9&assignmentId=A9&hitId=H9&turkSubmitTo=https://www.mturk.com")
    answer(mturk, study)
    context, body = screen(mturk, study, "?finish=1")
    assert "This study has no completion code. Please submit the HIT to MTurk with the button below." in \
        " ".join(body.split())
    assert 'action="https://www.mturk.com/mturk/externalSubmit"' in body and 'name="completion_code"' not in body


def test_progress_past_the_minimum_of_a_study_without_a_maximum_says_something_true():
    """Issue 36, 7: "Comparison 11 of 10" once a worker passed the minimum of a study with no
    maximum. The minimum is no end: the counter names it as what the code needs, then done."""
    study = crowd_study(session_hits_min=2, session_hits_max=0)
    worker = prolific(study)
    progress = []
    for _ in range(3):
        context, body = screen(worker, study)
        progress.append(" ".join(re.search(r'data-progress>(.*?)<progress', body, re.S).group(1).split()))
        answer(worker, study)
    assert progress == ["Comparison 1 — 2 needed for your completion code",
                        "Comparison 2 — 2 needed for your completion code",
                        "Comparison 3 — 2 needed for your completion code: done ✓"]
    Study.objects.filter(pk=study.pk).update(session_hits_min=1)
    context, body = screen(prolific(study, "p2"), study)
    assert re.search(r'data-progress>\s*Comparison 1\s*</p>', body) and "<progress" not in body


def test_stopping_early_is_offered_only_after_the_minimum():
    study = crowd_study(session_hits_min=2, session_hits_max=5)
    worker = prolific(study)
    answer(worker, study)
    context, body = screen(worker, study, "?finish=1")  # too early: the finish link is ignored
    assert context["screen"] == "hit" and "get my completion code" not in body
    answer(worker, study)
    context, body = screen(worker, study)
    assert "Comparison 3 of 5" in " ".join(body.split()) and "get my completion code" in body
    context, body = screen(worker, study, "?finish=1")
    assert context["screen"] == "stopped" and CODE in body


def test_session_time_limit_stops_new_hits():
    study = crowd_study(session_hits_min=5, session_minutes=10)
    worker = prolific(study)
    answer(worker, study)
    first = Assignment.objects.filter(comparison__study=study).earliest("issued_at")
    Assignment.objects.filter(comparison__study=study).update(issued_at=first.issued_at - timedelta(minutes=11))
    answer(worker, study)  # the HIT leased in time stays theirs; after it, nothing new
    context, body = screen(worker, study)
    # two of the five needed: no code (issue 36), and the way back to Prolific
    assert context["screen"] == "time" and not context["code_due"] and CODE not in body
    assert "This study has no more comparisons for you. Please <strong>return</strong>" in " ".join(body.split())


def test_minimum_time_on_task_is_enforced_on_submit():
    study = crowd_study(min_seconds_per_hit=20)
    worker = prolific(study)
    context, body = screen(worker, study)
    assert 'data-min-seconds="20"' in body
    hit = context["assignment"]
    response = worker.post(f"/s/{study.slug}/hits/{hit.pk}/", {"answer": "left", "key": context["key"]})
    assert response.status_code == 409 and "at least 20 seconds" in response.content.decode()
    assert not Judgement.objects.exists()
    Assignment.objects.filter(pk=hit.pk).update(issued_at=hit.issued_at - timedelta(seconds=21))
    response = worker.post(f"/s/{study.slug}/hits/{hit.pk}/", {"answer": "left", "key": context["key"]})
    assert response.status_code == 302 and Judgement.objects.count() == 1


def test_skip_gives_the_lease_back_and_the_worker_never_sees_it_again():
    # One item, three systems: three comparisons, one per pair, each pair's round asks for one.
    study = study_import(source=bundle_bytes(crowd_rows(items=1, batch=1, budget=3)))
    worker = prolific(study, "w")
    context, _ = screen(worker, study)
    skipped = context["assignment"].comparison_id
    response = worker.post(f"/s/{study.slug}/hits/{context['assignment'].pk}/skip/")
    assert response.status_code == 302 and response["Location"].endswith("?notice=skipped")
    assert Assignment.objects.get(pk=context["assignment"].pk).state == Assignment.State.SKIPPED
    assert Comparison.objects.get(pk=skipped).lease_expires_at is None
    seen = []
    for _ in range(5):
        context, _ = screen(worker, study)
        if context["screen"] != "hit":
            break
        seen.append(context["assignment"].comparison_id)
        answer(worker, study)
    assert sorted(seen) == sorted(set(Comparison.objects.filter(study=study).values_list("id", flat=True))
                                  - {skipped})
    assert context["screen"] == "skipped"  # the skipped one is left, but never for this worker
    other = prolific(study, "o")
    context, _ = screen(other, study)
    assert context["assignment"].comparison_id == skipped  # the pool got it back
    answer(other, study)
    audit = study_serving_audit(study=study)
    assert audit["problems"] == [] and audit["counters_consistent"] and audit["protocol_consistent"], audit


def test_flag_reports_the_item_and_a_withdrawn_item_is_never_served():
    study = crowd_study()
    worker = prolific(study)
    context, _ = screen(worker, study)
    hit = context["assignment"]
    response = worker.post(f"/s/{study.slug}/hits/{hit.pk}/flag/", {"reason": "nonsense"})
    assert response.status_code == 400 and "reason" in response.content.decode()
    response = worker.post(f"/s/{study.slug}/hits/{hit.pk}/flag/", {"reason": "broken", "note": "cut off"},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "reported to the researchers" in response.content.decode()
    flag = ItemFlag.objects.get()
    assert (flag.item_id, flag.reason, flag.note) == (hit.comparison.item_id, "broken", "cut off")
    assert Assignment.objects.get(pk=hit.pk).state == Assignment.State.SKIPPED
    from annotation.services.studies import item_withdraw

    item_withdraw(item=flag.item)
    assert Item.objects.get(pk=flag.item_id).withdrawn
    for pid in ("x1", "x2", "x3"):
        other = prolific(study, pid)
        for _ in range(40):
            context, _ = screen(other, study)
            if context["screen"] != "hit":
                break
            assert context["assignment"].comparison.item_id != flag.item_id
            answer(other, study)


def test_mturk_submit_goes_only_to_an_mturk_host():
    study = crowd_study(session_hits_min=1, session_hits_max=1)
    for submit_to, expected in (("https://workersandbox.mturk.com", True), ("https://www.mturk.com/", True),
                                ("https://evil.example/mturk", False), ("http://www.mturk.com", False)):
        worker = Client()
        worker.get(f"/s/{study.slug}/start/?workerId=W-{expected}-{len(submit_to)}&assignmentId=A1&hitId=H1"
                   f"&turkSubmitTo={submit_to}")
        context, body = screen(worker, study)
        assert CODE not in body and "externalSubmit" not in body
        answer(worker, study)
        context, body = screen(worker, study)
        assert context["screen"] == "share"
        assert ("/mturk/externalSubmit" in body) is expected, submit_to
        if expected:
            assert f'action="https://{submit_to.split("/")[2]}/mturk/externalSubmit"' in body
    preview = Client().get(f"/s/{study.slug}/start/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    assert preview.status_code == 200 and "Accept the HIT" in preview.content.decode()


def test_crowd_pages_may_be_framed_by_mturk_only_and_other_pages_not_at_all():
    study = crowd_study()
    worker = Client()
    start = worker.get(f"/s/{study.slug}/start/?workerId=W1&assignmentId=A1&turkSubmitTo=https://www.mturk.com")
    annotate = worker.get(f"/s/{study.slug}/annotate/")
    preview = worker.get(f"/s/{study.slug}/start/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE")
    for response in (start, annotate, preview):
        assert "X-Frame-Options" not in response
        policy = csp_directives(response)
        assert policy["frame-ancestors"] == "'self' https://www.mturk.com https://workersandbox.mturk.com"
        assert policy["script-src"] == "'self'"  # framing relaxes nothing else
    for other in (worker.get("/"), worker.get("/accounts/login/"), worker.get(f"/s/{study.slug}/dashboard/")):
        assert other["X-Frame-Options"] == "DENY" and csp_directives(other)["frame-ancestors"] == "'none'"


def csp_directives(response) -> dict[str, str]:
    parts = (part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
    return {name: (rest[0] if rest else "") for name, *rest in parts}


def test_session_settings_come_from_the_bundle_and_bad_ones_are_named():
    study = crowd_study(session_hits_min=4, session_hits_max=6, session_minutes=30, min_seconds_per_hit=5)
    assert (study.session_hits_min, study.session_hits_max, study.session_minutes, study.min_seconds_per_hit) == (
        4, 6, 30, 5)
    with pytest.raises(BundleError, match="session_hits_max \\(2\\) is below session_hits_min \\(4\\)"):
        crowd_study(session_hits_min=4, session_hits_max=2)
    with pytest.raises(BundleError, match="session_minutes"):
        crowd_study(session_minutes=-1)


def test_the_wmt_reference_is_shown_and_no_internal_ids():
    from protocol.bundle import read_bundle

    wmt = read_bundle(BUNDLES / "wmt21_ende.jsonl.gz")
    assert all(item.reference.strip() for item in wmt.items)  # one reference per item
    study = study_import(source=bundle_slice(BUNDLES / "wmt21_ende.jsonl.gz", items=3, systems=3), slug="wmt-slice")
    context, body = screen(prolific(study), study)
    item = context["item"]
    assert item.reference and item.reference.replace("'", "&#x27;").replace('"', "&quot;") in body
    assert 'id="reference"' in body and item.external_id not in body


def test_production_cookies_are_sent_in_a_cross_site_frame(settings):
    settings.SESSION_COOKIE_SAMESITE = settings.CSRF_COOKIE_SAMESITE = "None"
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.EVALAPP_PARTITIONED_COOKIES = True
    study = crowd_study()
    response = Client().get(f"/s/{study.slug}/start/?workerId=W1&assignmentId=A1")
    cookie = response.cookies["sessionid"].OutputString()
    assert "SameSite=None; Partitioned" in cookie and "Secure" in cookie
    settings.EVALAPP_PARTITIONED_COOKIES = False
    response = Client().get(f"/s/{study.slug}/start/?workerId=W2&assignmentId=A1")
    assert "Partitioned" not in response.cookies["sessionid"].OutputString()


def test_researchers_see_flags_in_the_admin_and_withdraw_the_item(admin_client):
    study = crowd_study()
    worker = prolific(study)
    context, _ = screen(worker, study)
    worker.post(f"/s/{study.slug}/hits/{context['assignment'].pk}/flag/", {"reason": "language", "note": "French"})
    flag = ItemFlag.objects.get()
    page = admin_client.get("/admin/annotation/itemflag/")
    assert page.status_code == 200 and "Wrong language" in page.content.decode() and "French" in page.content.decode()
    response = admin_client.post("/admin/annotation/itemflag/", {"action": "withdraw_items",
                                                                 "_selected_action": [flag.pk]})
    assert response.status_code == 302 and Item.objects.get(pk=flag.item_id).withdrawn


def test_researcher_sets_the_session_on_the_settings_page():
    from django.contrib.auth.models import User

    from annotation.services.members import study_membership_set

    study = crowd_study()
    user = User.objects.create_user("res", password="pw-res-1234")
    study_membership_set(study=study, user=user, role="researcher")
    client = Client()
    client.force_login(user)
    assert 'name="session_hits_max"' in client.get(f"/s/{study.slug}/settings/").content.decode()
    form = {"status": "running", "budget": 40, "lease_timeout_seconds": 600, "completion_code": CODE,
            "instructions": "", "item_choice": "uniform", "item_choice_temperature": 0.25,
            "session_hits_min": 4, "session_hits_max": 2, "session_minutes": 0, "min_seconds_per_hit": 3}
    response = client.post(f"/s/{study.slug}/settings/", form)
    assert response.status_code == 400 and "must be 0 or at least 4" in response.content.decode()
    response = client.post(f"/s/{study.slug}/settings/", {**form, "session_hits_max": 6})
    assert response.status_code == 302
    study.refresh_from_db()
    assert (study.session_hits_min, study.session_hits_max, study.min_seconds_per_hit) == (4, 6, 3)
    context, body = screen(prolific(study), study)
    assert "Comparison 1 of 6" in " ".join(body.split())
