"""Every CSV export names its charset (issue 36, finding 10): without it a spreadsheet guesses
(often cp1252) and a worker id, system name or reason outside ASCII comes out garbled."""
import pytest
from django.test import Client

from annotation import urls
from tests.builders.clients import researcher_client
from tests.builders.crowd import judged_crowd_study

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_csv_export_is_utf_8_and_says_so():
    study = judged_crowd_study(Client(), budget=15)
    client = researcher_client(Client(), study)
    exports = [str(p.pattern).replace("<slug:slug>", study.slug) for p in urls.urlpatterns
               if str(p.pattern).endswith(".csv")]
    assert {e.rsplit("/", 1)[1] for e in exports} >= {"judgements.csv", "decisions.csv", "quality.csv", "crowd.csv"}
    for export in exports:
        response = client.get(f"/{export}")
        assert response.status_code == 200, export
        assert response["Content-Type"] == "text/csv; charset=utf-8", export
        body = b"".join(response.streaming_content) if response.streaming else response.content
        body.decode("utf-8")
