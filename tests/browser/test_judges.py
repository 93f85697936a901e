"""A judge run from the study's judges page in a real browser, against the local
chat-completions server: the form, the run's progress bar advancing (htmx polling), the
finished run with its tokens, and the dashboard's Judges table; at 1366x768 and 390x844."""
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from annotation.models import JudgeRun
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.browser import fits_the_viewport, record_progress
from tests.builders.bundles import bundle_bytes
from tests.builders.judges import judge_rows
from tests.fake_openai import FakeJudgeServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def login(browser, live_server, size, username, slug):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(20000)
    page.goto(f"{live_server.url}/accounts/login/?next=/s/{slug}/dashboard/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "judge-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"**/s/{slug}/dashboard/")
    return context, page


def test_a_judge_run_from_its_page_with_a_progress_bar(browser, live_server, settings, monkeypatch):
    settings.EVALAPP_BACKGROUND_WORK = "thread"  # the run is a job in a background thread of the server
    token = uuid.uuid4().hex[:8]
    env, key = f"EVALAPP_TEST_JUDGE_KEY_{token.upper()}", f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv(env, key)
    study = study_import(source=bundle_bytes(judge_rows(30, humans=20, token=token)), metric="",
                         slug=f"judged-{token}")
    user = User.objects.create_user(f"judge-{token}", password="judge-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    with FakeJudgeServer(first_share=0.7, delay=0.1, api_key=key) as server:
        settings.EVALAPP_JUDGE_ENDPOINTS = {env: [server.base_url]}
        context, page = login(browser, live_server, (1366, 768), user.username, study.slug)
        page.click(f"a[href='/s/{study.slug}/judges/']")
        page.wait_for_selector("form.judge-form")
        assert fits_the_viewport(page, 1366)
        page.screenshot(path=str(SCREENSHOTS / "judges-form-1366x768.png"), full_page=True)
        page.fill("input[name=model]", "fake-judge-7b")
        page.fill("input[name=concurrency]", "2")
        page.click("form.judge-form button[type=submit]")
        page.wait_for_url("**/judges/*/")
        record_progress(page, "#judge-progress")
        page.wait_for_function("() => window.__progress.some(([v, m]) => v > m / 4 && v < m)", timeout=60000)
        page.screenshot(path=str(SCREENSHOTS / "judge-run-progress-1366x768.png"))
        page.wait_for_selector("text=Done", timeout=120000)
        seen = page.evaluate("() => window.__progress")
        # htmx replaced the bar in place, more than once, and it only went forward
        assert len({v for v, _ in seen}) >= 3 and [v for v, _ in seen] == sorted(v for v, _ in seen)
        run = JudgeRun.objects.get(study=study)
        assert run.status == "done" and run.done == run.total == 180
        tokens = server.prompt_tokens + server.completion_tokens
        assert page.locator(".judge-run-counts").inner_text().count(str(tokens)) == 1
        assert fits_the_viewport(page, 1366)
        page.screenshot(path=str(SCREENSHOTS / "judge-run-1366x768.png"), full_page=True)
        page.goto(f"{live_server.url}/s/{study.slug}/dashboard/")
        judges = page.locator("table.judges")
        judges.scroll_into_view_if_needed()
        assert "judge:fake-judge-7b" in judges.inner_text()
        page.locator("#judges").evaluate("e => e.scrollIntoView()")
        page.screenshot(path=str(SCREENSHOTS / "dashboard-judges-run-1366x768.png"))
        context.close()
        # A phone: the finished run, the judges page and the dashboard's table, nothing sideways.
        context, page = login(browser, live_server, (390, 844), user.username, study.slug)
        page.goto(f"{live_server.url}/s/{study.slug}/judges/{run.pk}/")
        assert fits_the_viewport(page, 390)
        page.screenshot(path=str(SCREENSHOTS / "judge-run-390x844.png"), full_page=True)
        assert key not in page.content()
        page.goto(f"{live_server.url}/s/{study.slug}/judges/")
        assert fits_the_viewport(page, 390) and key not in page.content()
        page.screenshot(path=str(SCREENSHOTS / "judges-page-390x844.png"), full_page=True)
        page.goto(f"{live_server.url}/s/{study.slug}/dashboard/")
        page.locator("#judges").evaluate("e => e.scrollIntoView()")
        assert fits_the_viewport(page, 390)
        page.screenshot(path=str(SCREENSHOTS / "dashboard-judges-run-390x844.png"))
        context.close()
