"""The researcher dashboard in a real browser: plotly charts drawn, live update by polling."""
import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.services import study_import, study_membership_set
from tests.annotation.test_serving import crowd_rows, current_hit, start_worker
from tests.conftest import bundle_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_dashboard_draws_charts_and_updates_live(page, live_server, tmp_path):
    study = study_import(source=bundle_bytes(crowd_rows(batch=3, budget=30)))
    user = User.objects.create_user("res", password="res-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    page.goto(f"{live_server.url}/accounts/login/?next=/s/{study.slug}/dashboard/")
    page.fill("input[name=username]", "res")
    page.fill("input[name=password]", "res-pass-123")
    page.click("button[type=submit]")
    page.wait_for_selector("#plot-dag-protocol .main-svg")
    assert page.locator("#budget").inner_text().count("0 of 30") == 1
    # An annotator judges meanwhile; the polling dashboard shows it without a reload.
    worker = Client()
    start_worker(worker, study.slug, "pid-live")
    assignment, context = current_hit(worker, study.slug)
    worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "left", "key": context["key"]})
    page.wait_for_function("() => document.querySelector('#budget').innerText.includes('1 of 30')", timeout=20000)
    page.wait_for_selector("#plot-dag-protocol .main-svg")
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
