"""Judge runs against a local server speaking OpenAI's chat-completions protocol
(tests/fake_openai.py), called by the real ``openai`` client: verdicts in both orders, failures
and retries, unparsed answers, the cache, concurrency, the API key's secrecy, refusals."""
import logging
import uuid

import pytest
from django.apps import apps
from django.core import serializers

from annotation.models import JudgeCall, JudgeRun, JudgeUnparsed, Metric, MetricPreference, Output, Study
from annotation.services import judges
from annotation.services.studies import study_import
from protocol.judge_prompts import MT_BENCH, canonical_verdict
from tests.builders.bundles import bundle_bytes
from tests.builders.judges import judge_rows
from tests.fake_openai import FakeJudgeServer, fake_verdict

pytestmark = pytest.mark.django_db

ITEMS = 12
PAIRS = 3


@pytest.fixture
def key_env(monkeypatch, settings):
    """A unique environment variable holding a unique key; fast retries."""
    name = f"EVALAPP_TEST_JUDGE_KEY_{uuid.uuid4().hex[:8].upper()}"
    key = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv(name, key)
    settings.EVALAPP_JUDGE_BACKOFF = 0.005
    return name, key


def _study(items=ITEMS, **kw) -> tuple[Study, str]:
    token = uuid.uuid4().hex[:8]
    return study_import(source=bundle_bytes(judge_rows(items, token=token, **kw)), metric=""), token


def _run(study, server, env, **kw) -> JudgeRun:
    run = judges.judge_run_create(study=study, model=kw.pop("model", "fake-judge"), base_url=server.base_url,
                                  api_key_env=env, **kw)
    return judges.judge_run_execute(run_id=run.pk)


def _expected(row: MetricPreference, first_share: float, model: str = "fake-judge") -> int | None:
    """What the fake judge answers for a stored row's comparison and order, in the pair's order."""
    text = dict(Output.objects.filter(item=row.item).values_list("system_id", "text"))
    shown = (row.first_id, row.second_id) if row.order == "AB" else (row.second_id, row.first_id)
    user = MT_BENCH.messages(question=row.item.input, answer_a=text[shown[0]], answer_b=text[shown[1]])[1]["content"]
    letter = fake_verdict(model, user, first_share=first_share)
    return canonical_verdict({"A": 1, "B": -1, "C": 0}[letter], row.order)


def test_a_run_fills_the_studys_verdicts_in_both_orders(key_env):
    study, _ = _study()
    with FakeJudgeServer(first_share=0.7) as server:
        run = _run(study, server, key_env[0])
    assert run.status == "done" and run.error == ""
    rows = MetricPreference.objects.filter(metric__study=study, metric__name="judge:fake-judge").select_related("item")
    assert rows.count() == PAIRS * ITEMS * 2 == run.verdicts == run.done == run.total
    orders: dict[tuple, list[str]] = {}
    for row in rows:
        orders.setdefault((row.item_id, row.first_id, row.second_id), []).append(row.order)
        assert row.value == _expected(row, 0.7), (row.item.external_id, row.order)
        assert (row.judge, row.prompt) == ("fake-judge", "mt-bench-pair-v2")
    assert len(orders) == PAIRS * ITEMS and all(sorted(o) == ["AB", "BA"] for o in orders.values())
    # One call per unit, each paid once: the tokens are the server's.
    assert server.requests == PAIRS * ITEMS * 2 and run.cache_hits == 0 and run.retries == 0
    calls = JudgeCall.objects.filter(run=run)
    assert calls.count() == PAIRS * ITEMS * 2
    assert sum(c.prompt_tokens for c in calls) == server.prompt_tokens > 0
    assert sum(c.completion_tokens for c in calls) == server.completion_tokens > 0
    assert Metric.objects.get(study=study, name="judge:fake-judge").kind == "preference"


def test_one_order_per_comparison_is_chosen_by_a_hash(key_env):
    study, _ = _study()
    with FakeJudgeServer() as server:
        run = _run(study, server, key_env[0], both_orders=False)
    rows = MetricPreference.objects.filter(metric__study=study)
    assert rows.count() == PAIRS * ITEMS == server.requests == run.total
    counts = {o: rows.filter(order=o).count() for o in ("AB", "BA")}
    assert counts["AB"] > 5 and counts["BA"] > 5  # not the same system always shown first


def test_a_server_failing_every_fifth_request_is_survived(key_env):
    study, _ = _study()
    with FakeJudgeServer(first_share=0.7, fail_every=5) as server:
        run = _run(study, server, key_env[0], concurrency=3)
    assert run.status == "done", run.error
    failed = sum(server.failures.values())
    assert server.failures[500] > 0 and server.failures[429] > 0
    assert run.retries == failed and server.requests == PAIRS * ITEMS * 2 + failed
    rows = MetricPreference.objects.filter(metric__study=study).select_related("item")
    assert rows.count() == PAIRS * ITEMS * 2
    assert all(row.value == _expected(row, 0.7) for row in rows)


def test_an_answer_without_a_verdict_is_unparsed_not_a_tie(key_env):
    study, _ = _study()
    with FakeJudgeServer(unparsed_share=0.2) as server:
        run = _run(study, server, key_env[0])
    unparsed = server.answers[None]
    assert unparsed > 0
    assert run.unparsed == unparsed == JudgeUnparsed.objects.filter(run=run).count()
    rows = MetricPreference.objects.filter(metric__study=study)
    assert rows.count() == PAIRS * ITEMS * 2 - unparsed == run.verdicts
    assert rows.filter(value=0).count() == server.answers["C"]
    assert run.done == run.total == PAIRS * ITEMS * 2
    assert JudgeCall.objects.filter(run=run, verdict__isnull=True).count() == unparsed


def test_a_rerun_pays_nothing_and_the_cache_serves_another_metric(key_env):
    study, _ = _study()
    with FakeJudgeServer() as server:
        first = _run(study, server, key_env[0])
        asked = server.requests
        again = _run(study, server, key_env[0])  # same metric: every unit stored already
        assert server.requests == asked
        assert (again.status, again.total, again.already, again.verdicts, again.cache_hits) == \
            ("done", first.total, first.total, 0, 0)
        other = _run(study, server, key_env[0], metric_name="judge:again")  # same calls: all cached
        assert server.requests == asked
    assert (other.verdicts, other.cache_hits, JudgeCall.objects.filter(run=other).count()) == (first.total, first.total, 0)
    values = lambda name: sorted(MetricPreference.objects.filter(metric__name=name, metric__study=study)  # noqa: E731
                                 .values_list("item_id", "first_id", "second_id", "order", "value"))
    assert values("judge:again") == values("judge:fake-judge")


def test_calls_in_flight_are_bounded_and_overlap(key_env):
    """Eight threads keep eight calls at the server at once, never more; one thread one. The
    server holds each answer long enough (0.4 s with eight threads) that eight calls meet there
    even on a loaded machine; one thread is checked on quicker answers (it can never overlap)."""
    study, _ = _study(items=4)  # 24 calls
    for concurrency, delay in ((1, 0.05), (8, 0.4)):
        with FakeJudgeServer(delay=delay) as server:
            run = _run(study, server, key_env[0], concurrency=concurrency, metric_name=f"judge:c{concurrency}",
                       model=f"fake-{concurrency}")
            assert run.status == "done" and server.requests == 24
            assert server.most_in_flight == concurrency, (concurrency, server.most_in_flight)


def test_a_rubric_has_one_metric_and_prompt_per_criterion(key_env):
    criteria = [{"name": "rel", "label": "Relevance to the question"}, {"name": "style", "label": "Clear style"}]
    study, _ = _study(items=6, criteria=criteria)
    with FakeJudgeServer() as server:
        run = _run(study, server, key_env[0])
    assert run.criteria == ["rel", "style"]
    for name in ("rel", "style"):
        assert MetricPreference.objects.filter(metric__study=study, metric__name=f"judge:fake-judge:{name}").count() \
            == PAIRS * 6 * 2
    assert {s.split("consider one criterion only: ")[1].split(".")[0] for s in server.systems} == \
        {"Relevance to the question", "Clear style"}
    with FakeJudgeServer() as server:
        one = _run(study, server, key_env[0], criterion="style", metric_name="judge:style-only")
    assert one.criteria == ["style"] and one.total == PAIRS * 6 * 2


def test_the_key_is_sent_to_the_endpoint_and_stored_and_logged_nowhere(key_env, caplog, client):
    env, key = key_env
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpx2", "httpcore", "httpcore2", "annotation"):
        caplog.set_level(logging.DEBUG, logger=name)
    study, _ = _study(items=4)
    with FakeJudgeServer(api_key=key, fail_every=4) as server:
        run = _run(study, server, env)
    assert run.status == "done" and server.authorizations == {f"Bearer {key}"}
    assert caplog.records, "the run logged nothing at DEBUG: the check would prove nothing"
    for record in caplog.records:
        assert key not in record.getMessage() and key not in str(record.__dict__)
    for model in apps.get_models():
        dumped = serializers.serialize("json", model.objects.all())
        assert key not in dumped, model
    assert JudgeRun.objects.get(pk=run.pk).api_key_env == env
    # A key the endpoint refuses: the run fails saying so, without the key.
    with FakeJudgeServer(api_key="another") as server:
        refused = judges.judge_run_execute(run_id=judges.judge_run_create(
            study=study, model="m2", base_url=server.base_url, api_key_env=env).pk)
    assert refused.status == "failed" and "refused the API key (HTTP 401)" in refused.error
    assert key not in refused.error


def test_what_a_run_refuses(key_env, settings, monkeypatch):
    env, _ = key_env
    study, _ = _study(items=3)
    url = "http://127.0.0.1:9/v1"
    Metric.objects.create(study=study, name="scores", kind="score")
    cases = [
        (dict(model=""), "name the judge model"),
        (dict(base_url="ftp://x"), "must start with http"),
        (dict(api_key_env="sk-abc123"), "must be a name"),
        (dict(api_key_env="EVALAPP_NOT_SET_ANYWHERE"), "is not set"),
        (dict(samples=0), "samples must be"),
        (dict(concurrency=1000), "concurrency must be"),
        (dict(criterion="nope"), "no criterion 'nope'"),
        (dict(metric_name="scores"), "holds scores"),
        (dict(from_page=True), "does not send"),
    ]
    for changes, message in cases:
        with pytest.raises(ValueError, match=message):
            judges.judge_run_create(study=study, **{"model": "m", "base_url": url, "api_key_env": env, **changes})
    settings.EVALAPP_JUDGE_ENDPOINTS = {env: [url]}
    judges.judge_run_create(study=study, model="m", base_url=url + "/", api_key_env=env, from_page=True)
    # The study's protocol metric is never written by a run.
    protocol_metric = Metric.objects.create(study=study, name="judge:m2", kind="preference")
    Study.objects.filter(pk=study.pk).update(metric=protocol_metric)
    study.refresh_from_db()
    with pytest.raises(ValueError, match="protocol"):
        judges.judge_run_create(study=study, model="m2", base_url=url, api_key_env=env)
    # A metric holding another judge's verdicts is not mixed with this one's.
    other = Metric.objects.create(study=study, name="imported", kind="preference")
    pair = study.pair_states.select_related("first", "second").first()
    MetricPreference.objects.create(metric=other, item=study.items.first(), first=pair.first, second=pair.second,
                                    value=1, judge="gpt-x", prompt="theirs", order="AB")
    with pytest.raises(ValueError, match="another judge or prompt"):
        judges.judge_run_create(study=study, model="m", base_url=url, api_key_env=env, metric_name="imported")
    # A run writing a metric now is not doubled.
    with pytest.raises(ValueError, match="is writing metric"):
        judges.judge_run_create(study=study, model="m", base_url=url, api_key_env=env)
