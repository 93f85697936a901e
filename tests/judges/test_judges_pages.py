"""The judges page, a run's page, the API's judges report and the dashboard's Judges table,
against the local chat-completions server (tests/fake_openai.py)."""
import re
import uuid

import pytest

from annotation.models import JudgeRun, MetricPreference
from annotation.services import judges
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes
from tests.builders.clients import api_for, researcher_client
from tests.builders.judges import judge_rows
from tests.fake_openai import FakeJudgeServer

pytestmark = pytest.mark.django_db

ITEMS, HUMANS = 60, 45


@pytest.fixture
def endpoint(monkeypatch, settings):
    """A unique key variable, and the fake server as the one endpoint the pages may use."""
    name = f"EVALAPP_TEST_JUDGE_KEY_{uuid.uuid4().hex[:8].upper()}"
    key = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv(name, key)
    settings.EVALAPP_JUDGE_BACKOFF = 0.005
    with FakeJudgeServer(first_share=0.7, api_key=key) as server:
        settings.EVALAPP_JUDGE_ENDPOINTS = {name: [server.base_url]}
        yield server, name, key


def _study(items=ITEMS, humans=HUMANS):
    token = uuid.uuid4().hex[:8]
    return study_import(source=bundle_bytes(judge_rows(items, humans=humans, token=token)), metric="",
                        slug=f"judged-{token}")


def test_a_researcher_starts_a_run_and_follows_it(client, endpoint, django_capture_on_commit_callbacks):
    server, env, key = endpoint
    study = _study(items=10, humans=0)
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/judges/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"{server.base_url} · key from ${env}" in html and key not in html
    assert "the protocol's metric is fixed once it has started" in html
    # The run runs where jobs run (inline in the tests), then its page.
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/s/{study.slug}/judges/", {"endpoint": f"{env}|{server.base_url}",
                                                             "model": "fake-judge", "both_orders": "on", "samples": 1,
                                                             "concurrency": 4, "scope": "all"})
    run = JudgeRun.objects.get(study=study)
    assert response.status_code == 302 and response["Location"] == f"/s/{study.slug}/judges/{run.pk}/"
    assert run.status == "done" and run.done == run.total == 3 * 10 * 2
    assert run.created_by is not None and run.api_key_env == env
    html = client.get(response["Location"]).content.decode()
    assert "<h2>Done</h2>" in html and "60 of 60 verdicts (100 %)" in html
    tokens = server.prompt_tokens + server.completion_tokens
    assert f"{tokens} <span class=\"muted\">= {server.prompt_tokens} prompt + {server.completion_tokens} completion" in html
    assert "hx-get" not in html and "http-equiv=\"refresh\"" not in html and key not in html
    listing = client.get(f"/s/{study.slug}/judges/").content.decode()
    assert f"Run {run.pk}</a> · fake-judge → <code>judge:fake-judge</code>" in listing and f"{tokens} tokens" in listing


def test_a_running_run_is_followed_with_htmx_or_a_refresh(client, endpoint):
    server, env, _ = endpoint
    study = _study(items=4, humans=0)
    researcher_client(client, study)
    run = judges.judge_run_create(study=study, model="fake-judge", base_url=server.base_url, api_key_env=env)
    html = client.get(f"/s/{study.slug}/judges/{run.pk}/").content.decode()
    assert f'hx-get="/s/{study.slug}/judges/{run.pk}/" hx-trigger="every 1s"' in html
    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in html
    assert ">Refresh</a>" in html and "Waiting to start" in html
    partial = client.get(f"/s/{study.slug}/judges/{run.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.startswith('<div id="judge-run"') and "<html" not in partial


def test_a_failed_run_is_resumed_from_its_page(client, endpoint, settings, django_capture_on_commit_callbacks):
    server, env, _ = endpoint
    study = _study(items=6, humans=0)
    researcher_client(client, study)
    settings.EVALAPP_JUDGE_MAX_RETRIES = 0
    server.fail_every = 3  # the third call fails, with no retry left: the run stops there
    run = judges.judge_run_execute(run_id=judges.judge_run_create(
        study=study, model="fake-judge", base_url=server.base_url, api_key_env=env, concurrency=1).pk)
    assert run.status == "failed" and "HTTP" in run.error and run.done < run.total
    html = client.get(f"/s/{study.slug}/judges/{run.pk}/").content.decode()
    assert "<h2>Stopped</h2>" in html and "Resume the run</button>" in html
    server.fail_every = 0
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/s/{study.slug}/judges/{run.pk}/")
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.status, run.done, run.total, run.attempts) == ("done", 36, 36, 2)
    assert MetricPreference.objects.filter(metric__study=study).count() == 36


def test_the_page_refuses_an_endpoint_the_settings_do_not_allow(client, endpoint):
    server, env, _ = endpoint
    study = _study(items=3, humans=0)
    researcher_client(client, study)
    response = client.post(f"/s/{study.slug}/judges/", {"endpoint": f"DJANGO_SECRET_KEY|http://127.0.0.1:1/v1",
                                                         "model": "m", "samples": 1, "concurrency": 4, "scope": "all"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert not JudgeRun.objects.filter(study=study).exists()


def test_the_judges_report_shows_the_position_bias_the_server_has(client, endpoint):
    """Done-when: the fake judge names the answer shown first 70 % of its non-tie verdicts (in
    expectation: 40 % of its answers to unequal answers by position alone, the rest by
    quality). The API and the dashboard report that share exactly as the server answered it,
    within three standard errors of 0.7; and near what the model gives for the rest: with
    equal qualities (P = 1/5, a tie, never flipped) and otherwise a flip when the better answer
    is shown second and the position draw passes (0.4), the flip rate is 0.8 x 0.4 = 0.32 and
    the agreement with the truthful humans 0.2 + 0.8 x 0.6 = 0.68."""
    server, env, _ = endpoint
    study = _study()
    researcher_client(client, study)
    run = judges.judge_run_execute(run_id=judges.judge_run_create(
        study=study, model="fake-judge", base_url=server.base_url, api_key_env=env).pk)
    assert run.status == "done" and run.verdicts == 3 * ITEMS * 2
    api, user = api_for(f"api-{study.slug}")
    study_membership_set(study=study, user=user, role="researcher")
    body = api.get(f"/api/studies/{study.slug}/judges/").json()
    (row,) = [j for j in body["judges"] if j["metric"] == "judge:fake-judge"]
    decisive = server.answers["A"] + server.answers["B"]
    print("measured", {k: row[k] for k in row if k not in ("metric", "judge", "criterion")}, dict(server.answers))
    assert row["decisive"] == decisive and row["first_position_share"] == pytest.approx(server.answers["A"] / decisive)
    sd = (0.7 * 0.3 / decisive) ** 0.5
    assert abs(row["first_position_share"] - 0.7) < 3 * sd, (row["first_position_share"], sd)
    assert row["both_orders"] == 3 * ITEMS
    assert abs(row["flip_rate"] - 0.32) < 3 * (0.32 * 0.68 / (3 * ITEMS)) ** 0.5, row["flip_rate"]
    assert row["human_compared"] == 3 * HUMANS
    assert abs(row["human_agreement"] - 0.68) < 3 * (0.68 * 0.32 / (3 * HUMANS)) ** 0.5, row["human_agreement"]
    assert 0 < row["kappa"] < 1 and 0 < row["balanced_agreement"] <= 1
    assert row["savings_pairs"] >= 1 and 0 <= row["savings_active"] <= row["savings_uniform"] <= 1
    assert body["runs"][0]["id"] == run.pk and body["runs"][0]["api_key_env"] == env
    assert body["runs"][0]["calls"] == 3 * ITEMS * 2 and body["runs"][0]["prompt_tokens"] == server.prompt_tokens
    # The dashboard's Judges table shows the same numbers.
    html = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    table = html[html.index('id="judges"'):]
    cells = re.search(r"<td data-label=\"Metric\">judge:fake-judge</td>(.*?)</tr>", table, re.S).group(1)
    assert f"{row['first_position_share']:.3f} <span class=\"muted\">of {decisive}</span>" in cells
    assert f"{row['flip_rate']:.3f}" in cells and f"{row['kappa']:.3f}" in cells
    assert f"{row['savings_uniform']:.2f} / {row['savings_active']:.2f}" in cells
