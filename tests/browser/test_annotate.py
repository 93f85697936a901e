"""An annotator works through HITs in a real browser: with htmx, by keyboard, and without JavaScript."""
import pytest

from annotation.models import Judgement
from annotation.services import study_import
from tests.factories import bundle_bytes, crowd_rows, truthful_answer

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
            page.wait_for_timeout(700)  # keys are ignored for 0.6 s after a HIT appears (annotate.js)
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
