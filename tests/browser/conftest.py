"""Browser tests: Debian's Chromium driven by playwright (no browser download)."""
import os
import shutil
import time

import pytest
from django.test import TransactionTestCase

from tests.builders.live_server import in_flight

# playwright's sync API runs an event loop in this thread; Django's ORM calls made by the
# test itself (fixtures) are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _flush_retried_after_a_deadlock(flush):
    """A page's last requests (the lease given back on pagehide, a lease kept alive) can reach
    the live server as its context closes, while the test's database is flushed: PostgreSQL
    then aborts the TRUNCATE as a deadlock (seen twice in CI, tests/browser/test_crowd.py and
    test_chat_rendering.py). `_live_server_quiet_before_flush` below waits for those requests;
    this stays as the backstop for a request that starts after the wait: the aborted flush
    changed nothing, so it is tried again."""

    def fixture_teardown(self):
        for attempt in range(3):
            try:
                return flush(self)
            except Exception as exc:  # CommandError from flush, the deadlock as its cause
                if attempt == 2 or "deadlock detected" not in f"{exc} {exc.__cause__}":
                    raise
                time.sleep(0.5)

    return fixture_teardown


TransactionTestCase._fixture_teardown = _flush_retried_after_a_deadlock(TransactionTestCase._fixture_teardown)


@pytest.fixture(autouse=True)
def _live_server_quiet_before_flush(_live_server_helper):
    """Set up after pytest-django's live-server helper (and so torn down before its database
    flush): after the test and its pages have closed, wait until the live server has answered
    the pages' last requests (the lease given back on pagehide arrives as a context closes),
    so the flush's TRUNCATE never races a request holding row locks."""
    yield
    if not in_flight.wait_for_quiet():
        # A page still open after its test (polling, say) keeps the server busy: say so.
        print("live server still answering requests 5 s after the test ended")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package (scripts/test.sh does)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh page; every test that uses it also checks the Content-Security-Policy: each
    document our server answers carries it with ``script-src 'self'``, and Chromium reports no
    violation of it (an inline script or handler the policy would block fails the test).
    Refused framings are not counted: they are frame-ancestors doing its job, and the framing
    tests (test_crowd.py) frame pages that must be refused on purpose and assert it."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15000)
    violations, unprotected = [], []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text and not message.text.startswith("Framing ") else None)
    page.on("response", lambda response: unprotected.append(response.url)
            if response.request.resource_type == "document" and response.url.startswith("http://localhost")
            and "script-src 'self'" not in (response.headers.get("content-security-policy") or "") else None)
    yield page
    context.close()
    assert not violations, f"Content-Security-Policy violations: {violations}"
    assert not unprotected, f"documents without the script policy: {unprotected}"
