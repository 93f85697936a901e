"""The front page and the study upload page in a real browser."""
import gzip

import pytest
from django.contrib.auth.models import Group, User

from annotation.access import RESEARCHER_GROUP
from annotation.models import Study
from tests.conftest import bundle_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page, live_server, username, password):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def test_researcher_uploads_bad_then_good_bundle(page, live_server, toy_rows, tmp_path):
    user = User.objects.create_user("rita", password="rita-pass-123")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    log_in(page, live_server, "rita", "rita-pass-123")
    page.click("text=Upload study")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(bundle_bytes(toy_rows[:3] + [{"kind": "output", "item": "zzz", "system": "A", "text": "t"}]))
    page.set_input_files("input[name=bundle]", str(bad))
    page.click("button:has-text('Import')")
    alert = page.locator("[role=alert]")
    assert "line 4: output refers to unknown item 'zzz'" in alert.inner_text()
    assert Study.objects.count() == 0
    good = tmp_path / "good.jsonl.gz"
    good.write_bytes(gzip.compress(bundle_bytes(toy_rows)))
    page.set_input_files("input[name=bundle]", str(good))
    page.click("button:has-text('Import')")
    page.wait_for_url(f"{live_server.url}/")
    assert "Imported study Toy study" in page.content()
    row = page.locator("table tbody tr").first
    assert "Toy study" in row.inner_text() and "fluency" in row.inner_text()
    page.screenshot(path=str(tmp_path / "front.png"))
