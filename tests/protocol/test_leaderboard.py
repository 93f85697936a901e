"""Tests for protocol.leaderboard (Bradley–Terry with bootstrap, natural order) and
protocol.projection (judgements still needed)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import betainc

from protocol.leaderboard import bradley_terry, fit_scores, natural_sorted, win_matrix
from protocol.projection import judgements_to_finish


def test_natural_order_puts_m10_after_m9():
    assert natural_sorted(["M10", "M2", "M0", "M1", "M9", "M22"]) == ("M0", "M1", "M2", "M9", "M10", "M22")


def zermelo_mle(wins: np.ndarray, iterations: int = 20000) -> np.ndarray:
    """Independent reference: Zermelo's / Hunter's MM iteration for the Bradley–Terry MLE,
    pi_i <- W_i / sum_j n_ij / (pi_i + pi_j); log-strengths with mean 0."""
    n = wins + wins.T
    pi = np.ones(len(wins))
    for _ in range(iterations):
        pi = wins.sum(axis=1) / (n / (pi[:, None] + pi[None, :])).sum(axis=1)
        pi /= np.exp(np.log(pi).mean())
    scores = np.log(pi)
    return scores - scores.mean()


def test_fit_matches_the_hand_rolled_mle_with_ties():
    # 4 systems, every pair compared, ties included (half a win each): strongly connected.
    rng = np.random.default_rng(3)
    truth = np.array([1.0, 0.4, 0.0, -1.2])
    first, second, values = [], [], []
    for i in range(4):
        for j in range(i + 1, 4):
            for _ in range(30):
                p = 1 / (1 + np.exp(truth[j] - truth[i]))
                u = rng.random()
                values.append(0 if u < 0.15 else (1 if u < 0.15 + 0.85 * p else -1))
                first.append(i)
                second.append(j)
    wins = win_matrix(4, first, second, values)
    assert wins.sum() == len(values)
    np.testing.assert_allclose(fit_scores(wins, prior_ties=0.0), zermelo_mle(wins), atol=1e-6)
    board = bradley_terry(("a", "b", "c", "d"), first, second, values, prior_ties=0.0, replicates=50)
    np.testing.assert_allclose(board.score, zermelo_mle(wins), atol=1e-6)
    assert list(board.order) == list(np.argsort(-board.score))
    assert np.all(board.score_low <= board.score) and np.all(board.score <= board.score_high)
    assert np.all(board.rank_low <= board.rank) and np.all(board.rank <= board.rank_high)


def test_unjudged_systems_have_no_score_and_rank_last():
    board = bradley_terry(("M0", "M1", "M2"), [0, 0], [1, 1], [1, 0], replicates=20)
    assert np.isnan(board.score[2]) and board.rank[2] == 3 and list(board.order) == [0, 1, 2]
    assert board.score[0] > board.score[1]
    assert (board.wins.tolist(), board.ties.tolist(), board.losses.tolist()) == ([1, 0, 0], [1, 1, 0], [0, 1, 0])


def test_a_system_that_wins_everything_keeps_a_finite_score():
    board = bradley_terry(("A", "B"), [0] * 5, [1] * 5, [1] * 5, replicates=20)
    assert np.all(np.isfinite(board.score)) and board.score[0] > board.score[1]


@pytest.mark.parametrize("first, second, values, message", [
    ([0], [0], [1], "itself"), ([0], [3], [1], "indices"), ([0], [1], [2], "values"), ([0, 1], [1], [1], "length"),
])
def test_bad_input_is_named(first, second, values, message):
    with pytest.raises(ValueError, match=message):
        bradley_terry(("A", "B"), first, second, values)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([-1, 0, 1])), min_size=1, max_size=40))
def test_swapping_the_sides_of_every_judgement_changes_nothing(rows):
    rows = [r for r in rows if r[0] != r[1]]
    if not rows:
        return
    first, second, values = (list(c) for c in zip(*rows))
    board = bradley_terry("ABCD", first, second, values, replicates=5)
    swapped = bradley_terry("ABCD", second, first, [-v for v in values], replicates=5)
    np.testing.assert_allclose(board.score, swapped.score, atol=1e-6)
    mirrored = bradley_terry("ABCD", first, second, [-v for v in values], replicates=5)
    np.testing.assert_allclose(board.score, -mirrored.score, atol=1e-6)


def test_projection_of_a_clear_pair_is_one_round():
    result = judgements_to_finish([[1000, 0, 0]], [50], batch=10, gamma=0.05)
    assert result.per_pair.tolist() == [10.0] and result.total == result.low == result.high == 10


def test_projection_without_labels_left_is_zero():
    assert judgements_to_finish([[3, 1, 2]], [0], batch=10, gamma=0.05).total == 0


def scalar_projection(counts, remaining, batch, gamma, draws, seed):
    """Independent reference: one pair, one draw at a time, the predictive written as a loop;
    the judgements each draw takes."""
    rng = np.random.default_rng(seed)
    totals = []
    for _ in range(draws):
        p = rng.dirichlet(counts + 1)
        n, used = counts.copy(), 0
        while used < remaining:
            step = min(batch, remaining - used)
            n = n + rng.multinomial(step, p)
            used += step
            theta = 1 - betainc(n[0] + 1, n[2] + 1, 0.5)
            if theta > 1 - gamma / 2 or theta < gamma / 2:
                break
        totals.append(used)
    return totals


def test_projection_matches_a_scalar_simulation():
    counts, remaining, batch, gamma = np.array([6, 2, 4]), 60, 5, 0.05
    totals = scalar_projection(counts, remaining, batch, gamma, 3000, 11)
    reference = np.mean(totals)
    standard_error = np.std(totals) / np.sqrt(len(totals))
    ours = judgements_to_finish([counts], [remaining], batch=batch, gamma=gamma, draws=3000).total
    assert abs(ours - reference) < 4 * standard_error * np.sqrt(2)


def test_pairs_that_share_counts_and_labels_left_are_projected_once_and_summed_as_independent():
    """At 200 systems before any human label every pair has the same predictive, and simulating
    each of 19,900 took 28 s of every dashboard: a group is simulated once (its members share its
    mean) and resampled into the total. Independent reference: the scalar loop
    (scalar_projection) of one pair, its mean and variance times the group's size (the total
    of n independent pairs)."""
    counts, remaining, batch, gamma, n = np.array([2, 1, 1]), 40, 5, 0.05, 400
    one = scalar_projection(counts, remaining, batch, gamma, 4000, 5)
    mean, sd = np.mean(one), np.std(one)
    result = judgements_to_finish(np.tile(counts, (n, 1)), np.full(n, remaining), batch=batch, gamma=gamma,
                                  draws=400, level=0.8)
    assert len(set(result.per_pair.tolist())) == 1, "the group's members were simulated one by one"
    # the group's mean from its draws (20,000 at most, PROJECTION_ENTRIES over the groups) and the
    # reference's from 4,000: 5 standard errors of their difference
    assert abs(result.total - n * mean) < 5 * n * sd * np.sqrt(1 / 4000 + 1 / 20000)
    # the 80 % interval of a sum of n independent pairs: about ± 1.28 sd sqrt(n)
    assert (result.high - result.low) == pytest.approx(2 * 1.2816 * sd * np.sqrt(n), rel=0.2)
    # a pair alone in its group is drawn as before: the others' groups do not change its draws
    alone = judgements_to_finish([[9, 0, 1]], [30], batch=batch, gamma=gamma, draws=300, seed=3)
    mixed = judgements_to_finish([[9, 0, 1], *np.tile(counts, (5, 1))], [30, *[remaining] * 5], batch=batch,
                                 gamma=gamma, draws=300, seed=3)
    assert mixed.per_pair[0] == alone.per_pair[0]
