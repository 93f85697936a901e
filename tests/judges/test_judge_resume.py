"""A judge run killed mid-way (kill -9 of ``manage.py judge``) resumes when the command runs
again: no verdict twice, every comparison judged once per order, the answers paid before the
kill served from the cache."""
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from annotation.models import JudgeCall, JudgeRun, JudgeUnparsed, MetricPreference
from annotation.services.studies import study_import
from tests.builders.backends import database_url
from tests.builders.bundles import REPO, bundle_bytes
from tests.builders.judges import judge_rows
from tests.fake_openai import FakeJudgeServer

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS = 20
UNITS = 3 * ITEMS * 2


def test_a_killed_run_resumes_where_it_stopped(tmp_path):
    token = uuid.uuid4().hex[:8]
    study = study_import(source=bundle_bytes(judge_rows(ITEMS, token=token)), metric="", slug=f"judged-{token}")
    env_name, key = f"EVALAPP_TEST_JUDGE_KEY_{token.upper()}", f"sk-test-{uuid.uuid4().hex}"
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "evalapp.settings.test",
           env_name: key, "EVALAPP_JUDGE_BACKOFF": "0.01"}
    model = f"fake-{token}"
    with FakeJudgeServer(delay=0.04, fail_every=7, api_key=key) as server:
        command = [sys.executable, "manage.py", "judge", study.slug, "--base-url", server.base_url, "--model", model,
                   "--api-key-env", env_name, "--both-orders", "--concurrency", "4"]
        with open(tmp_path / "first.log", "w") as log:
            first = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and sum(server.answers.values()) < UNITS // 3:
                assert first.poll() is None, (tmp_path / "first.log").read_text()
                time.sleep(0.02)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL
        run = JudgeRun.objects.get(study=study)
        stored = MetricPreference.objects.filter(metric__study=study).count()
        cached = JudgeCall.objects.filter(run=run).count()
        answered = sum(server.answers.values())
        # Killed mid-run, and consistent: the counters are those of the batches committed.
        assert run.status == "running" and 0 < stored < UNITS, (run.status, stored)
        assert run.done == stored + JudgeUnparsed.objects.filter(run=run).count() == run.verdicts
        assert stored <= cached <= answered
        second = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
        assert second.returncode == 0, second.stdout + second.stderr
    run.refresh_from_db()
    assert (run.status, run.done, run.total, run.attempts) == ("done", UNITS, UNITS, 2)
    rows = list(MetricPreference.objects.filter(metric__study=study).values_list(
        "item_id", "first_id", "second_id", "order"))
    assert len(rows) == len(set(rows)) == UNITS  # every comparison once per order, no duplicate
    assert {o for *_, o in rows} == {"AB", "BA"}
    # The answers cached before the kill but not yet stored were not paid again: the resumed
    # attempt served them from the cache, and only the calls in flight at the kill were paid twice.
    assert run.cache_hits == cached - stored > 0
    calls = JudgeCall.objects.filter(run=run).count()
    assert calls == UNITS
    assert sum(server.answers.values()) - calls <= 4  # at most the 4 in flight when killed
    assert f"resuming judge run {run.pk}" in second.stderr
    assert f"{run.cache_hits} cache hits" in second.stdout and "tokens" in second.stdout
    assert key not in second.stdout + second.stderr + (tmp_path / "first.log").read_text()
