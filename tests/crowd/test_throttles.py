"""Rate limits: 429 with Retry-After, per IP (crowd start, login), per annotator (submits), per token."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Study
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.throttling import assert_throttled, clear_throttle_counts, rates

pytestmark = pytest.mark.django_db(transaction=True)


def test_crowd_start_link_is_limited_per_ip(settings):
    rates(settings, crowd_start="3/minute")
    study = study_import(source=bundle_bytes(crowd_rows()))
    for n in range(3):
        response = Client().get(f"/s/{study.slug}/start/?PROLIFIC_PID=p{n}&SESSION_ID=s{n}")
        assert response.status_code == 302
    assert_throttled(Client().get(f"/s/{study.slug}/start/?PROLIFIC_PID=p9&SESSION_ID=s9"))
    assert "Too many requests" in Client().get(f"/s/{study.slug}/start/?PROLIFIC_PID=p9").content.decode()
    other_ip = Client(REMOTE_ADDR="10.0.0.2").get(f"/s/{study.slug}/start/?PROLIFIC_PID=p9&SESSION_ID=s9")
    assert other_ip.status_code == 302


def test_login_guesses_are_limited_per_ip(settings):
    rates(settings, login="2/minute")
    User.objects.create_user("u", password="right-password-1")
    client = Client()
    for _ in range(2):
        assert client.post("/accounts/login/", {"username": "u", "password": "wrong"}).status_code == 200
    assert_throttled(client.post("/accounts/login/", {"username": "u", "password": "right-password-1"}))
    assert client.get("/accounts/login/").status_code == 200  # showing the form is not a guess
    assert_throttled(client.post("/admin/login/", {"username": "u", "password": "wrong"}))


def test_submits_are_limited_per_annotator(settings):
    rates(settings, submit="2/minute")
    study = study_import(source=bundle_bytes(crowd_rows()))
    clients = []
    for name in ("a1", "a2"):
        user = User.objects.create_user(name)
        study_membership_set(study=study, user=user, role="annotator")
        client = APIClient()
        client.force_authenticate(user)
        clients.append(client)
    first, second = clients
    statuses = []
    for k in range(3):
        hit = first.post(f"/api/studies/{study.slug}/hits/next/").json()
        statuses.append(first.post(f"/api/hits/{hit['id']}/submit/", {"answer": "tie"}, format="json",
                                   HTTP_IDEMPOTENCY_KEY=f"a1-{k}"))
    assert [r.status_code for r in statuses[:2]] == [200, 200]
    assert_throttled(statuses[2])
    assert statuses[2].json()["code"] == "throttled"
    hit = second.post(f"/api/studies/{study.slug}/hits/next/").json()
    assert second.post(f"/api/hits/{hit['id']}/submit/", {"answer": "tie"}, format="json",
                       HTTP_IDEMPOTENCY_KEY="a2-0").status_code == 200


def test_api_is_limited_per_token(settings):
    rates(settings, api="3/minute")
    clients = []
    for name in ("p1", "p2"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=User.objects.create_user(name)).key}")
        clients.append(client)
    for _ in range(3):
        assert clients[0].get("/api/studies/").status_code == 200
    assert_throttled(clients[0].get("/api/studies/"))
    assert clients[1].get("/api/studies/").status_code == 200


def test_counts_live_in_redis_when_configured(settings):
    """The deployment cache (EVALAPP_CACHE_URL): a limit holds across clients sharing Redis."""
    prefix = f"{settings.CACHES['throttle']['KEY_PREFIX']}-redis"
    settings.CACHES = {**settings.CACHES, "throttle": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                                       "LOCATION": "redis://127.0.0.1:6379/1", "KEY_PREFIX": prefix}}
    clear_throttle_counts()
    rates(settings, crowd_start="2/minute")
    Study.objects.create(slug="r", name="R")
    try:
        assert [Client().get("/s/r/start/").status_code for _ in range(2)] == [302, 302]
        assert_throttled(Client().get("/s/r/start/"))
        assert any(b"throttle_crowd_start" in k for k in caches["throttle"]._cache.get_client(None).scan_iter(
            match=f"{prefix}:*"))
    finally:
        clear_throttle_counts()


def _embedded_throttle_cache(settings, location: Path) -> None:
    """Count in the throttle cache as evalapp.settings.base declares it without Redis."""
    env = {k: v for k, v in os.environ.items() if k != "EVALAPP_CACHE_URL"}
    declared = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from evalapp.settings import base; "
                               "print(json.dumps(base.CACHES['throttle']))"],
        cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True, timeout=120,
        check=True).stdout)
    settings.CACHES = {**settings.CACHES, "throttle": {**declared, "LOCATION": str(location)}}


def test_the_embedded_default_counts_in_one_store_per_host_without_a_file_per_client(settings, tmp_path):
    """The embedded default's throttle cache, as evalapp.settings.base declares it without
    Redis: a limit holds for every process on the host (a second cache on the same directory
    sees the counts), and 5,000 clients' counts do not leave a file each: Django's file cache
    listed its whole directory on every write (3 ms at 2,000 entries, 15 ms at 10,000)."""
    _embedded_throttle_cache(settings, tmp_path)
    rates(settings, crowd_start="2/minute")
    Study.objects.create(slug="d", name="D")
    assert [Client().get("/s/d/start/").status_code for _ in range(2)] == [302, 302]
    assert_throttled(Client().get("/s/d/start/"))
    other_process = caches.create_connection("throttle")
    assert len(other_process.get("throttle_crowd_start_127.0.0.1")) == 2  # both counted requests
    for client in range(5000):
        other_process.set(f"throttle_submit_user:{client}", [1.0], 60)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) < 50, f"{len(files)} files for 5,000 clients"
    other_process.close()


def test_the_embedded_default_keeps_its_connection_across_requests(settings, tmp_path):
    """Django closes the caches a request used when it ends; diskcache's close dropped the
    thread's SQLite connection, so every counted request opened the file anew (1.7-1.9 ms a
    request against 0.07 ms, scripts/bench/throttle_cache.py). The connection a request counted
    through is the one the next request counts through."""
    _embedded_throttle_cache(settings, tmp_path)
    rates(settings, crowd_start="100/minute")
    Study.objects.create(slug="d", name="D")
    assert Client().get("/s/d/start/").status_code == 302
    connection = caches["throttle"]._cache._shards[0]._con  # this thread's, as the request left it
    assert Client().get("/s/d/start/").status_code == 302
    assert caches["throttle"]._cache._shards[0]._con is connection
    assert len(caches["throttle"].get("throttle_crowd_start_127.0.0.1")) == 2
