"""A three-criterion rubric answered by keyboard alone, at laptop and phone sizes."""
import random
from pathlib import Path

import pytest

from annotation.models import Judgement
from annotation.services import hits as serving
from annotation.services import study_import
from tests.factories import (BUNDLES, PAYLOADS, answer_rubric_hits, browser_login, bundle_bytes, rubric_rows, worker,
                             worker_page)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _focused(page) -> str:
    return page.evaluate("() => document.activeElement.tagName === 'BUTTON' ? document.activeElement.textContent.trim()"
                         " : document.activeElement.name")


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_a_rubric_hit_is_answered_by_keyboard_alone(browser, live_server, size):
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)), slug="rubric")
    width, height = size
    context, page = worker_page(browser, live_server, "rubric", size, pid=f"keys-{width}")
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


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_the_demo_rubric_study_serves_real_summaries_and_shows_each_criterion(browser, live_server, size):
    """docs/screenshots/annotate-summeval-rubric-*.png and dashboard-rubric-*.png: the demo's
    SummEval rubric (real articles, summaries and GPT-3.5 verdicts in both orders), a HIT as a
    worker sees it, and the dashboard after 400 HITs answered by simulated workers."""
    study = study_import(source=BUNDLES / "summeval_rubric.jsonl.gz", slug="summeval-rubric")
    assert study.metric.name == "gpt35_relevance"
    width, height = size
    context, page = worker_page(browser, live_server, study.slug, size, pid=f"shot-{width}")
    page.wait_for_selector("fieldset[data-criterion=consistency]")
    assert page.locator("#input").inner_text().count(" ") > 100  # a real article
    assert page.locator("fieldset[data-criterion=consistency] input[required][type=text]").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(SCREENSHOTS / f"annotate-summeval-rubric-{width}x{height}.png"))
    context.close()
    # Simulated workers (seeded): relevance follows the system order M23 > M17 > M12 > M13 > M15,
    # consistency the reverse, coherence a coin.
    rank = {name: k for k, name in enumerate(("M23", "M17", "M12", "M13", "M15"))}
    rng = random.Random(1)

    def answer(assignment):
        c = assignment.comparison
        left, right = (c.second.name, c.first.name) if assignment.shown_swapped else (c.first.name, c.second.name)
        better = 1 if rank[left] < rank[right] else -1
        return {"relevance": {"value": 2 * better if rng.random() < 0.85 else -better},
                "coherence": {"value": rng.choice([-1, 0, 1])},
                "consistency": {"value": -better if rng.random() < 0.85 else better, "reason": "simulated"}}

    answer_rubric_hits(study, [worker(f"sim{n}") for n in range(5)], 400, answer, key="s")
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    browser_login(page, live_server, study)
    page.goto(f"{live_server.url}/s/{study.slug}/dashboard/")
    page.wait_for_selector("#criteria table.criteria-pairs")
    assert page.locator("#criteria table.criteria-pairs tbody tr").count() == 10
    judges = page.locator("table.judges tbody tr")
    assert judges.count() == 3
    assert {judges.nth(k).locator("td").first.inner_text() for k in range(3)} == {
        "relevance", "coherence", "consistency"}
    page.locator("#criteria").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / f"dashboard-rubric-{width}x{height}.png"))
    context.close()


def test_hostile_reasons_are_shown_as_text_on_the_pair_page(page, live_server):
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)), slug="rubric-x")
    annotator = worker("hostile")
    given = []
    for n, payload in enumerate(PAYLOADS[:6]):
        assignment = serving.hit_next_for_annotator(study=study, annotator=annotator)
        serving.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0, idempotency_key=f"h{n}",
                                 answers={"helpfulness": {"value": 1, "reason": payload},
                                          "correctness": {"value": -1, "reason": payload}, "style": {"value": 0}})
        given.append(assignment.comparison)
    first, second = given[0].first.name, given[0].second.name
    browser_login(page, live_server, study)
    page.goto(f"{live_server.url}/s/{study.slug}/pair/?first={first}&second={second}")
    page.wait_for_selector("#reasons")
    shown = page.locator("#reasons .reason-text").all_inner_texts()
    assert shown and set(shown) <= {p.strip() for p in PAYLOADS[:6]}
    # The one link of a row is its item's reader; a reason holds none.
    assert page.locator("#reasons script, #reasons img, #reasons .reason-text a").count() == 0
    assert page.locator(f"#reasons a:not([href^='/s/{study.slug}/item/?item='])").count() == 0
    page.wait_for_timeout(300)
    assert page.evaluate("window.__xss") is None
