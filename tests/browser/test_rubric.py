"""A three-criterion rubric answered by keyboard alone, at laptop and phone sizes."""
from pathlib import Path

import pytest

from annotation.models import Judgement
from annotation.services import study_import
from tests.factories import bundle_bytes, rubric_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _focused(page) -> str:
    return page.evaluate("() => document.activeElement.tagName === 'BUTTON' ? document.activeElement.textContent.trim()"
                         " : document.activeElement.name")


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_a_rubric_hit_is_answered_by_keyboard_alone(browser, live_server, size):
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)), slug="rubric")
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/rubric/start/?PROLIFIC_PID=keys-{width}&STUDY_ID=s&SESSION_ID=t")
    page.wait_for_selector("fieldset[data-criterion=style]")
    assert page.locator("fieldset[data-criterion]").count() == 3
    assert page.locator("fieldset[data-criterion=helpfulness] input[type=radio]").count() == 5  # strength scale
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.wait_for_timeout(700)  # keys this soon after a HIT appears are ignored (annotate.js)
    page.keyboard.press("1")            # helpfulness: A is much better ...
    assert _focused(page) == "reason-helpfulness"  # ... and on to its (optional) reason
    page.keyboard.type("clearer steps")
    page.keyboard.press("Tab")          # to the next criterion's options
    page.keyboard.press("3")            # correctness: B is better
    assert _focused(page) == "reason-correctness"
    page.keyboard.press("Tab")          # leave the required reason empty for now
    page.keyboard.press("2")            # style: about the same, then the submit button
    assert _focused(page).startswith("Submit my answers")
    if width < 500:
        page.screenshot(path=str(SCREENSHOTS / f"annotate-rubric-{width}x{height}.png"), full_page=True)
    page.keyboard.press("Enter")        # refused by the form: the required reason is missing
    page.wait_for_function("() => document.activeElement && document.activeElement.name === 'reason-correctness'")
    assert not Judgement.objects.exists()
    page.keyboard.type("B handles the empty list")
    if width >= 500:
        page.screenshot(path=str(SCREENSHOTS / f"annotate-rubric-{width}x{height}.png"))
    page.keyboard.press("Enter")        # Enter in a reason submits the form
    page.wait_for_function("() => !document.querySelector('input[name=reason-correctness]')"
                           " || document.querySelector('input[name=reason-correctness]').value === ''")
    judgement = Judgement.objects.get(comparison__study=study)
    sign = -1 if judgement.assignment.shown_swapped else 1
    assert judgement.answers == {
        "helpfulness": {"value": sign, "strength": 2, "reason": "clearer steps"},
        "correctness": {"value": -sign, "reason": "B handles the empty list"},
        "style": {"value": 0}}
    assert 0 < judgement.read_seconds <= judgement.seconds_on_task
    context.close()
