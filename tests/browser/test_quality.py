"""The researcher excludes and re-includes a worker from the dashboard's quality panel, in a
real browser at desktop and phone sizes."""
import random
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from annotation.models import Study
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.annotating import workers_of
from tests.builders.bundles import BAD, GOOD, bundle_bytes, checked_rows
from tests.builders.spam import HONEST, annotate_with_spammer, spam_bundle

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.mark.parametrize("width,height", [(1366, 768), (390, 844)])
def test_researcher_excludes_and_reincludes_a_worker(browser, live_server, width, height, tmp_path):
    study = study_import(source=spam_bundle("browser", items=10))
    annotate_with_spammer(study, workers_of(HONEST[:3] + ["spammer"]), random.Random(9), spammer="spammer")
    user = User.objects.create_user("res", password="res-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15000)
    try:
        page.goto(f"{live_server.url}/accounts/login/?next=/s/{study.slug}/dashboard/")
        page.fill("input[name=username]", "res")
        page.fill("input[name=password]", "res-pass-123")
        page.click("button[type=submit]")
        row = page.locator("#quality tr", has_text="spammer")
        assert "too_fast" in row.inner_text() and "counted" in row.inner_text()
        # Sorting is a link (works without JavaScript): by median seconds, the spammer comes first.
        page.click("#quality th a:has-text('Median s')")
        assert page.locator("#quality tbody tr").first.inner_text().startswith("spammer")
        row.locator("input[name=reason]").fill("answers in 0.2 s")
        row.locator("input[name=reason]").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "before.png"), full_page=False)
        row.locator("button", has_text="Exclude").click()
        page.wait_for_selector(".messages >> text=spammer excluded")
        row = page.locator("#quality tr", has_text="spammer")
        assert "excluded" in row.inner_text()
        study.refresh_from_db()
        lost = study.protocol_lost_judgements
        assert lost > 0 and study.exclusions_active == 1
        assert f"{lost} judgement" in page.locator("#budget").inner_text()
        page.locator("#quality details.log summary").click()
        assert "answers in 0.2 s" in page.locator("#quality details.log").inner_text()
        page.locator("#quality").scroll_into_view_if_needed()
        name = f"quality-excluded-{width}x{height}.png"
        page.screenshot(path=str(tmp_path / name), full_page=False)
        (SCREENSHOTS / name).write_bytes((tmp_path / name).read_bytes())
        row.locator("button", has_text="Re-include").click()
        page.wait_for_selector(".messages >> text=spammer re-included")
        assert "counted" in page.locator("#quality tr", has_text="spammer").inner_text()
        study = Study.objects.get(pk=study.pk)
        assert (study.protocol_lost_judgements, study.exclusions_active) == (0, 0)
        page.screenshot(path=str(tmp_path / "after.png"), full_page=False)
        # Nothing on the panel is wider than the screen's scroll box.
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, overflow
    finally:
        context.close()
        print(tmp_path)


@pytest.mark.parametrize("width,height", [(1366, 768), (390, 844)])
def test_a_worker_who_fails_onboarding_gets_a_polite_end(browser, live_server, width, height, tmp_path):
    """Two onboarding checks answered wrongly (htmx): the worker sees a thank-you with Prolific's
    return path, no code and no further comparison."""
    from annotation.models import Judgement

    study = study_import(source=bundle_bytes(checked_rows(onboarding_checks=2)))
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15000)
    try:
        page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=careless&STUDY_ID=s&SESSION_ID=x")
        for _ in range(2):
            page.wait_for_selector("#hit form[data-hit-form]")
            action = page.locator("#hit form[data-hit-form]").get_attribute("action")
            left = page.locator("#output-left .text").inner_text().strip()
            right = page.locator("#output-right .text").inner_text().strip()
            assert {left, right} <= {GOOD, BAD}  # a check looks like any comparison
            wrong = "right" if left == GOOD and right != GOOD else "left"
            page.click(f"#hit .answers button[value={wrong}]")
            page.wait_for_function("a => { const f = document.querySelector('#hit form[data-hit-form]');"
                                   " return !f || f.getAttribute('action') !== a; }", arg=action)
        page.wait_for_selector("[data-end=screened]")
        text = page.locator("#hit").inner_text()
        assert "Thank you for your time" in text and "return" in text.lower() and "OK1" not in text
        assert page.locator("[data-end=screened] a[href='https://app.prolific.com/submissions']").count() == 1
        name = f"onboarding-failed-{width}x{height}.png"
        page.screenshot(path=str(tmp_path / name), full_page=False)
        (SCREENSHOTS / name).write_bytes((tmp_path / name).read_bytes())
        page.reload()
        page.wait_for_selector("[data-end=screened]")
        assert not Judgement.objects.filter(comparison__study=study).exists()
    finally:
        context.close()
        print(tmp_path)
