"""Each decided pair's fragility on the dashboard and the pair page in a real browser, at
laptop and phone width: the counts shown are the data's, nothing scrolls sideways."""
import pytest

from annotation import reports
from annotation.services.studies import study_import
from tests.builders.annotating import answer_hits, workers_of
from tests.builders.browser import browser_login
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def truth(first, second, worker):
    if "A" in (first, second):
        return 1 if first == "A" else -1
    return 1 if worker == "w1" else -1


@pytest.mark.parametrize("width,height", [(1366, 768), (390, 844)])
def test_decided_pairs_show_how_many_judgements_would_undo_them(page, live_server, width, height):
    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=90)), slug=f"fragile-{width}")
    answer_hits(study, workers_of(["w1", "w2"]), truth)
    page.set_viewport_size({"width": width, "height": height})
    browser_login(page, live_server, study, username=f"fragile-{width}")
    page.wait_for_selector("#fragility")
    decided = [p for p in reports.study_dashboard(study=study)["pairs"] if p["decision"]]
    assert decided
    card = page.locator("#fragility")
    assert f"each of the {len(decided)} decided pairs needs the removal of more than 0.5 %" in card.inner_text()
    card.locator("summary").click()
    rows = card.locator("tbody tr")
    assert rows.count() == len(decided)
    for k, p in enumerate(decided):
        cells = rows.nth(k).locator("td").all_inner_texts()
        winner, loser = (p["first"], p["second"]) if p["decision"] > 0 else (p["second"], p["first"])
        assert cells == [f"{winner} over {loser}", str(p["judgements"]), str(p["fragility"]),
                         f"{p['fragility_share']:.3f}"]
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    card.screenshot(path=f"docs/screenshots/fragility-{width}x{height}.png")
    rows.first.locator("a").click()
    page.wait_for_selector("#pair-fragility")
    p = decided[0]
    assert page.locator("#pair-fragility").inner_text().startswith(
        f"removing {p['fragility']} of its {p['judgements']} counted judgements")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.locator("#pair-fragility").screenshot(path=f"docs/screenshots/pair-fragility-{width}x{height}.png")
