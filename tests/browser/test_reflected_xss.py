"""Query parameters are never reflected into HTML as markup: a link a crowd worker sends a
researcher runs no script with the researcher's session (issue 21, finding 1)."""
from urllib.parse import quote

import pytest

from annotation.services.studies import study_import
from tests.builders.browser import browser_login
from tests.builders.bundles import bundle_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOADS = ('<script>window.__xss=1</script>', '<img src=x onerror="window.__xss=2">')
# Every researcher page that validates a query parameter and answers a 400 when it is wrong
# (and the item search, which shows its query back).
PATHS = ("/s/{slug}/metrics/?sort={p}", "/s/{slug}/dashboard/?qsort={p}", "/s/{slug}/dashboard/?qorder={p}",
         "/s/{slug}/export/quality.csv?sort={p}", "/s/{slug}/export/quality.csv?order={p}",
         "/s/{slug}/pair/?first={p}&second=A", "/s/{slug}/export/judgements.csv?first={p}",
         "/s/{slug}/item/?item={p}", "/s/{slug}/item/?item=i1&first={p}&second=A", "/s/{slug}/items/?q={p}",
         "/s/{slug}/items/?annotator={p}")


def test_bad_query_parameters_run_no_script(page, live_server, toy_rows):
    study = study_import(source=bundle_bytes(toy_rows), slug="toy")
    browser_login(page, live_server, study, username="res")
    page.wait_for_load_state()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    for path in PATHS:
        for payload in PAYLOADS:
            url = live_server.url + path.format(slug=study.slug, p=quote(payload))
            response = page.goto(url)
            assert response.status in (200, 400, 404), (url, response.status)
            page.wait_for_timeout(50)  # an injected <img onerror> fires by now
            assert page.evaluate("window.__xss") is None, url
            assert page.locator("body script, body img[onerror]").count() == 0, url
    assert dialogs == []
