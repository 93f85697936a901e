"""A pipeline with plain httpx, finding every address in the live OpenAPI schema by operationId:
import a study, lease and answer HITs, read the decisions and judgements, pause the study."""
import gzip

import httpx
import pytest
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token

from annotation.access import RESEARCHER_GROUP
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


class SchemaClient:
    """Calls operations by their operationId, with the method and path the schema gives."""

    def __init__(self, base_url: str, token: str):
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=60)
        schema = self.http.get("/api/schema/", params={"format": "json"}).raise_for_status().json()
        self.operations = {op["operationId"]: (method.upper(), path)
                           for path, item in schema["paths"].items() for method, op in item.items()}

    def __call__(self, operation_id: str, path_params: dict | None = None, **kwargs) -> httpx.Response:
        method, path = self.operations[operation_id]
        return self.http.request(method, path.format(**(path_params or {})), **kwargs)


def test_a_pipeline_runs_a_study_end_to_end(live_server):
    researcher = User.objects.create_user("pipeline")
    researcher.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    annotator = User.objects.create_user("annotator-bot")
    pipeline = SchemaClient(live_server.url, Token.objects.create(user=researcher).key)
    worker = SchemaClient(live_server.url, Token.objects.create(user=annotator).key)

    created = pipeline("studies_import", files={"bundle": ("b.jsonl.gz", gzip.compress(bundle_bytes(
        crowd_rows(items=6, batch=2, budget=12))))}, data={"slug": "e2e"})
    assert created.status_code == 201, created.text
    slug = {"slug": "e2e"}
    assert pipeline("study_members_set", slug, json={"username": "annotator-bot", "role": "annotator"}).is_success
    assert pipeline("study_detail", slug).json()["budget"]["total"] == 12

    answered = 0
    while True:
        hit = worker("hits_next", slug)
        if hit.status_code == 204:
            break
        assert hit.status_code == 200, hit.text
        body = hit.json()
        answer = "left" if body["left"].split()[0] < body["right"].split()[0] else "right"
        for _ in range(2):  # a retried submit is harmless
            submitted = worker("hits_submit", {"hit_id": body["id"]}, json={"answer": answer},
                               headers={"Idempotency-Key": f"e2e-{body['id']}"})
            assert submitted.status_code == 200, submitted.text
        answered += 1
        assert answered <= 12
    assert answered > 0

    decisions = pipeline("study_decisions", slug).json()
    assert sum(p["judgements"] for p in decisions["pairs"]) == answered
    judgements = pipeline("study_judgements", slug, params={"page_size": 100}).json()
    assert judgements["count"] == answered
    assert {j["annotator"] for j in judgements["results"]} == {f"user-{annotator.pk}"}
    paused = pipeline("study_settings_update", slug, json={"status": "paused"})
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert worker("hits_next", slug).status_code == 204
    assert pipeline("study_detail", slug).json()["status"] == "paused"
