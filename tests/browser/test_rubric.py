"""A three-criterion rubric answered by keyboard alone, at laptop and phone sizes: the keys,
the focus from HIT to HIT, required reasons and the submit row (issue 36); the demo's rubric."""
import random
from pathlib import Path

import pytest

from annotation.models import Judgement
from annotation.services import hits
from annotation.services.studies import study_import
from tests.builders.annotating import answer_rubric_hits, worker
from tests.builders.browser import browser_login, worker_page
from tests.builders.bundles import BUNDLES, bundle_bytes, rubric_rows
from tests.builders.hostile import PAYLOADS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


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
    assert page.locator("fieldset[data-criterion=consistency] input[data-reason=required]").count() == 1
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
        assignment = hits.hit_next_for_annotator(study=study, annotator=annotator)
        hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0, idempotency_key=f"h{n}",
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


# ---- issue 36: the rubric by keyboard, focus across HITs, required reasons, the submit row ----

def checked(page, criterion):
    """The value of the criterion's chosen option (as shown), or None."""
    return page.evaluate("n => { const r = document.querySelector(`input[name=criterion-${n}]:checked`);"
                         " return r ? r.value : null; }", criterion)


def reason(page, criterion) -> str:
    return page.locator(f"input[name=reason-{criterion}]").input_value()


def typing_focus(page) -> bool:
    """Whether the focus is in a text box (where a digit is typed, not an answer)."""
    return page.evaluate("document.activeElement.matches('input[type=text], textarea')")


def key_note(page) -> str:
    return page.locator("#hit [data-key-note]").inner_text() if page.locator("#hit [data-key-note]").is_visible() else ""


def rubric_page(browser, live_server, size=(1366, 768), pid="keys"):
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)), slug=f"rubric-{pid}")
    context, page = worker_page(browser, live_server, study.slug, size, pid=pid)
    page.wait_for_selector("fieldset[data-criterion=style]")
    page.wait_for_timeout(300)  # past the moment the HIT appeared (annotate.js refuses keys pressed then)
    return study, context, page


def next_hit(page, n):
    page.wait_for_selector(f"[data-progress]:has-text('Comparison {n}')")
    page.wait_for_timeout(300)  # a person's reaction to the new HIT, at the fastest


def test_digits_answer_criteria_and_never_become_a_reason(browser, live_server):
    """Issue 36, 1: after a key answered a criterion with a reason box, the focus moved into the
    box and the next digits were typed there: `4 1 2` gave helpfulness "B slightly better" with
    the reason "12" and left the other criteria unanswered."""
    study, context, page = rubric_page(browser, live_server, pid="digits")
    for key in "412":
        page.keyboard.press(key)
    assert (checked(page, "helpfulness"), checked(page, "correctness"), checked(page, "style")) == ("-1", "1", "0")
    assert reason(page, "helpfulness") == reason(page, "correctness") == ""
    assert not typing_focus(page)
    context.close()


def test_the_next_hit_opens_with_the_focus_out_of_any_reason_box(browser, live_server):
    """Issue 36, 2: a rubric HIT submitted from a reason box opened the next HIT with the focus
    in the same box (the same element id, focus restored by htmx after the swap): the worker's
    first key was typed into it."""
    study, context, page = rubric_page(browser, live_server, pid="refocus")
    page.check("input[name=criterion-helpfulness][value='2']")
    page.check("input[name=criterion-correctness][value='-1']")
    page.check("input[name=criterion-style][value='0']")
    page.fill("input[name=reason-correctness]", "B is right")
    page.focus("input[name=reason-correctness]")
    page.keyboard.press("Enter")
    next_hit(page, 2)
    assert Judgement.objects.filter(comparison__study=study).count() == 1
    assert not typing_focus(page)
    page.keyboard.press("1")
    assert checked(page, "helpfulness") == "2" and reason(page, "correctness") == ""
    ids = page.evaluate("[...document.querySelectorAll('#hit [id]')].map(e => e.id)")
    assert len(ids) == len(set(ids))
    context.close()


def test_about_the_same_needs_no_required_reason_and_a_preference_is_told_plainly(browser, live_server):
    """Issue 36, 3: "About the same" on a criterion whose reason is required was blocked by the
    browser until a reason was typed. A reason explains a preference: a tie needs none (the
    server agrees: tests/serving/test_rubric_studies.py); a preference without one is refused
    before sending, said plainly, with the focus in the box."""
    study, context, page = rubric_page(browser, live_server, pid="tie")
    page.check("input[name=criterion-helpfulness][value='1']")
    page.check("input[name=criterion-correctness][value='0']")
    page.check("input[name=criterion-style][value='0']")
    page.click("[data-submit-rubric]")
    next_hit(page, 2)
    judgement = Judgement.objects.get(comparison__study=study)
    assert judgement.answers["correctness"] == {"value": 0}
    page.check("input[name=criterion-helpfulness][value='1']")
    page.check("input[name=criterion-correctness][value='1']")
    page.check("input[name=criterion-style][value='0']")
    page.click("[data-submit-rubric]")
    assert "“Which answer is more correct?”: give a short reason (required when one answer is better)" in key_note(page)
    assert page.evaluate("document.activeElement.name") == "reason-correctness"
    assert Judgement.objects.filter(comparison__study=study).count() == 1
    context.close()


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_the_rubric_is_answered_by_keyboard_alone_from_hit_to_hit(browser, live_server, size):
    """Issue 36, 12: three consecutive HITs of a rubric (a strength scale with an optional reason,
    a required reason, no reason), answered and submitted without the mouse: digits answer the
    criterion in turn, R opens the reason of the answer just given, Escape or Enter leaves it,
    Enter submits when complete and says plainly what is missing when not."""
    study, context, page = rubric_page(browser, live_server, size=size, pid=f"alone-{size[0]}")
    # HIT 1: helpfulness A much better with a reason (R, typed, Escape), correctness B better with
    # its required reason (R, typed, Enter: style still open, so Enter moves on), style the same.
    page.keyboard.press("1")
    page.keyboard.press("r")
    assert page.evaluate("document.activeElement.name") == "reason-helpfulness"
    page.keyboard.type("clearer steps 1 2 3")
    page.keyboard.press("Escape")
    assert not typing_focus(page)
    page.keyboard.press("3")
    page.keyboard.press("r")
    page.keyboard.type("B handles the empty list")
    page.keyboard.press("Enter")
    assert Judgement.objects.filter(comparison__study=study).count() == 0 and not typing_focus(page)
    page.keyboard.press("2")
    assert page.evaluate("document.activeElement.matches('[data-submit-rubric]')")
    width, height = size
    page.screenshot(path=str(SCREENSHOTS / f"annotate-rubric-{width}x{height}.png"))
    page.keyboard.press("Enter")
    next_hit(page, 2)
    # HIT 2: B slightly better, about the same (no reason needed), A better; Enter.
    for key in "421":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    next_hit(page, 3)
    # HIT 3: the required reason forgotten: Enter says so and goes to the box; Enter submits.
    for key in "513":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    assert "give a short reason" in key_note(page)
    assert page.evaluate("document.activeElement.name") == "reason-correctness"
    page.keyboard.type("A cites 2 sources")
    page.keyboard.press("Enter")
    page.wait_for_function("() => !document.querySelector('[data-progress]') || "
                           "!document.querySelector('[data-progress]').innerText.includes('Comparison 3')")
    judgements = list(Judgement.objects.filter(comparison__study=study).select_related("assignment").order_by("pk"))
    assert len(judgements) == 3

    def canonical(j, shown):  # the screen's answers (+ = A, left) in canonical order
        sign = -1 if j.assignment.shown_swapped else 1
        return {name: {k: (sign * v if k == "value" else v) for k, v in row.items()} for name, row in shown.items()}

    assert [j.answers for j in judgements] == [
        canonical(judgements[0], {"helpfulness": {"value": 1, "strength": 2, "reason": "clearer steps 1 2 3"},
                                  "correctness": {"value": -1, "reason": "B handles the empty list"},
                                  "style": {"value": 0}}),
        canonical(judgements[1], {"helpfulness": {"value": -1, "strength": 1}, "correctness": {"value": 0},
                                  "style": {"value": 1}}),
        canonical(judgements[2], {"helpfulness": {"value": -1, "strength": 2},
                                  "correctness": {"value": 1, "reason": "A cites 2 sources"},
                                  "style": {"value": -1}})]
    context.close()


def box(page, selector):
    return page.locator(selector).bounding_box()


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_the_rubric_submit_row_stays_reachable_and_covers_no_answer(browser, live_server, size):
    """Issue 36, 4: the rubric's submit row was below the fold at 1366x768 and not sticky. While
    the rubric is on screen the row stays at the bottom of the viewport; the criterion the keys
    move to is scrolled above it, and at the rubric's end it covers no criterion."""
    study = study_import(source=BUNDLES / "summeval_rubric.jsonl.gz", slug="summeval-sticky")
    width, height = size
    context, page = worker_page(browser, live_server, study.slug, size, pid=f"sticky-{width}")
    page.wait_for_selector("fieldset[data-criterion=consistency]")
    page.click("details.instructions summary")  # as from the second HIT on: instructions closed
    page.evaluate("window.scrollTo(0, 0)")
    criteria = page.locator("fieldset[data-criterion]")
    first = criteria.first.bounding_box()
    if first["y"] > height - 120:  # the phone: scroll until the rubric's first criterion shows
        page.evaluate(f"window.scrollBy(0, {first['y'] - height + 160})")
    assert criteria.first.bounding_box()["y"] < height
    submit = box(page, "[data-submit-rubric]")
    assert 0 <= submit["y"] and submit["y"] + submit["height"] <= height, submit
    if width > 1000:  # the laptop: the texts, every criterion and the submit row on one screen
        row = box(page, "#hit .answers.rubric .answer-buttons")
        assert all(criteria.nth(n).bounding_box()["y"] + criteria.nth(n).bounding_box()["height"] <= row["y"] + 1
                   for n in range(criteria.count()))
    page.wait_for_timeout(3100)  # past the 3 s a HIT must be read (the demo's min_seconds_per_hit)
    page.keyboard.press("1")  # the first criterion answered: the keys move on to the second ...
    row = box(page, "#hit .answers.rubric .answer-buttons")
    second = criteria.nth(1).bounding_box()
    assert second["y"] >= 0 and second["y"] + second["height"] <= row["y"] + 1, (second, row)  # ... shown above the row
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    row = box(page, "#hit .answers.rubric .answer-buttons")
    assert row["y"] + row["height"] <= height
    for n in range(criteria.count()):
        c = criteria.nth(n).bounding_box()
        assert c["y"] + c["height"] <= row["y"] + 1, (n, c, row)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()
