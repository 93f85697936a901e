"""The API documentation page renders in Chromium from vendored assets only (no CDN)."""
from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_swagger_ui_renders_offline(page, live_server):
    outside = []

    def only_loopback(route):
        if urlsplit(route.request.url).hostname not in ("127.0.0.1", "localhost"):
            outside.append(route.request.url)
            return route.abort()
        return route.continue_()

    page.route("**/*", only_loopback)
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".opblock-summary-path")
    text = page.content()
    assert "/api/studies/{slug}/settings/" in text and "/api/hits/{hit_id}/submit/" in text
    assert outside == []
