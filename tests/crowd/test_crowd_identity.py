"""A crowd worker id is bound to the platform session it first entered with."""
import pytest
from django.test import Client

from annotation.access import session_annotator_key
from annotation.models import Assignment, CrowdSession
from annotation.services import study_import
from tests.factories import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


def enter(client, slug, query):
    return client.get(f"/s/{slug}/start/?{query}")


def test_a_second_session_with_the_same_prolific_id_gets_neither_lease_nor_code():
    study = study_import(source=bundle_bytes(crowd_rows()))
    first = Client()
    assert enter(first, study.slug, "PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=sess-1").status_code == 302
    lease = first.get(f"/s/{study.slug}/annotate/").context["assignment"]
    assert lease is not None
    intruder = Client()
    response = enter(intruder, study.slug, "PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=sess-2")
    assert response.status_code == 403
    assert "already started this study in another session" in response.content.decode()
    assert session_annotator_key(study) not in intruder.session
    page = intruder.get(f"/s/{study.slug}/annotate/", follow=True)
    assert page.redirect_chain[0][0].startswith("/accounts/login/") and "C0DE42" not in page.content.decode()
    submit = intruder.post(f"/s/{study.slug}/hits/{lease.pk}/", {"answer": "left", "key": "k" * 8})
    assert submit.status_code == 403
    assert Assignment.objects.get(pk=lease.pk).state == Assignment.State.LEASED
    assert CrowdSession.objects.get(study=study).platform_session_id == "sess-1"
    # The same platform session (a reload, another browser of it) continues the same work.
    again = Client()
    assert enter(again, study.slug, "PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=sess-1").status_code == 302
    assert again.get(f"/s/{study.slug}/annotate/").context["assignment"].pk == lease.pk


def test_mturk_binds_the_assignment_id_and_a_session_id_is_required():
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert enter(Client(), study.slug, "workerId=W1&assignmentId=A1&turkSubmitTo=https://x").status_code == 302
    response = enter(Client(), study.slug, "workerId=W1&assignmentId=A2&turkSubmitTo=https://x")
    assert response.status_code == 403 and "MTurk assignment" in response.content.decode()
    missing = enter(Client(), study.slug, "PROLIFIC_PID=p2&STUDY_ID=x")
    assert missing.status_code == 400 and "SESSION_ID" in missing.content.decode()
    assert not CrowdSession.objects.filter(annotator__external_id="p2").exists()


def test_a_session_from_before_the_binding_is_not_enough():
    """The Django session alone (an annotator id without a binding to this study) gives no access."""
    study = study_import(source=bundle_bytes(crowd_rows()))
    other = study_import(source=bundle_bytes(crowd_rows()), slug="other")
    client = Client()
    assert enter(client, other.slug, "PROLIFIC_PID=p3&SESSION_ID=s3").status_code == 302
    session = client.session
    session[session_annotator_key(study)] = session[session_annotator_key(other)]
    session.save()
    assert client.get(f"/s/{study.slug}/annotate/").status_code == 403
