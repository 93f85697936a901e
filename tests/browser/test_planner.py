"""The planner in a real browser on SummEval relevance: start a plan, watch its progress bar
advance (htmx polling), see the results table; at 1366x768 and 390x844."""
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from annotation.models import PlanJob
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.browser import fits_the_viewport, record_progress
from tests.builders.bundles import BUNDLES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def test_planner_runs_a_plan_with_a_progress_bar_and_shows_its_results(browser, live_server, settings, tmp_path):
    settings.EVALAPP_BACKGROUND_WORK = "thread"  # the job runs in a background thread of the server
    study = study_import(source=BUNDLES / "summeval_relevance.jsonl.gz", slug="summeval", metric="bert_score_f",
                         separability="skip")
    user = User.objects.create_user("planner", password="planner-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.set_default_timeout(20000)
    page.goto(f"{live_server.url}/accounts/login/?next=/s/{study.slug}/dashboard/")
    page.fill("input[name=username]", "planner")
    page.fill("input[name=password]", "planner-pass-123")
    page.click("button[type=submit]")
    page.click(f"a[href='/s/{study.slug}/plan/']")
    page.wait_for_selector("form.plan-form")
    assert page.input_value("input[name=metric_error]") == "0.4"
    assert fits_the_viewport(page, 1366)
    page.screenshot(path=str(SCREENSHOTS / "planner-form.png"), full_page=True)
    # The study has SummEval's expert ratings: fitted from them, the plan would replay them.
    # Planned as before a launch instead: the default assumptions, simulated annotators. A
    # budget of 3,000 judgements keeps each replay to a few rounds; four repetitions per scenario
    # keep the job running for several of the page's one-second polls (with one, the job ended
    # between two polls on a quiet machine and the bar was never seen part-way).
    page.uncheck("input[name=use_human]")
    page.fill("input[name=budgets]", "3000")
    page.fill("input[name=reps]", "4")
    page.fill("input[name=throughput]", "250")
    page.click("form.plan-form button[type=submit]")
    page.wait_for_url("**/plan/*/")
    record_progress(page, "#plan-progress")
    page.wait_for_function("() => window.__progress.some(([v, m]) => v > 0 && v < m)", timeout=120000)
    page.screenshot(path=str(SCREENSHOTS / "planner-progress.png"))
    page.wait_for_selector("#plan-results", timeout=240000)
    seen = page.evaluate("() => window.__progress")
    values = [v for v, _ in seen]
    assert values == sorted(values) and len(set(values)) >= 2, seen  # the bar advanced, never back
    job = PlanJob.objects.get()
    assert job.status == PlanJob.Status.DONE and job.done == job.total == 28  # 7 scenarios x 4 repetitions
    (row,) = job.result["plans"]
    cells = page.locator("#plan-results tbody tr").first.locator("td").all_inner_texts()
    assert cells[0] == "3000" and cells[1] == "10" and cells[2] == "0.05"
    assert cells[3] == "0.05"  # the study's futility level (the form's default)
    assert cells[4] == f"{row['expected_annotations']:.0f} of 12000"
    assert cells[10] == f"{row['expected_annotations'] / 250:.1f} h"
    assert fits_the_viewport(page, 1366)
    page.screenshot(path=str(SCREENSHOTS / "planner.png"), full_page=True)
    url = page.url
    context.close()

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = phone.new_page()
    page.goto(f"{live_server.url}/accounts/login/?next={url.replace(live_server.url, '')}")
    page.fill("input[name=username]", "planner")
    page.fill("input[name=password]", "planner-pass-123")
    page.click("button[type=submit]")
    page.wait_for_selector("#plan-results")
    assert fits_the_viewport(page, 390), "the page scrolls sideways (the table scrolls inside its card)"
    page.screenshot(path=str(SCREENSHOTS / "planner-390x844.png"), full_page=True)
    page.goto(f"{live_server.url}/s/{study.slug}/plan/")
    page.wait_for_selector("form.plan-form")
    assert fits_the_viewport(page, 390)
    # the assumptions' table, kinds of prompt included, fits its fieldset: no number hidden sideways
    table = page.locator("table.assumptions")
    assert table.locator("input[name=kinds]").is_visible()
    assert page.locator(".plan-form .scroll:has(table.assumptions)").evaluate("e => e.scrollWidth - e.clientWidth") == 0
    page.screenshot(path=str(SCREENSHOTS / "planner-form-390x844.png"), full_page=True)
    phone.close()
