"""Tests for protocol.favi against docs/formulas.md §2 oracles and the paper's Lemma 1."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from protocol.favi import (
    confusion_matrix,
    favi_by_pair,
    favi_from_margins,
    favi_score,
    outcomes,
    per_system_favi,
    sample_accuracy,
    summarize,
    swap_systems,
    system_accuracy,
    total_error,
)

C1 = [[100, 0, 0], [0, 100, 0], [10, 0, 90]]
C2 = [[100, 0, 0], [0, 100, 0], [0, 10, 90]]
C3 = [[90, 0, 10], [0, 100, 0], [10, 0, 90]]
C4 = [[90, 10, 0], [0, 100, 0], [10, 0, 90]]
C5 = [[360, 180, 60], [20, 40, 40], [90, 90, 120]]


@pytest.mark.parametrize(
    ("confusion", "expected"), [(C1, 2.0), (C2, 1.0), (C3, 0.0), (C4, 0.5), (C5, -50 / 480)]
)
def test_favi_score_spec_oracles(confusion, expected):
    assert favi_score(confusion) == pytest.approx(expected, abs=1e-12)
    assert favi_from_margins(confusion) == pytest.approx(expected, abs=1e-12)


def test_c5_published_values():
    assert round(favi_score(C5), 6) == -0.104167
    assert sample_accuracy(C5) == pytest.approx(0.52, abs=1e-12)
    human_outcome, metric_outcome = outcomes(C5)
    assert human_outcome.tolist() == [600, 100, 300]
    assert metric_outcome.tolist() == [470, 310, 220]


def test_oracles_batched_equal_per_pair():
    batch = np.array([C1, C2, C3, C4, C5])
    per_pair = [favi_score(c) for c in batch]
    np.testing.assert_allclose(favi_score(batch), per_pair, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(total_error(batch), [10, 10, 20, 20, 480])


def test_no_errors_gives_nan():
    assert np.isnan(favi_score(np.diag([5, 3, 2])))
    assert np.isnan(favi_from_margins(np.diag([5, 3, 2])))


def test_confusion_matrix_counts_labels_human_rows_metric_columns():
    human = [1, 1, 0, -1, -1, -1]
    metric = [1, -1, 0, 1, 0, 0]
    expected = [[1, 0, 1], [0, 1, 0], [1, 2, 0]]
    np.testing.assert_array_equal(confusion_matrix(human, metric), expected)


def test_confusion_matrix_batched_with_padding_mask():
    human = [[1, 0, -1, 1], [1, -1, 0, 0]]
    metric = [[1, 1, -1, -1], [0, -1, 0, 1]]
    mask = [[True, True, True, False], [True, True, True, True]]
    batched = confusion_matrix(human, metric, mask=mask)
    np.testing.assert_array_equal(batched[0], confusion_matrix(human[0][:3], metric[0][:3]))
    np.testing.assert_array_equal(batched[1], confusion_matrix(human[1], metric[1]))


label_vectors = st.integers(1, 60).flatmap(
    lambda k: st.tuples(
        arrays(np.int8, k, elements=st.sampled_from([-1, 0, 1])),
        arrays(np.int8, k, elements=st.sampled_from([-1, 0, 1])),
    )
)


@settings(max_examples=200, deadline=None)
@given(label_vectors)
def test_lemma1_matrix_form_equals_margin_form(labels):
    human, metric = labels
    confusion = confusion_matrix(human, metric)
    phi = favi_score(confusion)
    errors = int(np.sum(human != metric))
    assert total_error(confusion) == errors
    if errors == 0:
        assert np.isnan(phi)
    else:
        shift = (np.sum(metric == 1) - np.sum(metric == -1)) - (np.sum(human == 1) - np.sum(human == -1))
        assert phi == pytest.approx(shift / errors, abs=1e-12)
        assert -2 <= phi <= 2
    assert favi_from_margins(confusion) == pytest.approx(phi, abs=1e-12, nan_ok=True)


@settings(max_examples=200, deadline=None)
@given(label_vectors)
def test_swapping_systems_negates_favi(labels):
    human, metric = labels
    swapped = confusion_matrix(-human, -metric)
    np.testing.assert_array_equal(swapped, swap_systems(confusion_matrix(human, metric)))
    assert favi_score(swapped) == pytest.approx(-favi_score(confusion_matrix(human, metric)), nan_ok=True)
    assert sample_accuracy(swapped) == pytest.approx(sample_accuracy(confusion_matrix(human, metric)))


def test_system_accuracy_counts_margin_sign_agreement():
    # C1: margins 0 (human) vs 20 (metric) disagree; C3: 0 vs 0 agree
    assert system_accuracy(np.array([C1, C3])) == 0.5
    assert system_accuracy(np.array([C5])) == 1.0


def _labels(items, values):
    return SimpleNamespace(items=np.array(items), values=np.array(values, dtype=np.int8))


def test_favi_by_pair_pairs_each_items_merged_human_label_with_its_metric_label():
    human = {
        ("A", "B"): _labels(["i1", "i1", "i2", "i3", "i4"], [1, 1, -1, 0, 1]),
        ("A", "C"): _labels(["i1", "i2"], [1, 1]),
    }
    metric = {
        ("A", "B"): _labels(["i3", "i2", "i1"], [1, -1, -1]),  # i4 unrated by the metric
        ("A", "C"): _labels(["i1", "i2"], [1, 1]),
    }
    results = favi_by_pair(human, metric)
    ab = results[("A", "B")]
    # the item is the unit: i1's two human labels are one row of the confusion matrix
    np.testing.assert_array_equal(ab.confusion, [[0, 0, 1], [1, 0, 0], [0, 0, 1]])
    assert ab.favi == pytest.approx((-2 + 1) / 2)
    assert np.isnan(results[("A", "C")].favi)
    boxes = per_system_favi({pair: r.favi for pair, r in results.items()})
    np.testing.assert_allclose(boxes["A"], [ab.favi])
    np.testing.assert_allclose(boxes["B"], [-ab.favi])
    assert boxes["C"].size == 0
    summary = summarize(results)
    assert summary.pairs == 2 and summary.pairs_without_errors == 1
    assert summary.mean_abs_favi == pytest.approx(0.5)
    assert summary.sample_accuracy == pytest.approx(3 / 5)
    assert summary.system_accuracy == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("human", "metric", "message"),
    [
        ([1, 0], [1, 0, 1], "same shape"),
        ([1, 2], [1, 0], "human labels must all be"),
        ([1, np.nan], [1, 0], "NaN"),
        ([1, 0], [1, 0.5], "metric labels must all be"),
    ],
)
def test_bad_labels_raise(human, metric, message):
    with pytest.raises(ValueError, match=message):
        confusion_matrix(human, metric)


@pytest.mark.parametrize("bad", [np.zeros((3, 2)), [[1, 2, 3]], [[-1, 0, 0], [0, 0, 0], [0, 0, 0]], np.full((3, 3), np.nan)])
def test_bad_confusion_matrix_raises(bad):
    with pytest.raises(ValueError, match="confusion matrix"):
        favi_score(bad)


def test_duplicate_metric_items_raise():
    with pytest.raises(ValueError, match="one label per item"):
        favi_by_pair({("A", "B"): _labels(["i1"], [1])}, {("A", "B"): _labels(["i1", "i1"], [1, 0])})


def test_favi_by_pair_batched_equals_per_pair():
    rng = np.random.default_rng(8)
    human, metric = {}, {}
    for k, pair in enumerate([("A", "B"), ("A", "C"), ("B", "C"), ("B", "D")]):
        n = 5 + 7 * k
        items = np.array([f"i{j}" for j in range(n)])
        human[pair] = _labels(np.repeat(items, 2), rng.integers(-1, 2, size=2 * n))
        metric[pair] = _labels(items[::-1], rng.integers(-1, 2, size=n))
    results = favi_by_pair(human, metric)
    for pair, result in results.items():
        single = favi_by_pair({pair: human[pair]}, {pair: metric[pair]})[pair]
        np.testing.assert_array_equal(result.confusion, single.confusion)
        assert result.favi == pytest.approx(single.favi, nan_ok=True)
        assert result.confusion.sum() == len(metric[pair].values)   # one row per item


def _shared_item_dataset(rng, items=60):
    """Three pairs judged on the same items; an item's difficulty is shared by all pairs."""
    hard = rng.random(items) < 0.5
    human, metric = {}, {}
    names = np.array([f"i{k}" for k in range(items)], dtype=object)
    for pair in (("A", "B"), ("A", "C"), ("B", "C")):
        h = rng.integers(-1, 2, size=items)
        agree = rng.random(items) < np.where(hard, 0.3, 0.95)
        m = np.where(agree, h, ((h + 2) % 3) - 1)            # a different label on error
        human[pair], metric[pair] = _labels(names, h), _labels(names, m)
    return human, metric


@pytest.mark.slow
def test_item_clustered_interval_for_sample_accuracy_covers_the_truth():
    from protocol.favi import bootstrap_intervals

    truth = 0.5 * 0.3 + 0.5 * 0.95
    rng = np.random.default_rng(5)
    covered = 0
    runs = 200
    for run in range(runs):
        human, metric = _shared_item_dataset(rng)
        intervals = bootstrap_intervals(human, metric, draws=400, seed=run)
        low, high = intervals.sample_accuracy
        covered += low <= truth <= high
    # 95 % intervals; 200 runs give a binomial sd of 0.015 (a label-level bootstrap that
    # ignores the shared items covers about 0.8 here)
    assert 0.88 <= covered / runs <= 0.99   # measured 0.915 (label-level: 0.81)


def test_bootstrap_intervals_contain_the_estimates_and_mirror_with_the_systems():
    from protocol.favi import bootstrap_intervals

    human, metric = _shared_item_dataset(np.random.default_rng(1))
    intervals = bootstrap_intervals(human, metric, draws=300, seed=2)
    summary = summarize(favi_by_pair(human, metric))
    assert intervals.sample_accuracy[0] <= summary.sample_accuracy <= intervals.sample_accuracy[1]
    assert intervals.mean_abs_favi[0] <= summary.mean_abs_favi <= intervals.mean_abs_favi[1]
    assert intervals.favi.shape == (3, 2) and np.all(intervals.favi[:, 0] <= intervals.favi[:, 1])
    with pytest.raises(ValueError, match="draws"):
        bootstrap_intervals(human, metric, draws=1)
