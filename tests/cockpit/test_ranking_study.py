"""The ranking design in the app (issue 22, docs/ranking.md): a study of many systems spends
human labels only on the pairs a merge sort asks for, each decided at γ / C(k), and shows the
ranking with its tiers and its error statement.

Driven through the app's own paths: import, serving (hit_next_for_annotator), submits, the
round closes, an exclusion's re-decision, the dashboard and the pair matrix."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from annotation.models import Assignment, PairState, PlanJob, Study
from annotation.reports import study_dashboard_refresh
from annotation.selectors.dashboard import study_ranking
from annotation.serving import protocol_state
from annotation.services.studies import study_import
from annotation.services.planner import plan_job_create
from protocol.bundle import BundleError, read_bundle
from protocol.plan import DEFAULT_ASSUMPTIONS, Assumptions, GridPoint, plan
from protocol.preferences import metric_labels
from protocol.ranking_design import planned_decisions
from tests.builders.annotating import answer_hits, answer_null_with_an_exclusion, workers_of
from tests.builders.bundles import RANKING_SETTINGS, RANKING_SYSTEMS, bundle_bytes, ranking_rows, ranking_truth
from tests.builders.clients import planner_form_data

pytestmark = pytest.mark.django_db(transaction=True)

K = len(RANKING_SYSTEMS)
SYSTEMS = RANKING_SYSTEMS
RANKING = RANKING_SETTINGS


def served_pairs(study: Study) -> set[tuple[str, str]]:
    return set(Assignment.objects.filter(comparison__study=study).values_list(
        "comparison__first__name", "comparison__second__name"))


@pytest.mark.parametrize("metric", [False, True])
def test_a_ranking_study_serves_only_the_sorts_pairs_and_finds_the_true_order(metric):
    study = study_import(source=bundle_bytes(ranking_rows(metric=metric)), slug=f"rank-{int(metric)}")
    assert study.pair_design == "ranking" and sorted(study.ranking_order) == SYSTEMS
    if metric:  # the metric's order starts the sort: here it is the truth
        assert study.ranking_order == SYSTEMS[::-1]
    settings = protocol_state.protocol_settings(study)
    assert settings.gamma == pytest.approx(0.05 / planned_decisions(K)) and settings.family == "none"
    parked = PairState.objects.filter(study=study, status="parked").count()
    assert 0 < parked < K * (K - 1) // 2

    made = answer_hits(study, workers_of(["w1", "w2", "w3"]), lambda a, b, _: ranking_truth(a, b))
    study.refresh_from_db()
    ranking = study_ranking(study=study)
    assert ranking["complete"] and ranking["order"] == SYSTEMS[::-1]
    assert [tier for tier in ranking["tiers"]] == [[s] for s in SYSTEMS[::-1]]
    asked = {(p.first.name, p.second.name) for p in PairState.objects.filter(study=study).exclude(status="parked")}
    assert served_pairs(study) == asked, "a parked pair was served"
    assert len(asked) == ranking["runs"] <= planned_decisions(K) < K * (K - 1) // 2
    if metric:  # an ordered start: each merge compares only its halves' boundary, the k - 1 neighbours
        assert len(asked) == K - 1
    assert made == ranking["labels"]
    # every pair the sort did not run is implied by transitivity, in the truth's direction
    for first, second, decision in ranking["decisions"]:
        assert decision == ranking_truth(first, second)


@pytest.mark.parametrize("metric", [False, True])
def test_on_a_null_no_pair_of_the_ranking_is_decided_through_serving_and_an_exclusion(metric):
    """Every system equal: any decision is false. Each pair's judgements alternate +1 / -1 in
    the order they are served (a null whose evidence never accumulates, deterministic whatever
    items the app draws), one of three workers is excluded half-way (the re-decision path
    rebuilds the pairs from the others' judgements, which then need not alternate). The sort
    completes within its C(k) planned runs, decides nothing and ties every system. (The level
    γ / C(k) itself: test_a_ranking_study_serves_only_the_sorts_pairs...; the false-decision
    rate on coin-flip nulls: tests/protocol/test_ranking_design.py's null replay.)"""
    # with the metric: the sort starts from its order (merges that find their halves in order by
    # the margin skip the rest) and every pair's e-process bets on a judge that is sure of an order
    # the humans do not share
    study = study_import(source=bundle_bytes(ranking_rows(items=40, metric=metric)), slug=f"null-{int(metric)}")
    answer_null_with_an_exclusion(study, exclude_after=120)
    assert study.protocol_redecide_done == study.protocol_redecide_requested == 1
    ranking = study_ranking(study=study)
    assert ranking["complete"] and ranking["runs"] <= planned_decisions(K) and ranking["bound"] <= 0.05 + 1e-12
    assert not PairState.objects.filter(study=study).exclude(decision=0).exists()
    assert ranking["tiers"] == [ranking["order"]] and ranking["decided"] == ranking["implied"] == 0
    asked = {(p.first.name, p.second.name) for p in PairState.objects.filter(study=study).exclude(status="parked")}
    assert served_pairs(study) == asked


def test_the_dashboard_and_the_pair_matrix_show_the_ranking():
    owner = User.objects.create_user("ranker", password="pw-ranker-123")
    study = study_import(source=bundle_bytes(ranking_rows(metric=True)), slug="shown", created_by=owner)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert "Ranking design" in page and "sorting" in page
    assert "any wrong pair in its order" in page and f"0.05 / {planned_decisions(K)}" in page
    answer_hits(study, workers_of(["w1"]), lambda a, b, _: ranking_truth(a, b))
    study_dashboard_refresh(study_id=study.pk)
    page = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert "ranking complete" in page
    assert page.index(">s5<") < page.index(">s4<") < page.index(">s0<")
    assert "not run (implied or not needed)" in page


def test_the_ranking_design_refuses_settings_it_cannot_keep_its_statement_with():
    with pytest.raises(BundleError, match="study setting 'family_control': the ranking design needs family "
                                          "control 'none'"):
        study_import(source=bundle_bytes(ranking_rows(family_control="ebh")), slug="bad-family")
    with pytest.raises(BundleError, match="study setting 'protocol_rule': the ranking design needs the e-process"):
        study_import(source=bundle_bytes(ranking_rows(protocol_rule="bayes")), slug="bad-rule")
    judged = ranking_rows() + [{"kind": "human_preference", "item": "i00", "first": "s0", "second": "s1",
                                "preference": -1, "annotator": "x"}]
    with pytest.raises(BundleError, match="the ranking design starts with no human judgements"):
        study_import(source=bundle_bytes(judged), slug="judged")
    assert not Study.objects.filter(slug__in=["bad-family", "bad-rule", "judged"]).exists()
    study = study_import(source=bundle_bytes(ranking_rows()), slug="fixed-design")
    study.pair_design = "all_pairs"
    with pytest.raises(ValidationError, match="fixed once the protocol has started"):
        study.full_clean()


def test_a_draft_can_choose_the_ranking_design_and_launch_it():
    owner = User.objects.create_user("drafter", password="pw-drafter-123")
    rows = [{k: v for k, v in ranking_rows()[0].items() if k not in RANKING}, *ranking_rows()[1:]]
    study = study_import(source=bundle_bytes(rows), slug="dr", start=False, created_by=owner)
    assert study.status == "draft" and study.pair_design != "ranking"
    client = Client()
    client.force_login(owner)
    draft = {"action": "draft", "metric": "none", "gamma": "0.05", "batch_size": "10", "budget": "500",
             "ratings_per_item": "1", "allocation_policy": "adaptive", "item_choice": "uniform",
             "protocol_rule": "eprocess", "family_control": "ebh", "pair_design": "ranking"}
    response = client.post("/s/dr/settings/", draft)
    assert response.status_code == 400 and "needs family control" in response.content.decode()
    assert client.post("/s/dr/settings/", {**draft, "family_control": "none", "ranking_max_labels": "25"}).status_code == 302
    assert client.post("/s/dr/settings/", {"action": "launch"}).status_code == 302
    study.refresh_from_db()
    assert study.pair_design == "ranking" and study.status == "running" and sorted(study.ranking_order) == SYSTEMS
    assert study.ranking_max_labels == 25 and PairState.objects.filter(study=study, status="open").exists()
    assert PairState.objects.filter(study=study, status="parked").exists()
    page = client.get("/s/dr/settings/").content.decode()
    assert "Ranking (a merge sort decides only the pairs it needs)" in page and f"each pair at γ / {planned_decisions(K)}" in page
    # the family line names what controls the error across pairs, not "None (each pair on its own)"
    assert "None (each pair on its own)" not in page
    assert "the ranking design — across the ranking: any wrong pair" in page


def test_labels_per_comparison_is_the_rankings_resolution_through_the_app():
    """``ranking_max_labels`` caps every comparison the sort runs (docs/ranking-results.md, "Ordering at
    matched labels"): no served pair takes more judgements, a pair undecided by then is a tie,
    and the sort still completes within C(k) runs. Refused with the all-pairs design."""
    study = study_import(source=bundle_bytes(ranking_rows(ranking_max_labels=4)), slug="rank-cap")
    assert study.ranking_max_labels == 4
    assert {p.capacity for p in protocol_state.study_state_load(study, PairState.objects.filter(study=study)).pairs} == {4}
    answer_hits(study, workers_of(["w1", "w2", "w3", "w4", "w5"]), lambda a, b, _: ranking_truth(a, b))
    study.refresh_from_db()
    judged = [p.judgements for p in protocol_state.study_state_load(study, PairState.objects.filter(study=study)).pairs if p.status != "parked"]
    assert judged and max(judged) == 4  # truthful labels, but 4 of them never reach 1 / (γ / C(k))
    ranking = study_ranking(study=study)
    assert ranking["complete"] and ranking["runs"] <= planned_decisions(K)
    assert len(ranking["tiers"]) == 1  # nothing separated at this resolution
    owner = User.objects.create_superuser("capper", password="pw-capper-123")
    client = Client()
    client.force_login(owner)
    assert "each comparison at most 4 judgements" in client.get("/s/rank-cap/settings/").content.decode()
    study_dashboard_refresh(study_id=study.pk)
    assert "with at most 4 judgements (the resolution" in client.get("/s/rank-cap/dashboard/").content.decode()
    with pytest.raises(BundleError, match="ranking_max_labels"):
        study_import(source=bundle_bytes(ranking_rows(pair_design="all_pairs", family_control="ebh",
                                                      ranking_max_labels=4)), slug="all-cap")


def test_the_planner_of_a_ranking_study_replays_its_sort_with_labels_per_comparison():
    """The planner plans what the study runs: the sort from the study's initial order, capped
    per comparison, not every pair under a budget."""
    study = study_import(source=bundle_bytes(ranking_rows(metric=True, ranking_max_labels=20)), slug="rank-plan")
    owner = User.objects.create_superuser("planner", password="pw-planner-123")
    client = Client()
    client.force_login(owner)
    page = client.get(f"/s/{study.slug}/plan/").content.decode()
    assert "data-plan-ranking" in page and "replays its merge sort" in page and "best case" in page
    assert "Labels per comparison" in page and 'name="budgets" value="20"' in page
    assert "combination of the labels per comparison, batch sizes" in page and "the budgets," not in page
    assert 'value="paper"' not in page  # the design runs the adaptive policy only
    refused = client.post(f"/s/{study.slug}/plan/", planner_form_data(policy="paper"))
    assert refused.status_code == 400 and PlanJob.objects.count() == 0
    response = client.post(f"/s/{study.slug}/plan/", planner_form_data(policy="adaptive", budgets="20, all"))
    job = PlanJob.objects.get()
    assert response.status_code == 302 and job.status == PlanJob.Status.DONE, job.error
    assert job.params["design"] == "ranking" and job.params["start"] == study.ranking_order
    capped, whole = job.result["plans"]
    assert (capped["budget"], whole["budget"]) == (20, 30)  # labels per comparison (all = the 30 items)
    # at most C(k) comparisons of at most 20 labels each, fewer than the same sort uncapped
    assert 0 < capped["expected_annotations"] <= planned_decisions(K) * 20
    assert capped["expected_annotations"] < whole["expected_annotations"]
    assert whole["expected_annotations"] < job.result["plans"][1]["comparisons"]
    # the same plan computed directly: the job passed the study's labels and initial order on
    stated = {"metric_error": 0.3, "tie_rate": 0.2, "spread": 0.8, "metric_error_range": [0.2, 0.4],
              "tie_rate_range": [0.1, 0.3], "spread_range": [0.5, 1.2]}
    bundle = read_bundle(bundle_bytes(ranking_rows(metric=True, ranking_max_labels=20)))
    direct = plan(metric_labels(bundle, "judge"), {}, grid=[GridPoint(20, 5, 0.05), GridPoint(None, 5, 0.05)],
                  reps=1, assumptions=Assumptions.from_dict(stated), seed=study.protocol_seed, design="ranking",
                  start=study.ranking_order)
    assert [p["expected_annotations"] for p in job.result["plans"]] == [p.expected_annotations for p in direct.plans]
    with pytest.raises(ValueError, match="adaptive policy"):
        plan_job_create(study=study, user=None, use_human=False, assumptions=DEFAULT_ASSUMPTIONS.to_dict(),
                        budgets=[None], batches=[10], gammas=[0.05], reps=1, policy="paper", throughput=60)
    html = client.get(f"/s/{study.slug}/plan/{job.pk}/").content.decode()
    assert "<th>labels per comparison</th>" in html and "partial order" in html
    assert "Ranking design (the merge sort) · labels per comparison 20, all" in html


def test_the_planner_of_a_ranking_study_replays_its_sort_at_the_studys_futility_level():
    """The sort's pair runs give up at the study's futility level in the app (its protocol
    settings); the planner's replay of the sort did at the default level whatever the study's."""
    rows = ranking_rows(metric=True, futility=0.3)
    study = study_import(source=bundle_bytes(rows), slug="rank-plan-futility")
    assert study.futility == 0.3
    job = plan_job_create(study=study, user=None, use_human=False, assumptions=DEFAULT_ASSUMPTIONS.to_dict(),
                          budgets=[None], batches=[5], gammas=[0.05], reps=1, policy="adaptive", throughput=60)
    job.refresh_from_db()
    assert job.status == PlanJob.Status.DONE, job.error
    assert job.params["futilities"] == [0.3]
    labels = metric_labels(read_bundle(bundle_bytes(rows)), "judge")

    def direct(futility):
        return plan(labels, {}, grid=[GridPoint(None, 5, 0.05)], reps=1, assumptions=DEFAULT_ASSUMPTIONS,
                    seed=study.protocol_seed, design="ranking", start=study.ranking_order, futility=futility)

    (planned,) = job.result["plans"]
    (at_the_study,), (at_the_default,) = direct(0.3).plans, direct(None).plans
    assert planned["expected_annotations"] == at_the_study.expected_annotations
    assert planned["expected_annotations"] < at_the_default.expected_annotations


@pytest.mark.parametrize("design, labels", [("ranking", 0), ("ranking", 7), ("active", 5), ("all_pairs", 0)])
def test_a_study_without_a_budget_gets_what_its_design_can_spend(design, labels):
    """Issue 41: the budget of a ranking study stated in what its design will use. Without one in
    the bundle, every item of every pair stated 39.8 M judgements for a 200-system sort that runs
    1,416 of its 19,900 pairs; now each design's most (its planned pair runs, each at most its
    labels per comparison)."""
    items = 30
    settings = {"pair_design": design, "family_control": "none" if design != "all_pairs" else "ebh",
                "ranking_max_labels": labels}
    rows = ranking_rows(items, **settings)
    del rows[0]["budget"]
    study = study_import(source=bundle_bytes(rows))
    pairs = K * (K - 1) // 2
    per_pair = min(items, labels) if labels else items
    expected = {"ranking": planned_decisions(K) * per_pair, "active": pairs * per_pair, "all_pairs": pairs * items}
    assert study.budget == expected[design]
    if design == "ranking":
        assert study.budget < pairs * items
