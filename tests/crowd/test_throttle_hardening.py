"""Rate limits no header can fool, counted once for all processes, on every crowd action
(issue 21, finding 2 and the skip/report/next part of finding 6)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.crowd import served_hits, start_worker
from tests.builders.throttling import assert_throttled, rates

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


def test_a_forged_x_forwarded_for_does_not_reset_the_login_limit(settings):
    rates(settings, login="3/minute")
    User.objects.create_user("u", password="right-password-1")
    statuses = [Client(HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").post(
        "/accounts/login/", {"username": "u", "password": "wrong"}).status_code for n in range(6)]
    assert statuses[:3] == [200, 200, 200] and statuses[3:] == [429, 429, 429]


def test_a_forged_x_forwarded_for_does_not_reset_the_crowd_start_limit(settings):
    rates(settings, crowd_start="3/minute")
    study = study_import(source=bundle_bytes(crowd_rows()))
    statuses = [Client(HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").get(
        f"/s/{study.slug}/start/?PROLIFIC_PID=p{n}&SESSION_ID=s{n}").status_code for n in range(5)]
    assert statuses.count(429) == 2


def test_a_trusted_proxy_count_takes_the_client_from_x_forwarded_for(settings):
    """Behind one proxy (EVALAPP_TRUSTED_PROXIES=1) the client is the last address the proxy
    appended; what the client itself wrote before it is not trusted."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    rates(settings, login="2/minute")
    User.objects.create_user("u", password="right-password-1")

    def guess(forwarded):
        return Client(HTTP_X_FORWARDED_FOR=forwarded).post(
            "/accounts/login/", {"username": "u", "password": "wrong"}).status_code

    assert [guess(f"10.9.9.{n}, 192.0.2.1") for n in range(3)] == [200, 200, 429]
    assert guess("192.0.2.2") == 200  # another client behind the same proxy


COUNT_IN_A_PROCESS = """
import django, sys
django.setup()
from django.test import RequestFactory
from annotation.throttles import LoginThrottle
request = RequestFactory().post("/accounts/login/", REMOTE_ADDR="192.0.2.77")
print(sum(LoginThrottle().allow_request(request, None) for _ in range(int(sys.argv[1]))))
"""


def test_the_embedded_default_counts_one_limit_across_processes(tmp_path):
    """Three gunicorn processes must not accept three times the limit: two processes of the
    embedded default (no EVALAPP_CACHE_URL) share one count."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalapp.settings.dev", "EVALAPP_VAR_DIR": str(tmp_path),
           "EVALAPP_THROTTLE_LOGIN": "10/minute"}
    env.pop("EVALAPP_CACHE_URL", None)
    allowed = [int(subprocess.run([sys.executable, "-c", COUNT_IN_A_PROCESS, "7"], env=env, cwd=ROOT,
                                  capture_output=True, text=True, check=True).stdout.split()[-1])
               for _ in range(2)]
    assert allowed == [7, 3]


def test_skip_report_and_next_are_limited_per_worker(settings):
    rates(settings, submit="4/minute")
    study = study_import(source=bundle_bytes(crowd_rows()))
    worker = Client()
    start_worker(worker, study.slug, "skipper")
    statuses = []
    for n, (assignment, context) in enumerate(served_hits(worker, study.slug, 6)):
        action = ("skip/", "flag/")[n % 2]
        data = {"key": context["key"]} if action == "skip/" else {"key": context["key"], "reason": "broken"}
        statuses.append(worker.post(f"/s/{study.slug}/hits/{assignment.pk}/{action}", data).status_code)
    assert 429 in statuses, statuses
    assert_throttled(worker.post(f"/s/{study.slug}/next/"))
