"""Tests for protocol.spa: paired permutation p-values, SPA, PA, metric clusters (docs/formulas.md §6)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from protocol.spa import (
    compare_differences,
    compare_scores,
    p_values_from_differences,
    pairwise_accuracy,
    pairwise_p_values,
    rank_metrics,
    sign_matrix,
    significance_clusters,
    soft_pairwise_accuracy,
)

HUMAN = [[1, 2, 3], [2, 3, 4]]
METRIC = [[2, 2, 4], [1, 3, 5]]


def test_spec_oracle_p_values_and_spa():
    result = compare_scores(HUMAN, METRIC, permutations=1000, seed=0)
    assert result.human_p[0] == 1.0
    assert abs(result.metric_p[0] - 0.875) <= 0.03
    assert result.spa == pytest.approx(1 - abs(1.0 - result.metric_p[0]))
    assert result.pa == 1.0  # both p-values >= 0.5: both say system 1 is better
    # with many permutations the estimate converges to the exact 7/8
    many = compare_scores(HUMAN, METRIC, permutations=40000, seed=1)
    assert many.metric_p[0] == pytest.approx(0.875, abs=0.006)


def test_p_value_matches_scipy_exact_permutation_test():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 9)) + np.array([[0.3], [0.0]])
    reference = stats.permutation_test(
        (x[0], x[1]),
        lambda a, b, axis: np.sum(a - b, axis=axis),
        permutation_type="samples",
        alternative="greater",
        n_resamples=np.inf,
        vectorized=True,
    ).pvalue
    estimate = pairwise_p_values(x, permutations=50000, seed=2)[0, 1]
    assert estimate == pytest.approx(reference, abs=0.008)  # ~3.5 Monte-Carlo standard errors


def test_batched_score_matrix_equals_per_pair_differences():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(6, 40))
    signs = sign_matrix(500, 40, seed=4)
    matrix = pairwise_p_values(scores, signs=signs)
    for i in range(6):
        for j in range(6):
            if i != j:
                single = p_values_from_differences((scores[i] - scores[j])[None], signs=signs)[0]
                assert matrix[i, j] == single
    assert np.all(np.isnan(np.diag(matrix)))


def test_difference_padding_matches_unpadded_pairs():
    rng = np.random.default_rng(1)
    rows = [rng.integers(-1, 2, size=n).astype(float) for n in (5, 12, 9)]
    signs = sign_matrix(300, 12, seed=3)
    padded = np.zeros((3, 12))
    mask = np.zeros((3, 12), dtype=bool)
    for k, row in enumerate(rows):
        padded[k, : len(row)] = row
        padded[k, len(row):] = 99.0  # padding values must not matter
        mask[k, : len(row)] = True
    together = p_values_from_differences(padded, mask, signs=signs)
    for k, row in enumerate(rows):
        assert together[k] == p_values_from_differences(row[None], signs=signs[:, : len(row)])[0]


def test_compare_differences_on_preference_values():
    pairs = [("A", "B"), ("A", "C")]
    human = [np.array([1, 1, 1, 1, 1, 0, 1, 1.0]), np.array([-1, 0, 1, -1.0])]
    metric = [np.array([1, 1, -1, 1, 1, 1, 1, 1.0]), np.array([-1, 0, 1, -1.0])]
    result = compare_differences(pairs, human, metric, permutations=2000, seed=0)
    assert result.pairs == (("A", "B"), ("A", "C"))
    assert result.human_p[1] == result.metric_p[1]  # identical labels, shared signs
    assert result.human_p[0] < 0.05 and result.metric_p[0] < 0.1
    assert result.spa == pytest.approx(1 - np.mean(np.abs(result.human_p - result.metric_p)))
    with pytest.raises(ValueError, match="human items but"):
        compare_differences(pairs, human, [metric[0], metric[1][:3]])


score_matrices = st.tuples(st.integers(2, 6), st.integers(1, 25)).flatmap(
    lambda shape: arrays(np.float64, shape, elements=st.floats(-10, 10, allow_nan=False, width=32))
)


@settings(max_examples=60, deadline=None)
@given(score_matrices, st.integers(0, 2**32 - 1))
def test_spa_of_a_metric_against_itself_is_one(scores, seed):
    result = compare_scores(scores, scores, permutations=200, seed=seed)
    assert result.spa == 1.0 and result.pa == 1.0


@settings(max_examples=60, deadline=None)
@given(score_matrices, st.data())
def test_spa_and_pa_lie_in_unit_interval_and_pa_is_sign_agreement(human, data):
    metric = data.draw(arrays(np.float64, human.shape, elements=st.floats(-10, 10, allow_nan=False, width=32)))
    result = compare_scores(human, metric, permutations=200, seed=0)
    assert 0.0 <= result.spa <= 1.0 and 0.0 <= result.pa <= 1.0
    agree = (result.human_p >= 0.5) == (result.metric_p >= 0.5)
    assert result.pa_quantised == pytest.approx(np.mean(agree))
    # Eq. 2, written out with the same tie tolerance as the module
    rows, cols = np.triu_indices(len(human), 1)

    def signs(scores):
        totals = scores.sum(axis=1)
        difference = totals[rows] - totals[cols]
        tolerance = 1e-9 * max(1.0, np.abs(scores).sum(axis=-1).max())
        return np.where(np.abs(difference) <= tolerance, 0, np.sign(difference))

    assert result.pa == pytest.approx(np.mean(signs(human) == signs(metric)))
    assert result.spa >= 1.0 - np.mean(np.abs(result.human_p - result.metric_p)) - 1e-12


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 7), st.integers(2, 30), st.integers(0, 1000), st.data())
def test_reordering_systems_permutes_the_p_value_matrix(n_systems, n_segments, seed, data):
    scores = np.random.default_rng(seed).normal(size=(n_systems, n_segments))
    order = np.array(data.draw(st.permutations(list(range(n_systems)))))
    p = pairwise_p_values(scores, permutations=300, seed=seed)
    p_reordered = pairwise_p_values(scores[order], permutations=300, seed=seed)
    np.testing.assert_array_equal(p_reordered, p[np.ix_(order, order)])
    # continuous scores: only the all-(+1) sign vector ties with the observed sum, so the
    # swapped hypothesis is the complement up to that shared tie mass, and SPA does not
    # depend on which system of a pair is listed first
    tie_mass = np.mean(np.all(sign_matrix(300, n_segments, seed) == 1, axis=1))
    upper = np.triu_indices(n_systems, 1)
    np.testing.assert_allclose((p + p.T)[upper], 1.0 + tie_mass, atol=1e-12)
    noisy = scores + np.random.default_rng(seed + 1).normal(size=scores.shape)
    a = compare_scores(scores, noisy, permutations=300, seed=seed).spa
    b = compare_scores(scores[order], noisy[order], permutations=300, seed=seed).spa
    assert a == pytest.approx(b, abs=1e-12)


def test_p_values_are_invariant_to_positive_affine_maps_and_segment_shifts():
    rng = np.random.default_rng(7)
    scores = rng.normal(size=(4, 30))
    shifted = 3.0 * scores + 5.0 + rng.normal(size=(1, 30))
    np.testing.assert_array_equal(
        pairwise_p_values(scores, permutations=400, seed=9), pairwise_p_values(shifted, permutations=400, seed=9)
    )


def test_spa_and_pa_from_given_p_values():
    human = np.array([0.0, 0.5, 1.0, 0.2])
    metric = np.array([0.1, 0.4, 1.0, 0.7])
    assert soft_pairwise_accuracy(human, metric) == pytest.approx(1 - (0.1 + 0.1 + 0 + 0.5) / 4)
    assert pairwise_accuracy(human, metric) == pytest.approx(0.5)  # 0.5 vs 0.4 and 0.2 vs 0.7 differ
    matrix = np.full((3, 3), np.nan)
    matrix[np.triu_indices(3, 1)] = [0.0, 0.5, 1.0]
    assert soft_pairwise_accuracy(matrix, matrix) == 1.0


def test_significance_clusters_greedy():
    p = np.full((5, 5), np.nan)
    p[np.triu_indices(5, 1)] = [0.30, 0.04, 0.01, 0.01,  # vs metric 0
                                0.20, 0.01, 0.01,        # vs metric 1
                                0.30, 0.02,              # vs metric 2
                                0.50]                    # vs metric 3
    # metric 2 is worse than metric 0 -> rank 2; metric 3 is not worse than 2 -> rank 2;
    # metric 4 is worse than metric 2 -> rank 3
    assert significance_clusters(p) == (1, 1, 2, 2, 3)
    with pytest.raises(ValueError, match="square"):
        significance_clusters(np.zeros((2, 3)))


def test_rank_metrics_separates_a_faithful_metric_from_noise():
    rng = np.random.default_rng(11)
    human = rng.normal(size=(6, 40)) + np.linspace(0, 1.5, 6)[:, None]
    metrics = {
        "faithful": 2.0 * human + 1.0,
        "noise": rng.normal(size=human.shape),
        "close": human + 0.05 * rng.normal(size=human.shape),
    }
    ranking = rank_metrics(human, metrics, resamples=60, permutations=300, seed=0)
    assert ranking.metrics[0] == "faithful" and ranking.spa[0] == 1.0
    assert ranking.metrics[-1] == "noise"
    assert ranking.ranks[0] == 1 and ranking.ranks[-1] > ranking.ranks[0]
    assert ranking.p_values[0, 2] <= 0.05


@pytest.mark.parametrize(
    ("human", "metric", "message"),
    [
        ([1, 2, 3], [1, 2, 3], "2-D"),
        ([[1, 2, 3]], [[1, 2, 3]], "at least 2 systems"),
        ([[1, np.nan], [1, 2]], [[1, 2], [1, 2]], "NaN"),
        ([[1, 2], [1, 2]], [[1, 2, 3], [1, 2, 3]], "segment counts differ"),
        ([[1, 2], [1, 2]], [[1, 2], [1, 2], [3, 4]], "systems"),
    ],
)
def test_bad_score_matrices_raise(human, metric, message):
    with pytest.raises(ValueError, match=message):
        compare_scores(human, metric, permutations=10)


def test_bad_permutation_settings_raise():
    with pytest.raises(ValueError, match="permutations"):
        sign_matrix(0, 5)
    with pytest.raises(ValueError, match="sign matrix"):
        pairwise_p_values(np.ones((2, 5)), signs=np.ones((10, 3)))
    with pytest.raises(ValueError, match="NaN"):
        p_values_from_differences([[1.0, np.inf]])


def test_bench_spa_reports_both_routes_on_a_small_problem():
    import argparse

    from protocol import _bench_spa

    parser = argparse.ArgumentParser()
    _bench_spa.add_arguments(parser)
    args = parser.parse_args(["--systems", "4", "--segments", "30", "--permutations", "200", "--scipy-pairs", "2", "--repeats", "1"])
    result = _bench_spa.run(args)
    assert result["pairs"] == 6 and result["scipy_pairs_timed"] == 2
    assert result["fast_seconds_all_pairs"] > 0 and result["scipy_seconds_all_pairs_extrapolated"] > 0
    # independent random flips: the routes agree within Monte-Carlo error (sd <= 0.036 at 200 draws)
    assert result["max_abs_p_difference_on_timed_pairs"] <= 0.15


def test_bootstrap_interval_brackets_spa_and_narrows_with_items():
    from protocol.spa import bootstrap_interval, compare_differences

    rng = np.random.default_rng(5)

    def data(items):
        pairs, human, metric = [], [], []
        for k, effect in enumerate((0.6, -0.3, 0.05, 0.4)):
            h = np.sign(rng.normal(effect, 1, items))
            m = np.where(rng.random(items) < 0.75, h, -h)
            pairs.append((f"s{k}", f"t{k}"))
            human.append(h)
            metric.append(m)
        return pairs, human, metric

    small, large = data(15), data(400)
    widths = []
    for pairs, human, metric in (small, large):
        point = compare_differences(pairs, human, metric, permutations=300, seed=1).spa
        interval = bootstrap_interval(pairs, human, metric, replicates=40, permutations=300, seed=1)
        assert interval.spa[0] <= point <= interval.spa[1]
        assert interval.spa[1] - interval.spa[0] <= 2 * 1.96 * interval.spa_se + 1e-12
        assert 0 <= interval.pa[0] <= interval.pa[1] <= 1
        widths.append(interval.spa[1] - interval.spa[0])
    assert widths[1] < widths[0] / 2
    with pytest.raises(ValueError, match="replicates"):
        bootstrap_interval(*small, replicates=1)


def test_pa_is_sign_agreement_of_the_totals_and_does_not_depend_on_the_seed():
    # human differences sum to +1 over 21 items: the exact p-value of "first better" is 0.5,
    # so the quantised Monte-Carlo p-value (Eq. 3) rounds either way with the seed; Eq. 2
    # counts the pair as agreeing with a metric that prefers the first system
    human = [np.array([1.0, -1.0] * 10 + [1.0]), np.array([-1.0] * 6 + [0.0] * 4)]
    metric = [np.ones(21), -np.ones(10)]
    results = [compare_differences([("A", "B"), ("A", "C")], human, metric, permutations=200,
                                   seed=seed) for seed in range(12)]
    assert {r.pa for r in results} == {1.0}
    assert len({r.pa_quantised for r in results}) > 1      # the old definition wobbles


def test_pa_from_totals_by_hand():
    from protocol.spa import pairwise_accuracy_from_totals

    assert pairwise_accuracy_from_totals([2.0, -1.0, 0.0, 3.0], [1.0, 1.0, 0.0, 0.0]) == 0.5
    with pytest.raises(ValueError, match="no system pairs"):
        pairwise_accuracy_from_totals([], [])
