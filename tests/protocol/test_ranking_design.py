"""Tests for protocol.ranking_design (the merge-sort ranking design of issue 22) and the
known-truth replay of protocol.arena_replay."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.arena import ArenaSpec, make_arena
from protocol.arena_replay import (
    fitted_order,
    replay_all_pairs,
    replay_neighbours_oracle,
    replay_ranking,
    replay_uniform,
    score,
)
from protocol.ranking_design import (
    PairOutcome,
    RankingSettings,
    closure,
    decide_pair,
    planned_decisions,
    rank,
    ranking_plan,
    sort_plan,
)


def oracle(strength, start):
    """A noiseless comparison of positions i < j of the initial order ``start``: decided when
    the strengths differ, undecided with margin 0 when they are equal; counts its calls."""
    calls = []

    def compare(i, j, stage="sort"):
        calls.append((i, j, stage))
        d = int(np.sign(strength[start[i]] - strength[start[j]]))
        return PairOutcome(decision=d, margin=10 * d, labels=7, status="decided" if d else "futile")

    return compare, calls


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 7])
def test_planned_decisions_is_the_sorts_worst_case(k):
    """Independent reference: the most comparisons the sort asks for over every true order of
    k systems (the initial order fixed), found by running it; the bound is reached."""
    most = 0
    for truth in itertools.permutations(range(k)):
        compare, calls = oracle(np.array(truth, dtype=float), list(range(k)))
        rank([f"m{s}" for s in range(k)], compare, RankingSettings())
        most = max(most, len(calls))
    assert planned_decisions(k) == most


def test_planned_decisions_grows_like_k_log_k():
    # merge sort's worst case k ceil(lg k) - 2^ceil(lg k) + 1 plus at most one boundary per merge
    for k in (8, 16, 30, 50, 64, 100):
        lg = math.ceil(math.log2(k))
        assert k * lg - 2 ** lg + 1 < planned_decisions(k) <= k * lg - 2 ** lg + 1 + k - 1
    assert planned_decisions(50) == 254 < 50 * 49 // 2


@pytest.mark.parametrize("k", [2, 5, 16, 50])
def test_an_initial_order_already_in_order_costs_only_its_neighbours(k):
    """The metric's order is mostly right: each merge first compares its halves' boundary, so
    a start in the true order asks for the k - 1 neighbours and nothing else."""
    compare, calls = oracle(np.arange(k, dtype=float)[::-1], list(range(k)))
    result = rank([f"m{s}" for s in range(k)], compare, RankingSettings())
    assert sorted(calls) == [(i, i + 1, "sort") for i in range(k - 1)]
    assert result.order == tuple(f"m{s}" for s in range(k)) and result.implied == k * (k - 1) // 2


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 24).flatmap(lambda k: st.permutations(range(k))))
def test_noiseless_oracle_gives_the_true_order_within_the_planned_comparisons(start):
    k = len(start)
    strength = np.arange(k, dtype=float)[::-1]          # system 0 best
    compare, calls = oracle(strength, start)
    result = rank([f"m{s}" for s in start], compare, RankingSettings())
    assert result.order == tuple(f"m{s}" for s in range(k))
    assert len(calls) == len(set(calls)) <= planned_decisions(k)
    assert result.implied == k * (k - 1) // 2              # every pair decided or implied
    assert result.tiers == tuple((f"m{s}",) for s in range(k))
    assert result.labels == 7 * len(calls)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=12), st.randoms(use_true_random=False))
def test_equal_systems_form_the_tiers_and_nothing_inside_a_tier_is_decided(groups, rnd):
    strength = np.array(groups, dtype=float)
    start = list(range(len(groups)))
    rnd.shuffle(start)
    compare, _ = oracle(strength, start)
    result = rank([f"m{s}" for s in start], compare, RankingSettings())
    got = [sorted(int(name[1:]) for name in tier) for tier in result.tiers]
    levels = sorted(set(groups), reverse=True)
    assert got == [sorted(s for s in range(len(groups)) if groups[s] == level) for level in levels]
    # a pair across tiers may stay unordered (its systems were never compared and no chain
    # runs through a tie), but no decision is wrong and no pair inside a tier is decided
    for (a, b), d in result.decisions().items():
        truth = int(np.sign(groups[int(a[1:])] - groups[int(b[1:])]))
        assert d in (0, truth) and (truth != 0 or d == 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9).flatmap(lambda k: st.tuples(
    st.permutations(range(k)),
    st.lists(st.sampled_from([-1, 0, 1]), min_size=k * k, max_size=k * k),
    st.lists(st.integers(-5, 5), min_size=k * k, max_size=k * k))))
def test_relabelling_the_systems_permutes_the_result(case):
    """Any outcomes, even intransitive ones: the design looks at positions and outcomes only,
    so renaming the systems renames the order, the tiers and every decision (with its sign
    when the canonical order of the two names flips)."""
    names, decisions, margins = case
    k = len(names)

    asked = []

    def compare(i, j, stage):
        asked.append((i, j))
        return PairOutcome(decision=decisions[i * k + j], margin=margins[i * k + j], labels=1, status="x")

    before = rank([f"s{n}" for n in range(k)], compare, RankingSettings())
    assert len(asked) == len(set(asked)) <= planned_decisions(k)   # whatever the outcomes
    renamed = {f"s{n}": f"t{names[n]}" for n in range(k)}
    after = rank([renamed[f"s{n}"] for n in range(k)], compare, RankingSettings())
    assert after.order == tuple(renamed[x] for x in before.order)
    assert after.tiers == tuple(tuple(renamed[x] for x in tier) for tier in before.tiers)
    assert np.array_equal(after.above, before.above)
    moved = {}
    for (a, b), d in before.decisions().items():
        x, y = renamed[a], renamed[b]
        moved[(x, y) if x < y else (y, x)] = d if x < y else -d
    assert after.decisions() == moved
    # the order respects every decision that does not close a cycle
    place = {name: n for n, name in enumerate(before.order)}
    for i in range(k):
        for j in range(k):
            if before.above[i, j]:
                assert place[before.systems[i]] < place[before.systems[j]]


def test_the_merge_sort_asks_independent_pairs_together():
    assert sort_plan(4, {}).pending == ((0, 1), (2, 3))
    assert sort_plan(8, {}).pending == ((0, 1), (2, 3), (4, 5), (6, 7))
    first = {(0, 1): PairOutcome(1, 3, 5, "decided"), (2, 3): PairOutcome(-1, -3, 5, "decided")}
    assert sort_plan(4, first).pending == ((1, 3),)      # the halves' boundary first
    boundary = {**first, (1, 3): PairOutcome(-1, -3, 5, "decided")}
    assert sort_plan(4, boundary).pending == ((0, 3),)   # out of order: merged from the front


def test_refinement_fixes_the_neighbours_a_capped_sort_got_wrong():
    """The sort stage's capped runs are undecided and point the wrong way for neighbours in
    the truth; the refinement runs (full) decide them, and the order becomes the true one."""
    k = 9
    strength = np.arange(k, dtype=float)[::-1]
    calls, runs = [], {}

    def compare(i, j, stage):
        calls.append(stage)
        runs.setdefault((i, j), []).append(200 if stage == "refine" else 20)
        d = int(np.sign(strength[i] - strength[j]))
        if stage == "sort" and abs(i - j) == 1:
            return PairOutcome(0, -d, 20, "exhausted")      # wrong way, undecided
        return PairOutcome(d, 10 * d, 200 if stage == "refine" else 20, "decided")

    s = RankingSettings(sort_labels=20)
    result = rank([f"m{n}" for n in range(k)], compare, s)
    assert result.order == tuple(f"m{n}" for n in range(k))
    assert result.implied == k * (k - 1) // 2
    assert 0 < calls.count("refine") <= 2 * (k - 1)
    assert result.runs == len(calls) <= s.planned(k)
    # a refined pair reuses its sort-stage labels: it costs its longer run
    assert result.labels == sum(result.spent.values()) == sum(max(costs) for costs in runs.values())
    assert any(len(costs) == 2 for costs in runs.values())
    assert ranking_plan(k, {}, {}, s).stage == "sort"


def test_closure_leaves_out_a_decision_that_closes_a_cycle():
    reach = closure(3, [(0, 1), (1, 2), (2, 0)])
    assert reach[0, 2] and not reach[2, 0]
    assert not np.any(reach & reach.T)


def test_level_splits_gamma_over_the_planned_runs():
    assert RankingSettings(gamma=0.05).level(50) == pytest.approx(0.05 / 254)
    assert RankingSettings(gamma=0.05, sort_labels=100).level(50) == pytest.approx(0.05 / (254 + 98))
    assert RankingSettings(gamma=0.05, error="per_pair").level(50) == 0.05
    with pytest.raises(ValueError, match="error"):
        RankingSettings(error="fdr")
    with pytest.raises(ValueError, match="sort_labels"):
        RankingSettings(sort_labels=-1)


def test_decide_pair_decides_a_clear_winner_from_few_labels_and_is_antisymmetric():
    protocol = RankingSettings().protocol(50, 400)
    labels = np.ones(400, dtype=int)
    won = decide_pair(labels, settings=protocol)
    assert won.decision == 1 and won.labels < 50 and won.status == "decided"
    lost = decide_pair(-labels, settings=protocol)
    assert (lost.decision, lost.margin, lost.labels) == (-1, -won.margin, won.labels)
    tied = decide_pair(np.zeros(400, dtype=int), settings=protocol)
    assert tied.decision == 0 and tied.status in ("futile", "exhausted")
    with pytest.raises(ValueError, match="repeat"):
        decide_pair(labels, settings=protocol, order=[0, 0, 1])


def test_the_metric_changes_the_bets_not_the_validity_of_a_decision():
    arena = make_arena(ArenaSpec(systems=2, prompts=600, seed=1, gap=0.6))
    protocol = RankingSettings().protocol(2, 600)
    human = decide_pair(arena.human(0, 1), settings=protocol)
    with_metric = decide_pair(arena.human(0, 1), settings=protocol, metric=arena.metric_labels(0, 1))
    assert human.decision == with_metric.decision == arena.truth(0, 1)


def test_null_replay_keeps_the_family_wise_error_and_per_pair_level_does_not():
    """All systems equal: every decided pair is false. The FWER design (level gamma / 17 at
    k = 8) decides no pair in any of 12 seeded studies (its bound allows 5 %); the same sort at
    per-pair level gamma decides false pairs in some of them, so the test sees the split."""
    fwer_any, per_pair_any = 0, 0
    for seed in range(12):
        arena = make_arena(ArenaSpec(systems=8, prompts=300, seed=seed, gap=0.0))
        fwer_any += replay_ranking(arena, RankingSettings(seed=seed)).false_pairs > 0
        per_pair_any += replay_ranking(arena, RankingSettings(seed=seed, error="per_pair")).false_pairs > 0
    assert fwer_any == 0
    assert per_pair_any > 0


def test_replay_scores_designs_against_the_truth():
    arena = make_arena(ArenaSpec(systems=6, prompts=300, seed=2, gap=1.0))
    truth = list(arena.true_order)
    perfect = score(arena, truth, None)
    assert perfect["tau"] == pytest.approx(1.0) and perfect["wrong_adjacent"] == 0
    reversed_ = score(arena, truth[::-1], None)
    assert reversed_["tau"] == pytest.approx(-1.0) and reversed_["wrong_adjacent"] == 5
    ranking = replay_ranking(arena, RankingSettings(seed=2))
    all_pairs = replay_all_pairs(arena, RankingSettings(seed=2))
    assert ranking.false_pairs == all_pairs.false_pairs == 0
    assert ranking.pairs_asked <= planned_decisions(6) < all_pairs.pairs_asked == 15
    assert ranking.tau > 0.8 and all_pairs.tau > 0.8
    uniform = replay_uniform(arena, ranking.labels, seed=2)
    assert uniform.labels == ranking.labels and uniform.ordered_pairs == 0


def test_replay_command_line_prints_every_design(capsys):
    import json

    from protocol.arena_replay import main

    assert main(["--systems", "4", "--prompts", "80", "--seeds", "0", "--human-only", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["design"] for r in rows] == ["all_pairs", "all_pairs_fwer", "ranking", "uniform"]
    assert rows[0]["pairs_asked"] == 6 and rows[1]["level"] == pytest.approx(0.05 / 6)
    assert rows[3]["labels"] == rows[2]["labels"] and rows[3]["level"] is None
    assert main(["--systems", "1"]) == 2


def test_report_states_the_done_when_from_the_rows():
    """scripts/report/ranking.findings compares the ranking with the family-wise all-pairs run
    of the same seed: met only at <= 0.25x with at least as many neighbours decided."""
    from scripts.report.ranking import findings

    def row(design, labels, adjacent, resolved):
        return dict(block="b", design=design, systems=5, seed=0, metric=False, labels=labels,
                    adjacent_labels=adjacent, resolved_adjacent=resolved)

    cheap = [row("all_pairs", 500, 100, 3), row("all_pairs_fwer", 1000, 200, 2), row("ranking", 240, 150, 2)]
    assert "**met**" in findings(cheap, "b", systems=5) and "**0.24×**" in findings(cheap, "b", systems=5)
    fewer = [*cheap[:2], row("ranking", 240, 150, 1)]
    assert "**not met**" in findings(fewer, "b", systems=5)
    dearer = [*cheap[:2], row("ranking", 260, 150, 2)]
    assert "**not met**" in findings(dearer, "b", systems=5)
    # the runs with the metric are stated on their own, never mixed with the human-only ones
    assert findings(cheap, "b", systems=5, metric=True) == ""
    with_metric = [{**r, "metric": True, "labels": r["labels"] * 2} for r in cheap]
    stated = findings(cheap + with_metric, "b", systems=5, metric=True)
    assert "(with the metric)" in stated and "**0.24×**" in stated


def test_max_labels_caps_every_run_of_the_one_stage_sort():
    """The study's resolution: without a sort stage cap, ``max_labels`` caps the sort's own
    runs (it capped only refinement runs, so a one-stage sort ignored it)."""
    arena = make_arena(ArenaSpec(systems=8, prompts=400, seed=3, gap=0.1))
    capped = RankingSettings(seed=3, max_labels=40)
    assert capped.capacity("sort", 400) == 40 and capped.capacity("refine", 400) == 40
    assert RankingSettings(sort_labels=20, max_labels=40).capacity("sort", 400) == 20
    assert RankingSettings().capacity("sort", 400) == 400
    result = replay_ranking(arena, capped)
    full = replay_ranking(arena, RankingSettings(seed=3))
    assert result.labels <= 40 * result.pairs_asked < full.labels


def test_fitted_order_is_the_bradley_terry_fit_of_the_labels_a_design_spent():
    """Every design is also scored by the order a leaderboard fits to its labels: on an easy
    arena the fit of all pairs' labels is the true order, and reversing the labels reverses it."""
    arena = make_arena(ArenaSpec(systems=6, prompts=300, seed=2, gap=1.0))
    spent = {(i, j): 300 for i in range(6) for j in range(i + 1, 6)}
    assert list(fitted_order(arena, spent, seed=2)) == list(arena.true_order)
    all_pairs = replay_all_pairs(arena, RankingSettings(seed=2))
    assert all_pairs.wrong_adjacent_fit == 0 and all_pairs.tau_fit == pytest.approx(1.0)
    ranking = replay_ranking(arena, RankingSettings(seed=2))
    assert 0 <= ranking.wrong_adjacent_fit <= 5 and -1 <= ranking.tau_fit <= 1
    with pytest.raises(ValueError, match="no labels"):
        fitted_order(arena, {}, seed=2)


def test_the_oracle_spends_only_on_true_neighbours_and_refuses_a_bad_count():
    arena = make_arena(ArenaSpec(systems=6, prompts=300, seed=2, gap=1.0))
    oracle = replay_neighbours_oracle(arena, 100, seed=2)
    assert oracle.labels == oracle.adjacent_labels == 500 and oracle.pairs_asked == 5
    assert oracle.wrong_adjacent_fit == 0
    for bad in (0, 301):
        with pytest.raises(ValueError, match="per_pair"):
            replay_neighbours_oracle(arena, bad, seed=2)


def test_matched_report_compares_at_equal_ordering_quality():
    """scripts/report/ranking_matched: the ranking and the active design are compared with the
    cheapest all-pairs point that orders the neighbours at least as well; the target is met
    only at <= 0.25x the family-wise run's labels."""
    from scripts.report.ranking_matched import matched, points, render

    def row(design, cap, labels, wrong, seed=0):
        return dict(design=design, cap=cap, seed=seed, labels=labels, wrong_adjacent_fit=wrong, tau_fit=0.9,
                    wrong_adjacent=wrong, resolved_adjacent=0, ordered_pairs=0, false_pairs=0, level=0.01,
                    stated_misordered=1.5, confident_neighbours=40, confident_wrong=1, resolved_neighbours=45,
                    resolved_wrong=0, resolved_wrong_direct=1)

    rows = [row("all_pairs", 30, 1000, 6), row("all_pairs", 0, 4000, 2), row("all_pairs_fwer", 0, 8000, 2),
            row("all_pairs_ebh", 0, 5000, 2), row("ranking", 200, 900, 2), row("active", 0.9, 1000, 2),
            row("oracle", 100, 700, 3)]
    table = points(rows)
    assert matched(table, "ranking", 2)["labels"] == 900 and matched(table, "oracle", 2) is None
    text = render(table, 1)
    assert "the ranking design 0.11× / 0.18× / 0.23×" in text and "active design **0.12× / 0.20× / 0.25×**" in text
    assert "**met** against the family-wise run, **met** against e-BH, met against per-pair γ" in text
    assert "| e-BH at γ | — | 5,000 | 2.0 |" in text and "none orders as well" in text
    assert "| 0.9 | 1,000 | 1.5 | 2.0 | 40.0 / 49 | 1 of 40 | 45 | 0 | 1 |" in text
    dearer = [r if r["design"] != "active" else row("active", 0.9, 2100, 2) for r in rows]
    assert "**not met** against the family-wise run, **not met** against e-BH" in render(points(dearer), 1)
