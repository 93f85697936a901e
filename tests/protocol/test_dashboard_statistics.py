"""The statistics the researcher dashboard shows, as pure functions of protocol/ (issue 40, rooms
with one job: selectors/dashboard.py queries, these compute), each against a reference value
computed another way."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from protocol.allocation import design_weights, kish_ess
from protocol.preferences import pair_labels_table
from protocol.projection import PROJECTION_DRAWS, projection_draws
from protocol.ranking import decision_ranks, share_interval, tiered_leaderboard
from protocol.spa import SPA_MIN_ITEMS_PER_PAIR, SPA_MIN_PAIRS, item_mean_rows, spa_summary


def table(items, values):
    return SimpleNamespace(items=np.array(items, dtype=object), values=np.array(values, dtype=np.int8))


@pytest.mark.parametrize("wins, losses", [(0, 0), (3, 1), (12, 30)])
def test_share_interval_is_the_beta_posterior_checked_through_the_binomial(wins, losses):
    """Beta(a, b) with integer a, b: P(X <= x) = P(Binomial(a + b - 1, x) >= a) — the
    interval's ends put 2.5 % on each side by that identity, not by scipy's beta."""
    share, low, high = share_interval(wins, losses)
    a, b = wins + 1, losses + 1
    assert share == pytest.approx(a / (a + b))
    assert stats.binom.sf(a - 1, a + b - 1, low) == pytest.approx(0.025, abs=1e-9)
    assert stats.binom.sf(a - 1, a + b - 1, high) == pytest.approx(0.975, abs=1e-9)


def test_kish_ess_reference_values():
    assert kish_ess([1.0] * 7) == pytest.approx(7.0)
    assert kish_ess([3.0, 1.0]) == pytest.approx(16 / 10)
    weights = design_weights([1 / 10, 1 / 9, 1 / 8, 1 / 7])  # (10 + 3, 9 + 2, 8 + 1, 7 + 0) / 4
    assert kish_ess(weights) == pytest.approx(40 ** 2 / (13 ** 2 + 11 ** 2 + 9 ** 2 + 7 ** 2))
    assert kish_ess(5 * weights) == pytest.approx(kish_ess(weights))  # scale-free


def test_projection_draws_caps_the_entries():
    assert projection_draws(1) == PROJECTION_DRAWS == 300
    assert projection_draws(200) == 300
    assert projection_draws(500) == 120  # 60,000 entries / 500 pairs
    assert projection_draws(1225) == 60  # never fewer than 60 (48 by the cap)


def test_pair_labels_table_keeps_order_and_drops_empty_pairs():
    found = pair_labels_table({("A", "B"): [("x", 1), ("y", -1), ("x", 0)], ("A", "C"): []})
    assert list(found) == [("A", "B")]
    assert found[("A", "B")].items.tolist() == ["x", "y", "x"]
    assert found[("A", "B")].values.dtype == np.int8 and found[("A", "B")].values.tolist() == [1, -1, 0]


def test_item_mean_rows_averages_the_humans_on_items_every_metric_labels():
    human = {("A", "B"): table(["x", "y", "x", "z"], [1, -1, -1, 1]), ("A", "C"): table(["x"], [1])}
    m1 = {("A", "B"): table(["x", "y", "z"], [1, -1, 0]), ("A", "C"): table(["x"], [1])}
    m2 = {("A", "B"): table(["x", "z"], [-1, 1])}
    pairs, h, m = item_mean_rows(human, {"m1": m1, "m2": m2}, min_items=1)
    assert pairs == [("A", "B")]  # ("A", "C") lacks m2
    assert h == [[0.0, 1.0]]  # x: mean of +1 and -1; y is not labelled by m2
    assert m == {"m1": [[1.0, 0.0]], "m2": [[-1.0, 1.0]]}
    assert item_mean_rows(human, {"m1": m1}, min_items=4) == ([], [], {"m1": []})


def _pairs(n_pairs, n_items, rng):
    return {(f"S{k}", f"S{k + 1}"): table([f"i{j}" for j in range(n_items)], rng.choice([-1, 0, 1], n_items))
            for k in range(n_pairs)}


def test_spa_summary_of_a_metric_equal_to_the_humans_is_one():
    human = _pairs(SPA_MIN_PAIRS, SPA_MIN_ITEMS_PER_PAIR, np.random.default_rng(3))
    found = spa_summary(human, human, seed=0)
    assert found["enough"] and found["pairs"] == SPA_MIN_PAIRS
    assert found["spa"] == pytest.approx(1.0) and found["pa"] == pytest.approx(1.0)
    assert found["spa_low"] <= 1.0 <= found["spa_high"] + 1e-12


def test_spa_summary_says_what_is_missing():
    human = _pairs(SPA_MIN_PAIRS - 1, SPA_MIN_ITEMS_PER_PAIR, np.random.default_rng(3))
    assert spa_summary(human, human, seed=0) == {"enough": False, "pairs": SPA_MIN_PAIRS - 1,
                                                 "min_pairs": SPA_MIN_PAIRS, "min_items": SPA_MIN_ITEMS_PER_PAIR}


def test_decision_ranks_by_hand():
    rows = decision_ranks(["A", "B", "C", "D"], {("A", "B"): 1, ("B", "C"): 1, ("A", "C"): 1, ("C", "D"): 0})
    assert [(r["rank"], r["system"], r["wins"], r["losses"], r["undecided"]) for r in rows] == [
        (1, "A", 2, 0, 0), (1, "D", 0, 0, 1), (2, "B", 1, 1, 0), (3, "C", 0, 2, 1)]
    assert decision_ranks([], {}) == []


def test_tiered_leaderboard_puts_the_decisions_before_the_scores():
    """B wins most judgements (the higher Bradley–Terry score) but the decisions say A > B:
    A is first, B second; C without judgements comes last within its tier."""
    judgements = {("A", "B"): [("x", -1), ("y", -1), ("z", 1)], ("B", "C"): []}
    rows = tiered_leaderboard(["A", "B", "C"], judgements, {("A", "B"): 1, ("B", "C"): 0, ("A", "C"): 0},
                              replicates=20, seed=0)
    assert [(r["position"], r["system"], r["tier"]) for r in rows] == [(1, "A", 1), (2, "C", 1), (3, "B", 2)]
    by = {r["system"]: r for r in rows}
    assert by["B"]["score"] > by["A"]["score"] and by["C"]["score"] is None
    assert (by["A"]["wins"], by["A"]["losses"], by["A"]["judgements"]) == (1, 2, 3)
    assert by["A"]["better_than"] == ["B"] and by["B"]["worse_than"] == ["A"]
