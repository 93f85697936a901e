"""GET never writes: every page an annotator or researcher reads leaves the database as it was.

The one exception is the crowd start link, which the platforms send as a GET: it binds the
worker to their platform session and leases their first HIT.
"""
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.backends import WRITE_STATEMENT as WRITE
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.crowd import start_worker

pytestmark = pytest.mark.django_db(transaction=True)


def writes_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return [q["sql"][:120] for q in captured.captured_queries if WRITE.match(q["sql"])]


def test_reading_the_annotate_page_and_the_researcher_pages_writes_nothing(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    user = User.objects.create_user("member", password="pw-member-1234")
    study_membership_set(study=study, user=user, role="researcher")
    client.force_login(user)
    # A member who never annotated: the page offers the next comparison, it does not lease one.
    assert writes_of(client, f"/s/{study.slug}/annotate/") == []
    assert not Assignment.objects.exists()
    for url in (f"/s/{study.slug}/dashboard/", f"/s/{study.slug}/settings/", f"/api/studies/{study.slug}/",
                f"/s/{study.slug}/export/decisions.csv", "/"):
        assert writes_of(client, url) == [], url


def test_a_crowd_worker_gets_the_first_hit_from_the_start_link_and_reloads_without_writing(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    start_worker(client, study.slug, "pid-reader")
    lease = Assignment.objects.get()  # leased by the start link (a GET the platform sends)
    assert writes_of(client, f"/s/{study.slug}/annotate/") == []
    assert client.get(f"/s/{study.slug}/annotate/").context["assignment"].pk == lease.pk
    # When the lease expired, the page offers the next comparison; the POST leases it.
    Assignment.objects.filter(pk=lease.pk).update(expires_at=lease.issued_at)
    assert writes_of(client, f"/s/{study.slug}/annotate/") == []
    assert client.get(f"/s/{study.slug}/annotate/").context["screen"] == "ready"
    assert client.post(f"/s/{study.slug}/next/").status_code == 302
    assert client.get(f"/s/{study.slug}/annotate/").context["screen"] == "hit"
