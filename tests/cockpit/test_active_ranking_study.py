"""The active ranking design in the app (issue 22, docs/ranking.md): labels go to the neighbours
of the fitted order that it is least sure of, a step of rounds at a time, until every pair of
neighbours is resolved to the study's resolution at its confidence (ordered, or close).

Driven through the app's own paths: import, serving (hit_next_for_annotator), submits, the
round closes, an exclusion's re-decision, the dashboard and the pair matrix."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.management.commands.demo_setup import RANKING_DEMOS
from annotation.models import Assignment, PairState, PlanJob, Study
from annotation.reports import study_dashboard_refresh
from annotation.selectors.dashboard import study_ranking
from annotation.selectors.serving import protocol_pair_of
from annotation.serving import protocol_state
from annotation.services.studies import study_import
from annotation.services.planner import plan_job_create
from protocol.arena import make_arena, write_bundle
from protocol.bundle import BundleError, read_bundle
from protocol.plan import DEFAULT_ASSUMPTIONS, Assumptions, GridPoint, plan
from protocol.preferences import metric_labels
from tests.builders.annotating import answer_hits, answer_null_with_an_exclusion, workers_of
from tests.builders.bundles import RANKING_SYSTEMS, bundle_bytes, ranking_rows, ranking_truth
from tests.builders.clients import planner_form_data

pytestmark = pytest.mark.django_db(transaction=True)

K = len(RANKING_SYSTEMS)
PAIRS = K * (K - 1) // 2
ACTIVE = {"pair_design": "active"}


def served_pairs(study: Study) -> set[tuple[str, str]]:
    return set(Assignment.objects.filter(comparison__study=study).values_list(
        "comparison__first__name", "comparison__second__name"))


def judged_pairs(study: Study) -> set[tuple[str, str]]:
    return {(p.first.name, p.second.name) for p in PairState.objects.filter(study=study).select_related(
        "first", "second") if protocol_pair_of(study, p).judgements}


@pytest.mark.parametrize("metric", [False, True])
def test_an_active_study_funds_neighbours_of_its_fitted_order_and_finds_the_true_order(metric):
    study = study_import(source=bundle_bytes(ranking_rows(metric=metric, **ACTIVE)), slug=f"active-{int(metric)}")
    assert study.pair_design == "active" and sorted(study.ranking_order) == RANKING_SYSTEMS
    if metric:  # the metric's order starts it: here the truth
        assert study.ranking_order == RANKING_SYSTEMS[::-1]
    settings = protocol_state.protocol_settings(study)
    assert settings.gamma == pytest.approx(0.05 / PAIRS) and settings.family == "none"
    # the first step: a round for every neighbour of the start order, the rest parked
    statuses = [p.status for p in PairState.objects.filter(study=study)]
    assert statuses.count("open") == K - 1 and statuses.count("parked") == PAIRS - (K - 1)

    made = answer_hits(study, workers_of(["w1", "w2", "w3"]), lambda a, b, _: ranking_truth(a, b))
    study.refresh_from_db()
    ranking = study_ranking(study=study)
    assert ranking["design"] == "active" and ranking["complete"]
    assert ranking["order"] == RANKING_SYSTEMS[::-1]
    # every neighbour resolved: ordered (at the stricter bar of an ordered claim, issue 39) or
    # close; 25 unanimous labels of a pair resolve it, but with the other pairs' labels pooled
    # into the fit not always at that bar
    assert [s for tier in ranking["tiers"] for s in tier] == ranking["order"]
    assert ranking["ordered"] + ranking["close"] == K - 1
    assert ranking["expected_misordered"] < 0.1 * (K - 1)
    assert served_pairs(study) == judged_pairs(study), "a pair the design did not fund was served"
    assert made == ranking["labels"] < PAIRS * 30
    # what each final claim rests on (issue 39): judgements whose removal undoes it
    claims = [n for n in ranking["neighbours"] if n["status"] in ("ordered", "close")]
    assert claims and all(1 <= n["removals"] <= ranking["labels"] for n in claims)
    assert ranking["fragile_claims"] == sum(n["removals"] <= 0.005 * ranking["labels"] for n in claims)
    for first, second, decision in ranking["decisions"]:
        assert decision == ranking_truth(first, second)


def test_on_a_null_nothing_is_decided_through_serving_and_an_exclusion():
    """Every system equal (``answer_null_with_an_exclusion``: judgements that alternate, one of
    three workers excluded half-way, the re-decision rebuilding the pairs). The design
    completes (its pairs' items run out), decides nothing, orders no neighbour at its
    confidence, and never serves a pair it did not fund."""
    study = study_import(source=bundle_bytes(ranking_rows(items=20, **ACTIVE)), slug="active-null")
    answer_null_with_an_exclusion(study, exclude_after=60)
    assert study.protocol_redecide_done == study.protocol_redecide_requested == 1
    ranking = study_ranking(study=study)
    assert ranking["complete"] and ranking["ordered"] == 0
    assert ranking["tiers"] == [ranking["order"]] and ranking["decided"] == ranking["implied"] == 0
    assert not PairState.objects.filter(study=study).exclude(decision=0).exists()
    assert served_pairs(study) == judged_pairs(study)


def test_the_dashboard_shows_the_fitted_order_and_what_it_states():
    owner = User.objects.create_user("active-owner", password="pw-active-123")
    study = study_import(source=bundle_bytes(ranking_rows(metric=True, **ACTIVE)), slug="active-shown",
                         created_by=owner)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert "Active ranking design" in page and "still open" in page and "10 rounds open at a time" in page
    assert f"0.05 / {PAIRS}" in page and "posterior" in page
    answer_hits(study, workers_of(["w1"]), lambda a, b, _: ranking_truth(a, b))
    study_dashboard_refresh(study_id=study.pk)
    page = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert "ranking complete" in page and "Rests on" in page
    assert page.index(">s5<") < page.index(">s4<") < page.index(">s0<")
    settings_page = client.get(f"/s/{study.slug}/settings/").content.decode()
    assert "resolved to 0.05 in log-strength at confidence 0.95" in settings_page
    assert "… by &gt; 0.05" in page and "close" in page


def test_the_active_design_refuses_what_it_cannot_keep_its_statement_with():
    with pytest.raises(BundleError, match=r"active ranking design needs family control 'none'.*γ / \(k \(k − 1\) / 2\)"):
        study_import(source=bundle_bytes(ranking_rows(pair_design="active", family_control="ebh")), slug="a-ebh")
    rows = ranking_rows(**ACTIVE) + [{"kind": "human_preference", "item": "i00", "first": "s0", "second": "s1",
                                      "preference": 1, "annotator": "a"}]
    with pytest.raises(BundleError, match="the active design starts with no human judgements"):
        study_import(source=bundle_bytes(rows), slug="a-held")
    with pytest.raises(BundleError, match="study setting 'ranking_confidence'"):
        study_import(source=bundle_bytes(ranking_rows(ranking_confidence=1.5, **ACTIVE)), slug="a-conf")
    assert not Study.objects.filter(slug__startswith="a-").exists()
    study = study_import(source=bundle_bytes(ranking_rows(metric=True, ranking_confidence=0.95,
                                                          ranking_resolution=0.2, **ACTIVE)), slug="a-ok")
    assert (study.ranking_confidence, study.ranking_resolution) == (0.95, 0.2)
    assert study.active_settings.confidence == 0.95 and study.active_settings.batch == study.batch_size
    with pytest.raises(ValueError, match="the active ranking design runs the adaptive policy"):
        plan_job_create(study=study, user=None, use_human=False, assumptions=DEFAULT_ASSUMPTIONS.to_dict(),
                        budgets=[None], batches=[10], gammas=[0.05], reps=1, policy="paper", throughput=100.0)


def test_the_planner_plans_the_demos_active_study_by_replaying_the_design(tmp_path):
    """The demo's active study (/s/arena-active/: the synthetic arena of 12 systems x 200
    prompts, its judge as the metric, rounds of 20, budget 20,000), planned before any
    judgement through the planner page: the job replays the active design from the study's
    initial order at its confidence and resolution (not every pair), and the page shows the
    judgements at each budget and what the design states about the order."""
    slug, name, spec, study_settings = next(demo for demo in RANKING_DEMOS if demo[0] == "arena-active")
    path = tmp_path / "arena.jsonl.gz"
    write_bundle(make_arena(spec), path, human=False, study_settings={"name": name})
    study = study_import(source=path, slug=slug, metric="judge_score", study_settings=study_settings)
    owner = User.objects.create_superuser("active-planner", password="pw-active-plan-1")
    client = Client()
    client.force_login(owner)
    page = client.get(f"/s/{slug}/plan/").content.decode()
    assert "data-plan-active" in page and "replays it from the study's initial order" in page
    assert 'name="budgets" value="20000"' in page and 'value="paper"' not in page
    response = client.post(f"/s/{slug}/plan/", planner_form_data(policy="adaptive", budgets="500, all", batches="20"))
    job = PlanJob.objects.get()
    assert response.status_code == 302 and job.status == PlanJob.Status.DONE, job.error
    assert job.params["design"] == "active" and job.params["start"] == study.ranking_order
    assert job.params["active"] == {"confidence": 0.95, "resolution": 0.05, "max_labels": 0}
    short, whole = job.result["plans"]
    comparisons = spec.systems * (spec.systems - 1) // 2 * spec.prompts
    assert (short["budget"], whole["budget"]) == (500, comparisons)
    assert short["expected_annotations"] == 500 and short["order"]["complete"] == 0
    # without a budget the design runs to its stop, on a fraction of all pairs' judgements
    assert whole["order"]["complete"] == 1 and 500 < whole["expected_annotations"] < 0.5 * comparisons
    assert whole["order"]["neighbours"] == spec.systems - 1
    assert short["order"]["resolved"] <= whole["order"]["resolved"]
    # the same plan computed directly: the job passed the study's labels, order and settings on
    bundle = read_bundle(path)
    direct = plan(metric_labels(bundle, "judge_score"), {}, grid=[GridPoint(500, 20, 0.05), GridPoint(None, 20, 0.05)],
                  reps=1, assumptions=Assumptions.from_dict(job.params["assumptions"]), seed=study.protocol_seed,
                  design="active", start=study.ranking_order, active=study.active_settings)
    assert [p["expected_annotations"] for p in job.result["plans"]] == [p.expected_annotations for p in direct.plans]
    assert [p["order"] for p in job.result["plans"]] == [dict(p.order) for p in direct.plans]
    html = client.get(f"/s/{slug}/plan/{job.pk}/").content.decode()
    assert "Active ranking design · budgets 500, all" in html
    assert 'id="plan-order"' in html and "The order it states" in html and "reached its stop" in html
