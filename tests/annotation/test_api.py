"""The REST API: import, study state, HIT next/submit (idempotent), permissions."""
import gzip
import io

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from annotation.access import RESEARCHER_GROUP
from annotation.models import Judgement, Study
from annotation.services import study_membership_set
from tests.annotation.test_serving import crowd_rows
from tests.conftest import bundle_bytes

pytestmark = pytest.mark.django_db(transaction=True)


def api_for(username, researcher=False):
    user = User.objects.create_user(username, password="pw-12345678")
    if researcher:
        user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    client = APIClient()
    client.force_authenticate(user)
    return client, user


def upload(client, rows, **extra):
    f = io.BytesIO(gzip.compress(bundle_bytes(rows)))
    f.name = "bundle.jsonl.gz"
    return client.post("/api/studies/", {"bundle": f, **extra}, format="multipart")


def test_import_through_the_api_reports_problems_with_lines():
    client, _ = api_for("r", researcher=True)
    bad = crowd_rows()[:3] + [{"kind": "output", "item": "i99", "system": "A", "text": "x"}]
    response = upload(client, bad)
    assert response.status_code == 400
    assert response.json()["problems"] == [{"line": 4, "message": "output refers to unknown item 'i99'"}]
    assert Study.objects.count() == 0
    response = upload(client, crowd_rows(), slug="api-study")
    assert response.status_code == 201 and response.json()["slug"] == "api-study"
    listed = client.get("/api/studies/").json()
    assert [s["slug"] for s in listed] == ["api-study"]
    detail = client.get("/api/studies/api-study/").json()
    assert detail["budget"]["total"] == 90 and len(detail["pairs"]) == 3
    assert sorted(r["system"] for r in detail["leaderboard"]) == ["A", "B", "C"]


def test_non_researchers_cannot_import_or_read_state():
    client, _ = api_for("a")
    assert upload(client, crowd_rows()).status_code == 403
    researcher, _ = api_for("r", researcher=True)
    upload(researcher, crowd_rows(), slug="s1")
    assert client.get("/api/studies/s1/").status_code == 403
    assert client.post("/api/studies/s1/hits/next/").status_code == 403
    assert APIClient().get("/api/studies/").status_code in (401, 403)


def test_hit_next_and_idempotent_submit():
    researcher, _ = api_for("r", researcher=True)
    upload(researcher, crowd_rows(), slug="s2")
    client, user = api_for("ann")
    study_membership_set(study=Study.objects.get(slug="s2"), user=user, role="annotator")
    hit = client.post("/api/studies/s2/hits/next/").json()
    assert set(hit) == {"id", "item", "input", "left", "right", "expires_at"}
    for _ in range(2):
        response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "right"}, format="json",
                               HTTP_IDEMPOTENCY_KEY="key-123")
        assert response.status_code == 200
    assert Judgement.objects.count() == 1
    response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "sideways"}, format="json",
                           HTTP_IDEMPOTENCY_KEY="key-124")
    assert response.status_code == 400
    response = client.post(f"/api/hits/{hit['id']}/submit/", {"answer": "left"}, format="json")
    assert response.status_code == 409
