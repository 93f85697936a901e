"""The metrics page never computes its table in the request (issue 22: seconds at 50 systems).

Without a broker the table is computed by a background thread of the web process, like the
round closes and the dashboard; the page says so and reloads itself until it is ready."""
import time

import pytest

from annotation import reports
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.clients import researcher_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_without_a_broker_the_metrics_page_answers_at_once_and_a_thread_computes_the_table(client, settings):
    settings.EVALAPP_BACKGROUND_WORK = "thread"
    settings.EVALAPP_SWEEP_SECONDS = 0.2
    study = study_import(source=bundle_bytes(crowd_rows(items=40)))
    researcher_client(client, study)
    try:
        first = client.get(f"/s/{study.slug}/metrics/")
        assert first.status_code == 200 and first.context["table"] is None
        assert "Computing the table in the background" in first.content.decode()
        deadline = time.monotonic() + 30
        while reports.study_metrics_table(study=study) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        ready = client.get(f"/s/{study.slug}/metrics/")
        assert ready.context["table"] is not None and ready.context["rows"]
    finally:
        settings.EVALAPP_BACKGROUND_WORK = "inline"  # the sweeper thread stops by itself
