"""The front page, the study upload page and the members page in a real browser."""
import gzip
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from annotation.access import RESEARCHER_GROUP
from annotation.models import Study
from tests.builders.browser import assert_no_horizontal_scroll, researcher_upload_page
from tests.builders.bundles import bundle_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SIZES = [(1366, 768), (390, 844)]


def log_in(page, live_server, username, password):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def researcher(username="rita"):
    user = User.objects.create_user(username, email=f"{username}@example.org", password=f"{username}-pass-123")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    return user


def sized_page(browser, size):
    """A browser context with a viewport of ``size`` (width, height), and a page in it."""
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15000)
    return context, page


def upload_page(browser, live_server, size):
    """A page of ``size`` on the upload form, the researcher rita logged in."""
    return researcher_upload_page(browser, live_server, size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_upload_with_the_metric_picker_lands_on_the_study(browser, live_server, toy_rows, tmp_path, size):
    context, page = upload_page(browser, live_server, size)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(bundle_bytes(toy_rows[:3] + [{"kind": "output", "item": "zzz", "system": "A", "text": "t"}]))
    page.set_input_files("input[name=bundle]", str(bad))
    page.click("button:has-text('Check the files')")
    assert "line 4: output refers to unknown item 'zzz'" in page.locator("[role=alert]").inner_text()
    good = tmp_path / "good.jsonl.gz"
    good.write_bytes(gzip.compress(bundle_bytes(toy_rows)))
    page.set_input_files("input[name=bundle]", str(good))
    page.click("button:has-text('Check the files')")
    # The metric step: the bundle's own metrics, its setting preselected, the human-only warning.
    select = page.locator("select[name=metric]")
    assert select.input_value() == "metric:rouge"
    options = select.locator("option").all_inner_texts()
    assert options == ["— choose a metric —", "judge (pairwise preference)", "rouge (score per output)",
                       "No metric: human-only study"]
    warning = page.locator("#human-only-warning")
    assert "without a metric" in warning.inner_text() and "active" not in warning.get_attribute("class")
    select.select_option("none")
    assert "active" in warning.get_attribute("class")  # the warning stands out once "none" is chosen
    page.screenshot(path=str(SCREENSHOTS / f"upload-metric-{size[0]}x{size[1]}.png"), full_page=True)
    assert_no_horizontal_scroll(page)
    select.select_option("")
    page.click("button:has-text('Import and start the study')")
    # No choice: the browser itself refuses to send the form (the server's refusal is in
    # tests/cockpit/test_study_management.py).
    assert page.locator("select[name=metric]").evaluate("el => el.validity.valueMissing")
    assert Study.objects.count() == 0
    page.locator("select[name=metric]").select_option(label="judge (pairwise preference)")
    page.click("button:has-text('Import and start the study')")
    page.wait_for_url(f"{live_server.url}/s/toy-study/dashboard/")
    assert "Imported study Toy study: 2 items, 6 comparisons, metric judge." in page.content()
    assert Study.objects.get().metric.name == "judge"
    page.screenshot(path=str(tmp_path / "landed.png"))
    context.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_members_page_add_invite_and_remove(browser, live_server, toy_rows, size):
    from annotation.services.studies import study_import

    context, page = sized_page(browser, size)
    owner = researcher()
    study_import(source=bundle_bytes(toy_rows), slug="team", created_by=owner)
    User.objects.create_user("ann", email="ann@example.org")
    log_in(page, live_server, "rita", "rita-pass-123")
    page.goto(f"{live_server.url}/s/team/dashboard/")
    page.click("a:has-text('members')")
    page.wait_for_url(f"{live_server.url}/s/team/members/")
    add = page.locator("#add-member")
    add.locator("input[name=identifier]").fill("ann@example.org")
    add.locator("select[name=role]").select_option("annotator")
    add.locator("button").click()
    assert "Added ann as annotator." in page.content()
    invite = page.locator("#invite-member")
    invite.locator("input[name=username]").fill("newbie")
    invite.locator("input[name=email]").fill("newbie@example.org")
    invite.locator("select[name=role]").select_option("researcher")
    invite.locator("button").click()
    link = page.locator(".invite-link").inner_text()
    assert link.startswith(f"{live_server.url}/accounts/reset/")
    rows = page.locator("table.members tbody tr").all_inner_texts()
    assert [r.split()[0] for r in rows] == ["ann", "newbie", "rita"]
    page.screenshot(path=str(SCREENSHOTS / f"members-{size[0]}x{size[1]}.png"), full_page=True)
    assert_no_horizontal_scroll(page)
    # The last researcher cannot be removed... while there is another one, rita can demote herself.
    page.click("button[aria-label='Remove ann']")
    assert "Removed ann from the study." in page.content()
    assert [r.split()[0] for r in page.locator("table.members tbody tr").all_inner_texts()] == ["newbie", "rita"]
    page.click("button[aria-label='Remove newbie']")
    page.click("button[aria-label='Remove rita']")
    assert "at least one researcher" in page.locator("[role=alert]").inner_text()
    context.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_upload_as_draft_edit_and_launch(browser, live_server, toy_rows, tmp_path, size):
    context, page = upload_page(browser, live_server, size)
    good = tmp_path / "good.jsonl"
    good.write_bytes(bundle_bytes(toy_rows))
    page.set_input_files("input[name=bundle]", str(good))
    page.click("button:has-text('Check the files')")
    page.click("button:has-text('Save as draft')")
    page.wait_for_url(f"{live_server.url}/s/toy-study/settings/")
    assert "Saved as a draft" in page.content() and "Draft: not served yet" in page.content()
    form = page.locator("#draft-form")
    form.locator("select[name=metric]").select_option(label="judge")
    form.locator("input[name=batch_size]").fill("3")
    form.locator("select[name=allocation_policy]").select_option("adaptive")
    form.locator("button").click()
    assert "Draft saved." in page.content()
    assert "metric judge, γ = 0.05, batch 3" in page.locator("#launch-form").inner_text()
    page.screenshot(path=str(SCREENSHOTS / f"draft-settings-{size[0]}x{size[1]}.png"), full_page=True)
    assert_no_horizontal_scroll(page)
    page.click("button:has-text('Launch the study')")
    page.wait_for_url(f"{live_server.url}/s/toy-study/dashboard/")
    study = Study.objects.get()
    assert study.status == "running" and study.protocol_started and study.batch_size == 3
    page.goto(f"{live_server.url}/s/toy-study/settings/")
    assert "Protocol parameters (fixed)" in page.content() and page.locator("input[name=batch_size]").count() == 0
    context.close()


def test_researcher_uploads_bad_then_good_bundle(page, live_server, toy_rows, tmp_path):
    researcher()
    log_in(page, live_server, "rita", "rita-pass-123")
    page.click("text=Upload study")
    good = tmp_path / "good.jsonl.gz"
    good.write_bytes(gzip.compress(bundle_bytes(toy_rows)))
    page.set_input_files("input[name=bundle]", str(good))
    page.click("button:has-text('Check the files')")
    page.click("button:has-text('Import and start the study')")
    page.wait_for_url(f"{live_server.url}/s/toy-study/dashboard/")
    page.goto(f"{live_server.url}/")
    row = page.locator("table tbody tr").first
    assert "Toy study" in row.inner_text() and "fluency" in row.inner_text()
    page.screenshot(path=str(tmp_path / "front.png"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_front_page_fits_the_screen(browser, live_server, toy_rows, tmp_path, size):
    from annotation import services

    width, height = size
    services.studies.study_import(source=bundle_bytes(toy_rows), slug="toy-study", separability="skip",
                          created_by=researcher())
    context, page = sized_page(browser, size)
    log_in(page, live_server, "rita", "rita-pass-123")
    page.goto(f"{live_server.url}/")
    assert "Toy study" in page.content()
    page.screenshot(path=str(tmp_path / f"front-{width}x{height}.png"), full_page=True)
    assert_no_horizontal_scroll(page)
    context.close()


def test_an_anonymous_visitor_is_told_the_truth_and_no_page_requests_a_missing_file(page, live_server):
    """Issue 36, 11: right after the demo imported its studies the front page told an anonymous
    visitor "No studies yet"; and every page made the browser ask for a /favicon.ico that was
    not there (the browser process asks for it: playwright's page events do not show it, so
    the server records what it was asked)."""
    from django.core.signals import request_started

    from annotation.services.studies import study_import
    from tests.builders.bundles import crowd_rows

    study = study_import(source=bundle_bytes(crowd_rows(items=6, batch=2, budget=6)))
    asked, failed = [], []

    def record(sender, environ=None, **kwargs):
        if environ.get("REQUEST_METHOD") == "GET":  # (the HIT page also POSTs to keep its lease)
            asked.append(environ.get("PATH_INFO"))

    page.on("response", lambda r: failed.append((r.status, r.url)) if r.status >= 400 else None)
    request_started.connect(record, weak=False)
    try:
        page.goto(f"{live_server.url}/")
        page.wait_for_load_state("networkidle")
        text = " ".join(page.locator("main").inner_text().split())
        assert "No studies" not in text
        assert "Log in to see the studies you work on." in text
        assert "Crowd workers: open the study link that your platform (Prolific, MTurk) gave you." in text
        assert page.locator("main a[href='/accounts/login/']").count() == 1
        for path in ("/accounts/login/", f"/s/{study.slug}/start/?PROLIFIC_PID=fav&STUDY_ID=s&SESSION_ID=t"):
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("networkidle")
        assert page.locator("form[data-hit-form]").count() == 1
        page.wait_for_timeout(500)
    finally:
        request_started.disconnect(record)
    icon = page.locator("link[rel=icon]")
    assert icon.count() == 1 and icon.get_attribute("href").startswith("/static/")
    assert "/favicon.ico" not in asked and icon.get_attribute("href") in asked, asked
    assert not failed, failed
    for path in set(asked):  # every file the browser asked for is there
        assert page.request.get(f"{live_server.url}{path}", max_redirects=0).status in (200, 302), path
