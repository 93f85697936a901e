"""The pair page's statement of how items were chosen, at desktop and phone sizes."""
import pytest

from annotation.models import Study
from annotation.services import hits
from tests.builders.annotating import worker
from tests.builders.browser import browser_login
from tests.builders.studies import weighted_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width, height", [(1366, 768), (390, 844)])
def test_pair_page_says_the_decision_is_design_weighted(page, live_server, tmp_path, width, height):
    study = weighted_study(Study.ItemChoice.WEIGHTED)
    for n in range(8):
        who = worker(f"w{n}")
        hit = hits.hit_next_for_annotator(study=study, annotator=who)
        hits.judgement_submit(assignment=hit, annotator=who, shown_value=1 if n % 3 else -1,
                              idempotency_key=hits.new_idempotency_key())
    page.set_viewport_size({"width": width, "height": height})
    browser_login(page, live_server, study, username=f"res-{width}")
    page.goto(f"{live_server.url}/s/{study.slug}/pair/?first=A&second=B")
    hint = page.locator("[data-design]")
    assert "design weight" in hint.inner_text() and "holds for all the pair" in hint.inner_text()
    box = hint.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1   # no sideways scrolling
    # docs/screenshots/pair-design-*.png are these screenshots
    page.screenshot(path=str(tmp_path / f"pair-design-{width}x{height}.png"), full_page=False)
