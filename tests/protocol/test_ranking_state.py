"""The ranking design over a protocol state, as the app runs it: parked pairs, the sort's replay
after every close (protocol.ranking_design.sort_start / sort_advance / sort_progress)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import adaptive
from protocol.ranking_design import (
    PairOutcome,
    RankingSettings,
    planned_decisions,
    rank,
    sort_advance,
    sort_progress,
    sort_start,
    start_order,
)

ITEMS = 40


def protocol_of(names, *, level):
    settings = adaptive.ProtocolSettings(budget=10 ** 6, batch=10, gamma=level, policy="adaptive",
                                         rule="eprocess", family="none", seed=0)
    capacities = {tuple(sorted((a, b))): ITEMS for n, a in enumerate(names) for b in names[n + 1:]}
    return adaptive.start(settings, capacities)


def run_study(names, strength, order, *, ties=()):
    """Drive the protocol as the app does: open rounds, judge every open pair (the stronger
    system wins every item; a pair in ``ties`` is a tie on every item), close, advance the sort.
    Returns the final state and every pair that ever opened a round."""
    level = RankingSettings().level(len(names))
    state = sort_start(protocol_of(names, level=level), order)
    opened = set()
    for _ in range(200):
        state = adaptive.open_rounds(state)
        wanted = adaptive.needed(state)
        if not wanted:
            break
        for (a, b), quota in wanted.items():
            opened.add((a, b))
            pair = state.pair(a, b)
            items = [str(t) for t in range(ITEMS) if str(t) not in pair.judged_items][:quota]
            value = 0 if (a, b) in ties else int(np.sign(strength[a] - strength[b]))
            state = adaptive.record_judgements(state, a, b, items, [value] * len(items))
        state = sort_advance(adaptive.close_rounds(state), order)
    return state, opened, level


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_the_app_loop_runs_only_the_sorts_pairs_and_finds_the_true_order(k):
    names = [f"s{n:02d}" for n in range(k)]
    strength = {name: float(n) for n, name in enumerate(names)}
    order = [names[i] for i in start_order(k, seed=3)]
    state, opened, level = run_study(names, strength, order)
    progress = sort_progress(state.pairs, order, level)
    assert progress.complete
    assert progress.result.order == tuple(sorted(names, key=lambda n: -strength[n]))
    # the same pairs as the synchronous driver with a noiseless comparison
    asked = []

    def compare(i, j, stage):
        asked.append(tuple(sorted((order[i], order[j]))))
        d = int(np.sign(strength[order[i]] - strength[order[j]]))
        return PairOutcome(d, 10 * d, 10, "decided")

    rank(order, compare, RankingSettings())
    assert opened == set(asked)
    assert progress.runs == len(opened) <= planned_decisions(k)
    assert progress.error_bound <= 0.05 + 1e-12
    for pair in state.pairs:
        if pair.key not in opened:
            assert pair.status == adaptive.PARKED and pair.judgements == 0
    assert not progress.running and progress.labels == state.spent


def test_a_parked_pair_is_never_funded_and_the_sorts_first_pairs_wait():
    names = ["a", "b", "c", "d"]
    order = ["a", "b", "c", "d"]
    state = sort_start(protocol_of(names, level=0.01), order)
    statuses = {p.key: p.status for p in state.pairs}
    # merge sort of 4: (a, b) and (c, d) first, independent of each other
    assert {k for k, s in statuses.items() if s == adaptive.WAITING} == {("a", "b"), ("c", "d")}
    assert all(s == adaptive.PARKED for k, s in statuses.items() if k not in {("a", "b"), ("c", "d")})
    opened = adaptive.open_rounds(state)
    assert set(adaptive.needed(opened)) == {("a", "b"), ("c", "d")}
    # nothing stopped yet: advancing changes nothing
    assert sort_advance(opened, order) is opened


def test_undecided_pairs_form_a_tier_and_the_order_respects_every_decision():
    names = ["a", "b", "c", "d"]
    strength = {"a": 3.0, "b": 2.0, "c": 2.0, "d": 0.0}
    order = ["d", "c", "b", "a"]
    state, opened, level = run_study(names, strength, order, ties={("b", "c")})
    progress = sort_progress(state.pairs, order, level)
    assert progress.complete
    assert progress.result.order[0] == "a" and progress.result.order[-1] == "d"
    assert set(progress.result.tiers[1]) == {"b", "c"}
    decisions = progress.result.decisions()
    assert decisions[("b", "c")] == 0 and decisions[("a", "d")] == 1


def test_start_refuses_judgements_and_an_order_that_is_not_the_studys_systems():
    names = ["a", "b", "c"]
    state = protocol_of(names, level=0.01)
    with pytest.raises(ValueError, match=r"missing \['c'\], unknown \['x'\]"):
        sort_start(state, ["a", "b", "x"])
    with pytest.raises(ValueError, match="names a system twice"):
        sort_start(state, ["a", "b", "b", "c"])
    judged = adaptive.record_judgements(adaptive.open_rounds(state), "a", "b", ["0"], [1])
    with pytest.raises(ValueError, match="starts with no human judgements; 1 pairs hold some"):
        sort_start(judged, names)


def test_start_order_sorts_by_score_else_shuffles_by_seed():
    assert list(start_order(4, seed=0, scores=[0.1, 0.9, 0.5, 0.9])) == [1, 3, 2, 0]
    assert sorted(start_order(6, seed=1)) == list(range(6))
    assert list(start_order(6, seed=1)) == list(start_order(6, seed=1))
    with pytest.raises(ValueError, match="3 finite numbers"):
        start_order(3, seed=0, scores=[1.0, float("nan"), 2.0])


@settings(max_examples=25, deadline=None)
@given(k=st.integers(2, 7), seed=st.integers(0, 10 ** 6), rename=st.randoms(use_true_random=False))
def test_renaming_the_systems_renames_the_ranking(k, seed, rename):
    """Swapping systems mirrors results: the sort over a relabelled study asks the relabelled
    pairs and returns the relabelled order."""
    names = [f"s{n}" for n in range(k)]
    strength = {name: float(v) for name, v in zip(names, np.random.default_rng(seed).permutation(k))}
    order = [names[i] for i in start_order(k, seed=seed)]
    shuffled = list(names)
    rename.shuffle(shuffled)
    new = dict(zip(names, shuffled))
    state, opened, level = run_study(names, strength, order)
    state2, opened2, _ = run_study(shuffled, {new[n]: v for n, v in strength.items()}, [new[n] for n in order])
    assert opened2 == {tuple(sorted((new[a], new[b]))) for a, b in opened}
    first = sort_progress(state.pairs, order, level).result
    second = sort_progress(state2.pairs, [new[n] for n in order], level).result
    assert second.order == tuple(new[n] for n in first.order)


def test_the_sort_never_runs_more_pairs_than_its_error_statement_counts():
    """A re-decision (after an exclusion) can change an outcome and so the sort's path; a pair it
    then asks for beyond the C(k) planned runs is not run: an undecided comparison, so the bound
    level x runs <= gamma still holds and the sort completes."""
    names = ["a", "b", "c", "d", "e"]
    state = protocol_of(names, level=0.05 / planned_decisions(5))
    # nine of the ten pairs ran (C(5) = 9) and stopped undecided; (c, d) is parked
    pairs = tuple(p if p.key == ("c", "d") else replace(p, status=adaptive.FUTILE) for p in state.pairs)
    pairs = tuple(replace(p, status=adaptive.PARKED) if p.key == ("c", "d") else p for p in pairs)
    state = replace(state, pairs=pairs)
    advanced = sort_advance(state, names)
    assert advanced.pair("c", "d").status == adaptive.PARKED  # the boundary of [a, b, c] and [d, e] asks for it
    progress = sort_progress(advanced.pairs, names, 0.05 / planned_decisions(5))
    assert progress.runs == planned_decisions(5) and progress.error_bound == pytest.approx(0.05)
    assert progress.complete and progress.result.outcomes[(2, 3)].status == "not_run"
    assert progress.result.tiers == (tuple(names),)


def test_sort_start_caps_every_pairs_capacity_at_the_resolution():
    names = ["a", "b", "c", "d"]
    state = protocol_of(names, level=0.01)
    capped = sort_start(state, names, max_labels=3)
    assert {p.capacity for p in capped.pairs} == {3}
    assert {p.capacity for p in sort_start(state, names).pairs} == {ITEMS}
    assert {p.capacity for p in sort_start(state, names, max_labels=ITEMS + 5).pairs} == {ITEMS}
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="max_labels"):
            sort_start(state, names, max_labels=bad)
