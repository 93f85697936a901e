"""Hostile names and texts run no script in a real browser: annotate page and dashboard (plot labels)."""
import pytest
from django.contrib.auth.models import User

from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes
from tests.builders.hostile import IMG, SCRIPT, hostile_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_hostile_text_runs_no_script(page, live_server):
    study = study_import(source=bundle_bytes(hostile_rows()), slug="hostile")
    user = User.objects.create_user("res", password="res-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{live_server.url}/s/hostile/start/?PROLIFIC_PID=w1&SESSION_ID=s1")
    page.wait_for_selector("#output-left")
    assert "<script>window.__xss=1</script>" in page.locator("#output-left").inner_text()
    assert page.evaluate("window.__xss") is None
    page.goto(f"{live_server.url}/accounts/login/?next=/s/hostile/dashboard/")
    page.fill("input[name=username]", "res")
    page.fill("input[name=password]", "res-pass-123")
    page.click("button[type=submit]")
    page.wait_for_selector("#plot-dag-metric .main-svg")
    labels = page.locator("#plot-dag-metric").text_content()
    assert SCRIPT in labels and IMG in labels  # shown as text, not parsed as markup
    assert page.locator(".plot img, .plot script, .plot [onerror]").count() == 0
    page.wait_for_timeout(500)  # an injected <img onerror> would have fired by now
    assert page.evaluate("window.__xss") is None and dialogs == []
