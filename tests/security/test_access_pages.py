"""Access that explains itself: login for anonymous annotate links, friendly 403/404 pages,
a front page that lists only what each user may use."""
import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.models import Study
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


def two_studies():
    running = study_import(source=bundle_bytes(crowd_rows(items=4, batch=2, budget=8)), slug="running-one")
    draft = study_import(source=bundle_bytes(crowd_rows(items=4, batch=2, budget=8)), slug="draft-one")
    Study.objects.filter(pk=draft.pk).update(status=Study.Status.DRAFT)
    return running, draft


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def test_front_page_shows_each_user_only_what_they_may_use():
    running, draft = two_studies()
    annotator = User.objects.create_user("ann", password="pw-ann-1234")
    researcher = User.objects.create_user("res", password="pw-res-1234")
    for study in (running, draft):
        study_membership_set(study=study, user=annotator, role="annotator")
        study_membership_set(study=study, user=researcher, role="researcher")
    outsider = User.objects.create_user("out", password="pw-out-1234")
    pages = {name: client_for(user).get("/").content.decode()
             for name, user in (("anonymous", None), ("outsider", outsider), ("annotator", annotator),
                                ("researcher", researcher))}
    # A study exists for those who belong to it (crowd workers come through its link).
    for name in ("anonymous", "outsider"):
        assert "running-one" not in pages[name] and "draft-one" not in pages[name], name
        assert "/annotate/" not in pages[name] and "/dashboard/" not in pages[name], name
    assert "running-one" in pages["annotator"] and "draft-one" not in pages["annotator"]
    assert "/dashboard/" not in pages["annotator"]
    assert "/s/running-one/annotate/" in pages["annotator"]
    assert "draft-one" in pages["researcher"] and "/s/running-one/dashboard/" in pages["researcher"]


def test_anonymous_annotate_link_goes_to_login_and_back():
    running, _ = two_studies()
    user = User.objects.create_user("ann", password="pw-ann-1234")
    study_membership_set(study=running, user=user, role="annotator")
    client = Client()
    response = client.get("/s/running-one/annotate/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/s/running-one/annotate/"
    response = client.post(response["Location"], {"username": "ann", "password": "pw-ann-1234",
                                                  "next": "/s/running-one/annotate/"})
    assert response.status_code == 302 and response["Location"] == "/s/running-one/annotate/"
    # A member's first visit offers the next comparison (a GET leases nothing); pressing it does.
    assert client.get("/s/running-one/annotate/").context["screen"] == "ready"
    assert client.post("/s/running-one/next/").status_code == 302
    assert client.get("/s/running-one/annotate/").context["screen"] == "hit"


def test_403_and_404_pages_say_why_and_what_to_do():
    running, draft = two_studies()
    outsider = User.objects.create_user("out", password="pw-out-1234")
    # A logged-in outsider: the study does not exist for them (access.py's rule).
    response = client_for(outsider).get("/s/running-one/annotate/")
    assert response.status_code == 404
    # A member who is not a researcher asks for the dashboard: 403, and why.
    study_membership_set(study=running, user=outsider, role="annotator")
    response = client_for(outsider).get("/s/running-one/dashboard/")
    body = response.content.decode()
    assert response.status_code == 403 and "Only the study&#x27;s researchers" in body
    assert "logged in as <strong>out</strong>" in body and "ask its researchers to add you" in body
    # An anonymous answer to a HIT: 403, and the way in.
    response = Client().post("/s/running-one/hits/1/", {"answer": "left", "key": "k" * 8})
    body = response.content.decode()
    assert response.status_code == 403
    assert "Open this study through its link, or log in with an account that belongs to it." in body
    assert "open the study from the link on the platform" in body
    response = Client().get("/s/draft-one/start/?PROLIFIC_PID=p")
    body = response.content.decode()
    assert response.status_code == 404 and "This study is not open." in body and "see the studies you can use" in body
    response = Client().get("/no/such/page/")
    assert response.status_code == 404 and "This page does not exist" in response.content.decode()
