import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.savings import label_savings_bound, study_label_savings

# A superpopulation: metric class shares, and P(h = +1, 0, -1 | metric class) per class (+, =, -).
SHARES = np.array([0.45, 0.15, 0.40])
GIVEN = np.array([[0.70, 0.10, 0.20],
                  [0.35, 0.30, 0.35],
                  [0.25, 0.10, 0.65]])
VALUES = np.array([1, 0, -1])


def _moments():
    means = GIVEN @ VALUES
    sds = np.sqrt(GIVEN @ VALUES ** 2 - means ** 2)
    mu = SHARES @ means
    variance = SHARES @ (sds ** 2 + means ** 2) - mu ** 2
    between = SHARES @ (means - mu) ** 2
    return means, sds, variance, between


def _population(rng, n_items):
    classes = rng.choice(3, size=n_items, p=SHARES)
    drawn = (rng.random(n_items)[:, None] < np.cumsum(GIVEN[classes], axis=1)).argmax(axis=1)
    return VALUES[classes], VALUES[drawn]


def test_a_metric_that_tells_nothing_saves_nothing_and_a_perfect_one_saves_everything():
    human = np.array([1, 1, -1, 0, -1, 1, 0, -1] * 5)
    alike = label_savings_bound(human, np.ones_like(human), human_labels=20)  # one metric label for all
    assert alike.eta2 == pytest.approx(0.0) and alike.uniform_ratio == pytest.approx(1.0)
    perfect = label_savings_bound(human, human, human_labels=20)
    assert perfect.eta2 == pytest.approx(1.0)
    assert perfect.uniform_ratio == 0.0 and perfect.active_ratio == 0.0


def test_constant_human_labels_have_no_ratio_and_bad_input_is_named():
    assert math.isnan(label_savings_bound([1, 1, 1], [1, 0, -1], human_labels=2).uniform_ratio)
    with pytest.raises(ValueError, match="same items"):
        label_savings_bound([1, 0], [1], human_labels=1)
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        label_savings_bound([1, 2], [1, 0], human_labels=1)
    with pytest.raises(ValueError, match="human_labels"):
        label_savings_bound([1, -1], [1, 0], human_labels=3)


@pytest.mark.parametrize("active", [False, True])
def test_the_bound_is_the_variance_an_estimator_reaches_in_a_simulation(active):
    """Independent check of the closed form: the post-stratified estimator sum_c p^_c ybar_c
    over 6,000 simulated studies (N = 400 items drawn from the superpopulation, n = 120
    labelled, uniformly or n_c ~ p^_c sigma_c per metric class), its variance against
    V(n) = a / n + Var(E[h | m]) / N within 8 % (the Monte-Carlo sd of a variance from 6,000
    draws is 1.8 %; the rest is the estimator's O(1/n^2) small-sample excess)."""
    rng = np.random.default_rng(5)
    n_items, n = 400, 120
    means, sds, variance, between = _moments()
    a = (SHARES @ sds) ** 2 if active else SHARES @ sds ** 2
    expected = a / n + between / n_items
    estimates = []
    for _ in range(6000):
        metric, human = _population(rng, n_items)
        shares = np.array([np.mean(metric == v) for v in VALUES])
        if active:
            sizes = np.maximum(2, np.round(n * shares * sds / (shares @ sds))).astype(int)
        else:
            sizes = None
        labelled = rng.permutation(n_items)[:n]
        total = 0.0
        for c, v in enumerate(VALUES):
            members = np.flatnonzero(metric == v)
            if active:
                chosen = rng.choice(members, size=min(sizes[c], len(members)), replace=False)
            else:
                chosen = np.intersect1d(labelled, members)
                if len(chosen) == 0:
                    chosen = rng.choice(members, size=1)
            total += shares[c] * human[chosen].mean()
        estimates.append(total)
    assert np.var(estimates) == pytest.approx(expected, rel=0.08)
    # and the function computes the same a and Var(E[h | m]) from one large population
    metric, human = _population(rng, 200_000)
    bound = label_savings_bound(human, metric, human_labels=n)
    assert bound.eta2 == pytest.approx(between / variance, abs=0.005)
    assert bound.neyman_share == pytest.approx((SHARES @ sds) ** 2 / variance, abs=0.005)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([-1, 0, 1]), st.sampled_from([-1, 0, 1])), min_size=4, max_size=60),
       st.floats(0.1, 1.0))
def test_swapping_the_systems_mirrors_nothing_away(labels, fraction):
    """Swapping the pair's systems negates every label: the bound is the same; the Neyman
    allocation is never worse than uniform draws."""
    human = np.array([h for h, _ in labels])
    metric = np.array([m for _, m in labels])
    n_h = max(fraction * len(human), 1.0)
    bound = label_savings_bound(human, metric, human_labels=n_h)
    mirrored = label_savings_bound(-human, -metric, human_labels=n_h)
    if math.isnan(bound.eta2):
        assert math.isnan(mirrored.eta2)
        return
    assert mirrored.eta2 == pytest.approx(bound.eta2)
    assert mirrored.uniform_ratio == pytest.approx(bound.uniform_ratio)
    assert bound.active_ratio <= bound.uniform_ratio + 1e-12
    assert 0.0 <= bound.uniform_ratio <= 1.0 + 1e-12


def test_a_metric_that_explains_the_humans_exactly_saves_all_in_either_order():
    """Found by hypothesis: eta2 came out 1.0 one way round and 0.9999999999999998 the other, and
    with every label counted the uniform ratio was 0/0 in rounding errors: 0.0 vs 1.0."""
    human = np.array([-1, -1, -1, 0, 1])
    for labels in (human, -human):
        bound = label_savings_bound(labels, labels, human_labels=5)
        assert bound.eta2 == pytest.approx(1.0) and bound.uniform_ratio == 0.0 and bound.active_ratio == 0.0


def test_a_study_weights_each_pair_by_its_labels_and_leaves_out_constant_pairs():
    rng = np.random.default_rng(1)
    small = _population(rng, 40)[::-1]
    large = _population(rng, 400)[::-1]
    constant = (np.ones(30, dtype=int), np.zeros(30, dtype=int))
    got = study_label_savings([small, large, constant], fraction=0.5)
    one = label_savings_bound(*small, human_labels=20)
    other = label_savings_bound(*large, human_labels=200)
    assert got["pairs"] == 2 and got["pairs_constant"] == 1
    assert got["uniform_ratio"] == pytest.approx((20 * one.uniform_ratio + 200 * other.uniform_ratio) / 220)
