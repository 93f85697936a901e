import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from protocol.bundle import read_bundle, write_bundle_rows
from protocol.plan import (
    DEFAULT_ASSUMPTIONS, Assumptions, GridPoint, fit_assumptions, grid_of, hours_to_finish, human_table, item_kinds,
    main, metric_order, metric_spread, pair_margins, plan, simulated_human_labels, solve_offsets, spread_from_margins,
    strength_gaps, with_kinds,
)
from protocol.preferences import human_labels, metric_labels
from protocol.simulate import replay
from tests.builders.bundles import BUNDLES


def assumptions(metric_error=0.3, tie_rate=0.2, spread=0.9, kinds=0, kind_sd=0.0, **ranges):
    return Assumptions(metric_error=metric_error, tie_rate=tie_rate, spread=spread,
                       metric_error_range=ranges.get("metric_error_range", (metric_error, metric_error)),
                       tie_rate_range=ranges.get("tie_rate_range", (tie_rate, tie_rate)),
                       spread_range=ranges.get("spread_range", (spread, spread)),
                       kinds=kinds, kind_sd=kind_sd, kind_sd_range=ranges.get("kind_sd_range", (kind_sd, kind_sd)))


def labels(values, prefix="i"):
    values = np.asarray(values, dtype=np.int64)
    return np.array([f"{prefix}{k}" for k in range(len(values))]), values


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=3, max_size=3).filter(lambda c: sum(c) > 0),
       st.floats(0.02, 0.98), st.floats(0, 5))
def test_solve_offsets_meets_its_target(counts, target, beta):
    alpha = solve_offsets(np.array(counts), np.array(target), beta)
    f = np.array([1.0, 0.0, -1.0])
    mean = np.sum(np.array(counts) * expit(alpha + beta * f)) / sum(counts)
    assert mean == pytest.approx(target, abs=1e-9)


def test_pair_margins_by_hand_for_two_and_three_systems():
    # S = 2: strengths +-spread * Phi^-1(3/4) = +-0.67449 spread; margin tanh(gap / 2)
    margins = pair_margins(("B", "A"), 1.5)  # B best
    assert margins == {("A", "B"): pytest.approx(-math.tanh(1.5 * 2 * 0.6744897501960817 / 2))}
    # S = 3: quantiles 1/6, 1/2, 5/6 -> -0.96742, 0, 0.96742
    margins = pair_margins(("C", "A", "B"), 2.0)
    z = 0.9674215661017008
    assert margins[("A", "C")] == pytest.approx(-math.tanh(2.0 * z / 2))
    assert margins[("A", "B")] == pytest.approx(math.tanh(2.0 * z / 2))
    assert margins[("B", "C")] == pytest.approx(-math.tanh(2.0 * 2 * z / 2))
    assert pair_margins(("A", "B"), 0.0) == {("A", "B"): 0.0}
    assert sorted(strength_gaps(3)) == pytest.approx([z, z, 2 * z])


def test_metric_order_ranks_systems_by_their_mean_non_tie_margin():
    metric = {("A", "B"): labels([1, 1, -1]), ("A", "C"): labels([-1, -1, 0]), ("B", "C"): labels([-1, 0, 0])}
    # A: (+1/3, -1) -> -1/3; B: (-1/3, -1) -> -2/3; C: (+1, +1) -> +1
    assert metric_order(metric) == ("C", "A", "B")


def test_spread_from_margins_inverts_pair_margins():
    for systems, spread in ((5, 0.4), (8, 0.24), (16, 0.85)):
        margins = pair_margins(tuple(f"s{k:02d}" for k in range(systems)), spread)
        assert spread_from_margins(np.array(list(margins.values())), systems) == pytest.approx(spread, abs=1e-6)
    assert spread_from_margins(np.zeros(3), 3) == 0.0


def test_simulated_humans_follow_the_stated_assumptions():
    # 40,000 items of one pair with a balanced metric: tie share, margin and disagreement are
    # binomial estimates of the assumptions (tolerance 5 standard errors).
    rng = np.random.default_rng(1)
    n = 40_000
    metric_values = rng.choice([1, -1], size=n)
    stated = assumptions(metric_error=0.3, tie_rate=0.25)
    human = simulated_human_labels(metric_values, 0.0, stated, rng)
    assert np.mean(human == 0) == pytest.approx(0.25, abs=5 * math.sqrt(0.25 * 0.75 / n))
    decided = human != 0
    assert np.mean(human[decided] != metric_values[decided]) == pytest.approx(0.3, abs=5 * math.sqrt(0.21 / (0.75 * n)))
    # with a margin of 0.5 the non-tie '+' share is 0.75, whatever the metric says
    human = simulated_human_labels(metric_values, 0.5, stated, rng)
    decided = human != 0
    assert np.mean(human[decided] == 1) == pytest.approx(0.75, abs=5 * math.sqrt(0.1875 / (0.75 * n)))


def test_fit_recovers_the_assumptions_the_labels_were_simulated_from():
    rng = np.random.default_rng(3)
    systems = [f"s{k:02d}" for k in range(10)]
    items = 300
    # a metric with its own noise around a true order, 300 items per pair
    metric = {}
    for i, a in enumerate(systems):
        for b in systems[i + 1:]:
            metric[(a, b)] = labels(np.where(rng.random(items) < expit(0.15 * (int(b[1:]) - int(a[1:]))), 1, -1))
    truth = assumptions(metric_error=0.3, tie_rate=0.2, spread=0.7)
    human = human_table(metric, {}, truth, seed=5)
    fitted = fit_assumptions(metric, human, bootstrap=40)
    assert fitted.source == "human labels"
    assert fitted.tie_rate == pytest.approx(0.2, abs=0.01)
    assert fitted.metric_error == pytest.approx(0.3, abs=0.02)
    assert fitted.spread == pytest.approx(0.7, abs=0.08)
    for name in ("metric_error", "tie_rate", "spread"):
        low, high = getattr(fitted, f"{name}_range")
        assert low <= getattr(fitted, name) <= high and high - low < 0.35


def three_system_tables():
    metric = {("A", "B"): labels([1] * 8), ("A", "C"): labels([1, -1, -1, 1]), ("B", "C"): labels([-1, -1, 1, -1])}
    human = {("A", "B"): labels([1] * 8), ("A", "C"): labels([1, -1, -1, 1]), ("B", "C"): labels([-1] * 4)}
    return metric, human


def test_with_complete_human_labels_the_plan_is_the_replay():
    metric, human = three_system_tables()
    result = plan(metric, human, grid=[GridPoint(None, 2, 0.05)], reps=1,
                  assumptions=assumptions())
    reference = replay(human, metric, batch=2, gamma=0.05, seed=0)
    row = result.plans[0]
    assert result.pairs_with_human_labels == 3
    assert row.expected_annotations == reference.annotations_used
    assert row.expected_fraction == pytest.approx(reference.annotations_used / 16)
    assert row.expected_correct == reference.correct
    assert row.interval == (row.expected_fraction, row.expected_fraction)


def test_without_human_labels_every_scenario_runs_and_the_interval_spans_them():
    metric, _ = three_system_tables()
    seen = []
    stated = assumptions(metric_error_range=(0.2, 0.45), tie_rate_range=(0.05, 0.5), spread_range=(0.3, 2.0))
    result = plan(metric, None, grid=grid_of([None, 6], [2], [0.05]), reps=2, assumptions=stated,
                  progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, 2 * 7 * 2) for k in range(0, 29)]
    assert result.pairs_with_human_labels == 0
    first, capped = result.plans
    assert set(first.scenarios) == {"stated", "metric_error low", "metric_error high", "tie_rate low",
                                    "tie_rate high", "spread low", "spread high"}
    assert first.interval[0] <= min(first.scenarios.values()) <= first.expected_fraction
    assert first.expected_fraction <= max(first.scenarios.values()) <= first.interval[1]
    assert capped.budget == 6 and capped.expected_annotations <= 6


def test_budgets_above_what_the_study_can_spend_are_one_plan_that_says_what_was_asked():
    metric, human = three_system_tables()  # 16 comparisons
    result = plan(metric, human, grid=grid_of([8, 20, 50, None], [2], [0.05]), reps=1, assumptions=assumptions())
    assert [(p.budget, p.asked) for p in result.plans] == [(8, ()), (16, (20, 50))]
    assert result.plans[1].summary(details=True)["asked"] == [20, 50]


def test_the_defaults_are_used_without_human_labels_and_fitted_with_them():
    metric, human = three_system_tables()
    assert plan(metric, {}, grid=[GridPoint(None, 2, 0.05)], reps=1).assumptions == DEFAULT_ASSUMPTIONS
    partial = {key: (items[:3], values[:3]) for key, (items, values) in human.items()}
    fitted = plan(metric, partial, grid=[GridPoint(None, 2, 0.05)], reps=1).assumptions
    assert fitted.source == "human labels"


def test_bad_requests_are_named():
    metric, _ = three_system_tables()
    with pytest.raises(ValueError, match="grid is empty"):
        plan(metric, grid=[])
    with pytest.raises(ValueError, match="metric labels"):
        plan({}, grid=[GridPoint(None, 2, 0.05)])
    with pytest.raises(ValueError, match="reps"):
        plan(metric, grid=[GridPoint(None, 2, 0.05)], reps=0)
    with pytest.raises(ValueError, match="budget"):
        plan(metric, grid=[GridPoint(0, 2, 0.05)])
    with pytest.raises(ValueError, match="metric_error"):
        assumptions(metric_error=0.7)
    with pytest.raises(ValueError, match="must lie in its range"):
        assumptions(spread=1.0, spread_range=(0.2, 0.5))
    with pytest.raises(ValueError, match="lack"):
        Assumptions.from_dict({"metric_error": 0.3})
    with pytest.raises(ValueError, match="throughput"):
        hours_to_finish(10, 0)
    assert hours_to_finish(300, 120) == 2.5


def test_command_line_prints_exactly_the_contract(tmp_path, capsys):
    rows = [{"kind": "study", "name": "tiny"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"x{n}"} for n in range(12)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": s} for n in range(12) for s in "ABC"]
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": s, "metric": "m", "score": v + 0.1 * (n % 3)}
             for n in range(12) for s, v in zip("ABC", (0.9, 0.5, 0.1))]
    path = tmp_path / "tiny.jsonl"
    write_bundle_rows(rows, path)
    assert main([str(path), "--metric", "m", "--budget", "20", "--batch", "4", "--gamma", "0.05", "--reps", "1",
                 "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"assumptions", "plans"}
    assert out["assumptions"]["source"] == "defaults"
    (row,) = out["plans"]
    assert set(row) == {"budget", "batch", "gamma", "expected_annotations", "expected_fraction", "expected_correct",
                        "interval"}
    assert (row["budget"], row["batch"], row["gamma"]) == (20, 4, 0.05)
    assert row["expected_fraction"] == pytest.approx(row["expected_annotations"] / 36)
    assert row["interval"][0] <= row["expected_fraction"] <= row["interval"][1]
    assert main([str(path), "--metric", "nope", "--json", "--quiet"]) == 2
    assert "no metric 'nope'" in capsys.readouterr().err


def test_metric_spread_reads_the_metrics_own_margins():
    metric = {("A", "B"): labels([1, 1, 1, -1]), ("A", "C"): labels([1, 1, 1, 1]), ("B", "C"): labels([1, 1, -1, -1])}
    # |margins| 0.5, 1, 0 -> median 0.5; S = 3 gaps z, z, 2z -> median gap z: tanh(s z / 2) = 0.5
    assert metric_spread(metric) == pytest.approx(2 * math.atanh(0.5) / 0.9674215661017008, abs=1e-6)


@pytest.mark.slow
def test_defaults_are_what_the_repository_data_gives():
    """DEFAULT_ASSUMPTIONS = scripts/report/planner_defaults.py on data/bundles (rounded to 3 decimals)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("planner_defaults", BUNDLES.parents[1] / "scripts" / "report" / "planner_defaults.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    summary = module.defaults(module.fits())
    for name in ("metric_error", "tie_rate", "spread"):
        assert getattr(DEFAULT_ASSUMPTIONS, name) == pytest.approx(summary[name]["value"], abs=5e-4)
        assert getattr(DEFAULT_ASSUMPTIONS, f"{name}_range") == pytest.approx(tuple(summary[name]["range"]), abs=5e-4)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["summeval_relevance:bert_score_f", "summeval_coherence:bert_score_f", "pandalm:gpt35"])
def test_planner_without_human_labels_predicts_the_replay_on_the_real_ones(case):
    """Every human label removed, the planner's expected fraction (defaults, 2 repetitions per
    scenario) is within 20 % of protocol.simulate's fraction on the real labels (mean of 3
    seeds; paper policy, batch 10, gamma 0.05), which lies inside the planner's interval.
    docs/results.md ("Planner accuracy") lists these and the cases where it fails (WMT)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("planner_accuracy", BUNDLES.parents[1] / "scripts" / "report" / "planner_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    measured = module.measure(case, reps=2, seeds=3)
    assert abs(measured["relative_error"]) <= 0.20, measured
    assert measured["interval"][0] <= measured["real_fraction"] <= measured["interval"][1], measured


# ---- the ranking design's replay (docs/planner.md, "Ranking studies") ------------------------

def _arena_tables(systems=8, prompts=300, gap=1.0, seed=3):
    from protocol.arena import ArenaSpec, make_arena

    arena = make_arena(ArenaSpec(systems=systems, prompts=prompts, gap=gap, seed=seed))
    items = np.array([f"t{n}" for n in range(prompts)])
    human, metric = {}, {}
    for i in range(systems):
        for j in range(i + 1, systems):
            human[arena.names[i], arena.names[j]] = (items, arena.human(i, j))
            metric[arena.names[i], arena.names[j]] = (items, arena.metric_labels(i, j))
    return arena, human, metric


def test_the_ranking_replay_from_the_true_order_runs_the_neighbours_and_orders_rightly():
    """Systems started in their true order: the boundary-first merge sort compares exactly the
    k - 1 neighbours, and what its partial order orders (decided neighbours and their chains;
    some neighbours here are near ties) it orders rightly."""
    from protocol.plan import replay_ranking
    from protocol.ranking_design import RankingSettings

    arena, human, metric = _arena_tables()
    start = [arena.names[s] for s in arena.true_order]
    result = replay_ranking(human, metric, start=start, settings=RankingSettings(seed=1))
    assert result.runs == len(start) - 1
    assert result.inversion == 0 and result.insertion == 0
    assert result.correct > 0 and result.correct + result.omission == pytest.approx(1.0)
    assert 0 < result.annotations_used <= (len(start) - 1) * 300


def test_the_ranking_replay_does_not_depend_on_how_each_pair_is_keyed():
    """Keying a pair (second, first) with its labels negated is the same pair."""
    from protocol.plan import replay_ranking
    from protocol.ranking_design import RankingSettings

    arena, human, metric = _arena_tables(gap=0.3, seed=5)
    flipped_human = {(b, a): (items, -values) for (a, b), (items, values) in human.items()}
    flipped_metric = {(b, a): (items, -values) for (a, b), (items, values) in metric.items()}
    start = metric_order(metric)
    settings = RankingSettings(seed=2, max_labels=120)
    one = replay_ranking(human, metric, start=start, settings=settings)
    other = replay_ranking(flipped_human, flipped_metric, start=start, settings=settings)
    assert (one.annotations_used, one.runs) == (other.annotations_used, other.runs)
    assert (one.correct, one.inversion, one.omission) == pytest.approx((other.correct, other.inversion, other.omission))


def test_a_ranking_plan_replays_its_pair_runs_at_the_futility_level_the_study_gives_pairs_up_at():
    """The app's merge sort runs its pairs on the study's protocol settings, futility level
    included; the plan replays the sort at that level (it replayed the default whatever the
    study's), side by side when the grid names several."""
    from protocol.plan import replay_ranking
    from protocol.ranking_design import RankingSettings

    arena, human, metric = _arena_tables(systems=6, prompts=200, gap=0.3)
    start = metric_order(metric)
    result = plan(metric, human, grid=grid_of([None], [10], [0.05], [None, 0.3]), reps=1, design="ranking",
                  start=start, futility=0.1)
    for row in result.plans:
        reference = replay_ranking(human, metric, start=start, settings=RankingSettings(
            batch=10, max_labels=200, seed=0, futility=row.futility))
        assert (row.expected_annotations, row.expected_correct) == (reference.annotations_used, reference.correct)
    studys, eager = result.plans
    assert (studys.futility, eager.futility) == (0.1, 0.3)
    assert eager.expected_annotations < studys.expected_annotations
    with pytest.raises(ValueError, match="futility"):
        RankingSettings(futility=1.5)


def test_a_ranking_plan_is_named_its_errors_and_caps_each_comparison():
    from protocol.plan import replay_ranking
    from protocol.ranking_design import RankingSettings, planned_decisions

    arena, human, metric = _arena_tables(systems=6, prompts=200, gap=0.3)
    with pytest.raises(ValueError, match="each of the 6 systems once"):
        replay_ranking(human, metric, start=arena.names[:5], settings=RankingSettings())
    with pytest.raises(ValueError, match="adaptive policy with the e-process rule"):
        plan(metric, human, grid=[GridPoint(None, 10, 0.05)], design="ranking", policy="paper")
    with pytest.raises(ValueError, match="design must be one of"):
        plan(metric, human, grid=[GridPoint(None, 10, 0.05)], design="sort")
    result = plan(metric, human, grid=[GridPoint(40, 10, 0.05), GridPoint(None, 10, 0.05)], reps=1, design="ranking")
    capped, whole = result.plans
    assert (capped.budget, whole.budget) == (40, 200)
    assert capped.expected_annotations <= planned_decisions(6) * 40
    assert capped.expected_annotations <= whole.expected_annotations < 15 * 200


# ---- the active design's replay (docs/planner.md, "Active studies") ---------------------------

def test_the_active_replay_from_the_true_order_resolves_its_neighbours_and_states_them_rightly():
    """Systems started in their true order on a known arena: the design runs to its stop (no
    neighbour open), spends far fewer labels than all pairs, what it resolves the full human fit
    does not reverse beyond the resolution, its order is the full fit's or nearly, and the few
    pairs its e-processes decide (at γ / C(k)) are decided rightly. The same seed replays the
    same run."""
    from protocol.active_ranking import ActiveSettings
    from protocol.plan import full_fit_scores, replay_active

    arena, human, metric = _arena_tables(prompts=200, gap=0.6)
    start = [arena.names[s] for s in arena.true_order]
    settings = ActiveSettings(batch=20)
    result = replay_active(human, metric, start=start, settings=settings, seed=1)
    assert result.complete and result.neighbours == len(start) - 1
    assert result.ordered <= result.resolved <= result.neighbours and result.resolved >= 3
    assert result.runs >= result.neighbours and result.annotations_used < 0.4 * len(human) * 200
    assert result.resolved_wrong == 0 and result.ordered_wrong == 0 and result.tau > 0.8
    assert 0 < result.expected_misordered < result.neighbours
    assert result.inversion == 0 and result.insertion == 0 and result.correct > 0
    assert result == replay_active(human, metric, start=start, settings=settings, seed=1)
    # the full fit the order is scored against orders this arena's systems as the truth does
    full = full_fit_scores(human, start)
    assert list(np.argsort(-full)[:3]) == [0, 1, 2]


def test_the_active_replay_does_not_depend_on_how_each_pair_is_keyed():
    from protocol.active_ranking import ActiveSettings
    from protocol.plan import replay_active

    arena, human, metric = _arena_tables(systems=6, prompts=150, gap=0.4, seed=5)
    flipped_human = {(b, a): (items, -values) for (a, b), (items, values) in human.items()}
    flipped_metric = {(b, a): (items, -values) for (a, b), (items, values) in metric.items()}
    start = metric_order(metric)
    settings = ActiveSettings(batch=15, max_labels=90)
    one = replay_active(human, metric, start=start, settings=settings, seed=2)
    other = replay_active(flipped_human, flipped_metric, start=start, settings=settings, seed=2)
    assert one == other


def test_an_active_plan_draws_the_budget_curve_and_states_the_order():
    """A grid point's budget is the most labels in all: below what the design needs it spends
    all of it and stops short (no replay reaches its stop); without one it runs to its stop,
    and resolves more neighbours. Deterministic for a seed; refused with another policy."""
    arena, human, metric = _arena_tables(systems=6, prompts=200, gap=0.6)
    with pytest.raises(ValueError, match="active design runs the adaptive policy with the e-process rule"):
        plan(metric, {}, grid=[GridPoint(None, 20, 0.05)], design="active", policy="paper")
    with pytest.raises(ValueError, match="the active design's start must name each of the 6 systems once"):
        plan(metric, {}, grid=[GridPoint(None, 20, 0.05)], design="active", start=arena.names[:5])
    grid = [GridPoint(100, 20, 0.05), GridPoint(None, 20, 0.05)]
    result = plan(metric, {}, grid=grid, reps=2, design="active", seed=3)
    short, whole = result.plans
    assert short.expected_annotations == 100 and short.order["complete"] == 0
    assert whole.budget == whole.comparisons == 15 * 200 and whole.order["complete"] == 1
    assert 100 < whole.expected_annotations < 0.5 * whole.comparisons
    assert whole.interval[0] <= whole.expected_fraction <= whole.interval[1]
    assert short.order["resolved"] <= whole.order["resolved"] <= whole.order["neighbours"] == 5
    assert 0 <= whole.order["resolved_wrong_share"] <= 0.2 and -1 <= whole.order["tau"] <= 1
    assert set(whole.summary(details=True)["order"]) == set(whole.order)
    assert "order" not in whole.summary()  # the command line's contract keeps its keys
    again = plan(metric, {}, grid=grid, reps=2, design="active", seed=3)
    assert [p.summary(details=True) for p in again.plans] == [p.summary(details=True) for p in result.plans]


def test_a_plan_replays_the_studys_futility_levels_and_combined_metrics():
    """Issue 38: a study's futility level and combined metrics are part of its protocol, so the
    plan replays them (each grid point at its futility level, the further metrics combined with
    the metric through the cross-fitted calibration): on PandaLM, whose pairs all have complete
    human labels, each plan is the replay with those settings, and the higher level spends fewer
    labels."""
    bundle = read_bundle(BUNDLES / "pandalm.jsonl.gz")
    human, gpt35, pandalm7b = (human_labels(bundle), metric_labels(bundle, "gpt35"),
                               metric_labels(bundle, "pandalm7b"))
    result = plan(gpt35, human, grid=grid_of([None], [10], [0.05], [0.05, 0.15]), reps=1,
                  extra_metrics=[pandalm7b])
    for row in result.plans:
        reference = replay(human, gpt35, batch=10, gamma=0.05, seed=0, futility=row.futility,
                           extra_metrics=[pandalm7b])
        assert (row.expected_annotations, row.expected_correct) == (reference.annotations_used, reference.correct)
        assert row.summary(details=True)["futility"] == row.futility
    default, eager = result.plans
    assert (default.futility, eager.futility) == (0.05, 0.15)
    assert eager.expected_annotations < default.expected_annotations
    alone = replay(human, gpt35, batch=10, gamma=0.05, seed=0)
    assert default.expected_annotations != alone.annotations_used  # the combination was replayed
    with pytest.raises(ValueError, match="all-pairs design"):
        plan(gpt35, human, grid=grid_of([None], [10], [0.05]), extra_metrics=[pandalm7b], design="ranking")
    with pytest.raises(ValueError, match="all-pairs or the ranking design"):
        plan(gpt35, human, grid=grid_of([None], [10], [0.05], [0.15]), design="active")


def test_kinds_of_prompt_move_each_simulated_label_by_the_two_systems_effects_on_its_kind():
    """The planner's kinds of prompt (protocol.plan's module doc): 8,000 items dealt to 4 kinds
    of 2,000; with no metric signal (metric error 0.5), no ties and no spread, a pair's share
    of '+' labels on kind k is sigmoid(effect_a,k - effect_b,k), each effect drawn N(0, 1) per
    rep (tolerance 5 binomial standard errors on the logit); without kinds every share is 1/2."""
    from scipy.special import logit

    rng = np.random.default_rng(4)
    items = np.array([f"p{n}" for n in range(8000)])
    metric = {pair: (items, rng.choice([1, -1], size=len(items))) for pair in (("A", "B"), ("A", "C"), ("B", "C"))}
    stated = assumptions(metric_error=0.5, tie_rate=0.0, spread=0.0, kinds=4, kind_sd=1.0)
    kinds = item_kinds(metric, stated)
    assert sorted(np.bincount(list(kinds.values())).tolist()) == [2000] * 4
    table = human_table(metric, {}, stated, seed=7, kinds=kinds)
    effect = dict(zip("ABC", 1.0 * np.random.default_rng([7, 13]).standard_normal((3, 4))))
    kind = np.array([kinds[item] for item in items])
    moved = []
    for (a, b), (_, values) in table.items():
        for k in range(4):
            share = np.mean(values[kind == k] == 1)
            se = 1 / math.sqrt(2000 * share * (1 - share))
            assert logit(share) == pytest.approx(effect[a][k] - effect[b][k], abs=5 * se), (a, b, k)
            moved.append(abs(effect[a][k] - effect[b][k]))
    assert max(moved) > 1  # the effects are large here, so the check has teeth
    # the same prompts without kinds: every share is a half
    for _, values in human_table(metric, {}, with_kinds(stated, DEFAULT_ASSUMPTIONS), seed=7).values():
        for k in range(4):
            assert np.mean(values[kind == k] == 1) == pytest.approx(0.5, abs=5 * math.sqrt(0.25 / 2000))


def test_the_kinds_of_prompt_are_an_assumption_with_a_range_kept_through_a_dict():
    """kinds and kind_sd go through to_dict / from_dict (a plan stored before them has none);
    the interval moves kind_sd to its ends only when there are kinds; fitted assumptions take
    the stated kinds (``with_kinds``); bad values are named."""
    stated = assumptions(kinds=10, kind_sd=0.5, kind_sd_range=(0.25, 1.0))
    assert Assumptions.from_dict(stated.to_dict()) == stated
    old = {k: v for k, v in stated.to_dict().items() if not k.startswith("kind")}
    assert Assumptions.from_dict(old).kinds == 0 and Assumptions.from_dict(old).kind_sd == 0
    assert [name for name, _ in stated.scenarios()][-2:] == ["kind_sd low", "kind_sd high"]
    assert not any(name.startswith("kind") for name, _ in assumptions(kind_sd=0.5, kind_sd_range=(0, 1)).scenarios())
    fitted = with_kinds(DEFAULT_ASSUMPTIONS, stated)
    assert (fitted.kinds, fitted.kind_sd, fitted.kind_sd_range, fitted.spread) == (10, 0.5, (0.25, 1.0),
                                                                                  DEFAULT_ASSUMPTIONS.spread)
    with pytest.raises(ValueError, match="kinds must be a whole number"):
        assumptions(kinds=-1)
    with pytest.raises(ValueError, match="kind_sd must be a number in"):
        assumptions(kinds=2, kind_sd=9.0)


def test_an_active_plan_tells_the_design_the_studys_kinds_and_hides_stated_ones(monkeypatch):
    """The active design's replay is told the study's own kinds (its items' prompt_kind: a
    pair's items take turns over them, the fit by kind), as the app runs it; kinds stated for
    a study without them change the simulated labels but stay hidden from the design."""
    import protocol.plan as plan_module

    told = []
    real_run = plan_module.active_run

    def spy(*args, **kwargs):
        told.append(kwargs.get("kinds"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(plan_module, "active_run", spy)
    _, _, metric = _arena_tables(systems=5, prompts=120, gap=0.6)
    grid = [GridPoint(None, 20, 0.05)]
    own = {f"t{n}": "abc"[n % 3] for n in range(120)}
    result = plan(metric, {}, grid=grid, reps=1, design="active", seed=2, kinds=own,
                  kinds_axis=assumptions(kinds=7, kind_sd=0.5))
    assert result.assumptions.kinds == 3 and result.assumptions.kind_sd == 0.5  # the study's number of kinds
    assert told and all(k is not None and k.tolist() == [n % 3 for n in range(120)] for k in told)
    told.clear()
    hidden = plan(metric, {}, grid=grid, reps=1, design="active", seed=2, kinds_axis=assumptions(kinds=4, kind_sd=0.5))
    assert hidden.assumptions.kinds == 4 and told and all(k is None for k in told)
    blind = plan(metric, {}, grid=grid, reps=1, design="active", seed=2)
    assert hidden.plans[0].expected_annotations != blind.plans[0].expected_annotations  # the labels moved


def test_the_command_line_plans_kinds_of_prompt(tmp_path, capsys):
    """--kinds and --kind-sd SD [LOW HIGH]: the assumptions carry them, the interval's scenarios
    move the effect to its ends; a malformed --kind-sd is named."""
    rows = [{"kind": "study", "name": "kinds"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"x{n}"} for n in range(40)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": s} for n in range(40) for s in "ABCD"]
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": s, "metric": "m", "score": v + 0.1 * (n % 3)}
             for n in range(40) for s, v in zip("ABCD", (0.9, 0.6, 0.3, 0.1))]
    path = tmp_path / "kinds.jsonl"
    write_bundle_rows(rows, path)
    assert main([str(path), "--metric", "m", "--design", "active", "--batch", "10", "--reps", "1", "--kinds", "4",
                 "--kind-sd", "0.5", "0.25", "1", "--json", "--details", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    a = out["assumptions"]
    assert (a["kinds"], a["kind_sd"], a["kind_sd_range"]) == (4, 0.5, [0.25, 1.0])
    assert {"kind_sd low", "kind_sd high"} <= set(out["plans"][0]["scenarios"])
    assert main([str(path), "--metric", "m", "--kind-sd", "0.5", "1", "--quiet"]) == 2
    assert "--kind-sd takes SD or SD LOW HIGH" in capsys.readouterr().err
