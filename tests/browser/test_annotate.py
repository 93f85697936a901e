"""An annotator works through HITs in a real browser: with htmx, by keyboard, and without JavaScript."""
import pytest

from annotation.models import Judgement
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.crowd import truthful_answer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
BUTTON = {"left": "A is better", "tie": "About the same", "right": "B is better"}


def answer_visible_hit(page) -> str:
    left = page.locator("#output-left .text").inner_text()
    right = page.locator("#output-right .text").inner_text()
    return truthful_answer(left, right)


def test_crowd_worker_with_htmx_and_keyboard(page, live_server, tmp_path):
    study = study_import(source=bundle_bytes(crowd_rows(items=12, batch=3, budget=12)))
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=browser-1&STUDY_ID=s&SESSION_ID=t")
    assert page.url.endswith(f"/s/{study.slug}/annotate/")
    answered = 0
    while page.locator("form[data-hit-form]").count():
        counter = page.locator("[data-progress]").inner_text()
        answer = answer_visible_hit(page)
        if answered % 2:
            page.wait_for_timeout(300)  # a key pressed as a HIT appears is refused (annotate.js, REACTION_MS)
            page.keyboard.press({"left": "1", "tie": "2", "right": "3"}[answer])
        else:
            page.click(f"button:has-text('{BUTTON[answer]}')")
        answered += 1
        # htmx swaps the next HIT in place: the counter moves on without a page load.
        page.wait_for_function("c => !document.querySelector('[data-progress]') || "
                               "document.querySelector('[data-progress]').innerText !== c", arg=counter)
        if answered > 40:
            break
    assert page.locator("[data-end]").count() == 1
    assert "C0DE42" in page.content()
    judgements = Judgement.objects.filter(comparison__study=study)
    assert judgements.count() == answered <= 12
    assert all(s is not None and s >= 0 for s in judgements.values_list("seconds_on_task", flat=True))
    page.screenshot(path=str(tmp_path / "done.png"))


def test_annotating_without_javascript(browser, live_server):
    study = study_import(source=bundle_bytes(crowd_rows(items=6, batch=2, budget=6)))
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https://workersandbox.mturk.com")
    for _ in range(3):
        answer = answer_visible_hit(page)
        with page.expect_navigation():
            page.click(f"button:has-text('{BUTTON[answer]}')")
    assert Judgement.objects.filter(comparison__study=study, annotator__platform="mturk").count() == 3
    context.close()


def test_a_worker_with_no_work_right_now_gets_the_next_round_without_reloading(page, live_server):
    """Others hold every open comparison (as at the end of a ranking design's step): the worker
    sees "No work for you right now", and once those are judged and the next rounds open, the
    page asks again by itself (htmx, every NOWORK_RECHECK_SECONDS) and shows a HIT, with no
    navigation. Before, the worker had to press "Check again"."""
    from annotation.services import hits
    from tests.builders.annotating import workers_of

    study = study_import(source=bundle_bytes(crowd_rows(items=12, batch=2, budget=30)))
    others = workers_of([f"other{n}" for n in range(12)])
    held = []
    for annotator in others.values():
        hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
        if hit is None:
            break
        held.append((annotator, hit))
    assert held, "the first rounds opened nothing"
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=waiting-1&STUDY_ID=s&SESSION_ID=t")
    assert page.locator("#hit[data-screen='nowork']").count() == 1
    assert "checks again every 5 seconds" in page.content()
    assert 'http-equiv="refresh" content="5"' in page.content()  # the same without JavaScript
    page.evaluate("window.sameDocument = true")
    for annotator, hit in held:
        value = truthful_answer(hit.comparison.first.name, hit.comparison.second.name)
        hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                              shown_value={"left": 1, "tie": 0, "right": -1}[value] * (-1 if hit.shown_swapped else 1))
    page.wait_for_selector("form[data-hit-form]", timeout=15000)
    assert page.evaluate("window.sameDocument === true"), "the page reloaded instead of asking in place"
