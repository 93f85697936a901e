"""What a decision guarantees, as a researcher sees it at desktop and phone sizes: the
dashboard, the settings page and a pair's page state the rule's guarantee, and a study on the
paper policy carries its measured false-decision rate (annotation/guarantees.py)."""
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from annotation import guarantees
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.browser import browser_login
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _fits(page, locator, width):
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1  # no sideways scrolling
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1


@pytest.mark.parametrize("width, height", [(1366, 768), (390, 844)])
def test_the_guarantee_and_the_paper_warning_are_on_every_researcher_screen(page, live_server, width, height):
    rows = crowd_rows(items=10)
    paper_rows = [{**rows[0], "name": "Paper study", "allocation_policy": "paper", "protocol_rule": "bayes"},
                  *rows[1:]]
    paper = study_import(source=bundle_bytes(paper_rows), slug=f"paper-{width}")
    controlled = study_import(source=bundle_bytes(rows), slug=f"controlled-{width}")
    page.set_viewport_size({"width": width, "height": height})
    browser_login(page, live_server, paper, username=f"res-{width}")
    study_membership_set(study=controlled, user=User.objects.get(username=f"res-{width}"), role="researcher")

    for name, url in (("dashboard", f"/s/{paper.slug}/dashboard/"), ("settings", f"/s/{paper.slug}/settings/"),
                      ("pair", f"/s/{paper.slug}/pair/?first=A&second=B")):
        page.goto(live_server.url + url)
        statement = page.locator("[data-guarantee]").first
        warning = page.locator("[data-policy-warning]").first
        assert guarantees.PER_LOOK in statement.inner_text(), name
        assert guarantees.PAPER_POLICY_WARNING in warning.inner_text(), name
        assert warning.is_visible()
        _fits(page, warning, width)
        if name == "dashboard":
            warning.scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOTS / f"paper-policy-warning-{width}x{height}.png"))

    for name, url in (("dashboard", f"/s/{controlled.slug}/dashboard/"),
                      ("pair", f"/s/{controlled.slug}/pair/?first=A&second=B"),
                      ("settings", f"/s/{controlled.slug}/settings/")):
        page.goto(live_server.url + url)
        statement = page.locator("[data-guarantee]").first
        assert guarantees.ANYTIME in statement.inner_text(), name
        assert page.locator("[data-policy-warning]").count() == 0, name
        _fits(page, statement, width)
    # the settings page says why the temperature has a floor
    hint = page.locator("#id_item_choice_temperature_helptext")
    assert "at least 0.1" in hint.inner_text() and "design weights" in hint.inner_text()
    statement.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / f"guarantee-settings-{width}x{height}.png"))
