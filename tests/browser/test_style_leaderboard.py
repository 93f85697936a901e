"""The style-controlled leaderboard on the dashboard in a real browser, at laptop and phone
width: the numbers shown are the fit's, the effects read as sentences, nothing scrolls sideways."""
import math
import random

import pytest

from annotation import reports
from annotation.services.studies import study_import
from tests.builders.annotating import answer_hits, workers_of
from tests.builders.browser import browser_login
from tests.builders.bundles import bundle_bytes
from tests.builders.style import STYLE_QUALITY, style_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width,height", [(1366, 768), (390, 844)])
def test_the_style_controlled_leaderboard_shows_ratings_effects_and_the_plain_places(page, live_server, width,
                                                                                      height):
    # 6 imported judgements on 80 of the 90 items; room for 2 more per comparison (ratings_per_item)
    study = study_import(source=bundle_bytes(style_rows(items=90, judged_items=80, ratings_per_item=8,
                                                        allocation_policy="paper", budget=1000)), slug=f"style-{width}")
    # live judgements: their side shown is known, so the position effect is measured
    rng = random.Random(width)

    def answer(first, second, _):  # Bradley–Terry on the systems' quality alone
        return 1 if rng.random() < 1 / (1 + math.exp(STYLE_QUALITY[second] - STYLE_QUALITY[first])) else -1

    assert answer_hits(study, workers_of(["w1", "w2", "w3"]), answer, stop_after=60) == 60
    page.set_viewport_size({"width": width, "height": height})
    browser_login(page, live_server, study, username=f"style-{width}")
    page.wait_for_selector("#style-leaderboard table.style-board")
    board = reports.study_dashboard(study=study)["style_leaderboard"]
    assert board["available"] and [r["system"] for r in board["rows"]] == ["A", "B", "C"]
    plain = page.locator("#leaderboard table.leaderboard tbody tr td:nth-child(2)").all_inner_texts()
    assert plain[0] == "C"  # the long writer leads the plain leaderboard
    shown = page.locator("#style-leaderboard table.style-board tbody tr")
    assert shown.count() == 3
    for k, row in enumerate(board["rows"]):
        cells = shown.nth(k).locator("td").all_inner_texts()
        assert cells[0] == str(row["position"]) and cells[1] == row["system"]
        assert cells[2].split("\n") == [f"{row['rating']:.0f}", f"{row['low']:.0f} to {row['high']:.0f}"]
        assert cells[4].startswith(str(row["plain_position"]))
        assert cells[5] == str(row["votes"])
    assert "▲2" in shown.nth(0).inner_text() and "▼2" in shown.nth(2).inner_text()  # A up from 3rd, C down from 1st
    effects = page.locator("#style-leaderboard .style-effects li").all_inner_texts()
    assert effects == [e["sentence"] for e in board["effects"]]
    assert effects[0].startswith("Longer answers win more often: 100 more words changes the chance of winning")
    assert "cannot be measured" not in effects[4]  # position: measured on the live judgements
    page.locator("#style-leaderboard details summary").click()
    words = page.locator("#style-leaderboard .style-effects-table tbody tr").first.locator("td").all_inner_texts()
    first = board["effects"][0]
    assert words[0] == "answer length" and words[1] == "100 more words"
    assert words[2].split("\n") == [f"{first['log_odds']:.3f}", f"{first['low']:.3f} to {first['high']:.3f}"]
    assert words[4].split("\n")[0] == f"{100 * first['chance']:.0f} %"
    # The page never scrolls sideways; the ratings table fits the screen (its bars give way at
    # phone width); the effects' table may scroll inside its own box.
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    wide = page.evaluate("""() => [...document.querySelectorAll('#style-leaderboard table.style-board *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName)""")
    assert not wide, wide
    page.locator("#style-leaderboard").screenshot(path=f"docs/screenshots/style-leaderboard-{width}x{height}.png")
