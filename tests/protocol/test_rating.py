import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.rating import consistency, elo, preference_strength, separability_elo, separability_k

SPEC_ORACLES = [  # docs/formulas.md §7: ratings -> (consistency, preference strength)
    ([1, 1, 0, 1, 0], 0.6, 0.6),
    ([1, -1, 1, 1, 1], 0.0, 0.6),
    ([-1, 0, -1, -1, -1], 0.8, -0.8),
]


@pytest.mark.parametrize("ratings, c, s", SPEC_ORACLES)
def test_spec_consistency_and_strength_oracles(ratings, c, s):
    assert consistency(ratings) == pytest.approx(c, abs=1e-12)
    assert preference_strength(ratings) == pytest.approx(s, abs=1e-12)


def test_batched_equals_per_rating_set():
    sets = np.array([r for r, _, _ in SPEC_ORACLES])
    np.testing.assert_allclose(consistency(sets), [consistency(r) for r in sets], atol=1e-12)
    np.testing.assert_allclose(preference_strength(sets), [c[2] for c in SPEC_ORACLES], atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([-1, 0, 1]), min_size=1, max_size=7))
def test_property_mirroring_keeps_consistency_and_negates_strength(ratings):
    flipped = [-r for r in ratings]
    assert consistency(flipped) == consistency(ratings)
    assert preference_strength(flipped) == pytest.approx(-preference_strength(ratings), abs=1e-12)
    assert 0 <= consistency(ratings) <= abs(preference_strength(ratings)) + 1e-12


def plain_elo(comparisons, k_of):
    """Textbook one-at-a-time Elo, the oracle for the vectorised version."""
    ratings = {}
    for first, second, outcome, delta in comparisons:
        ra, rb = ratings.setdefault(first, 1000.0), ratings.setdefault(second, 1000.0)
        expected = 1 / (1 + 10 ** ((rb - ra) / 400))
        change = k_of(delta) * ((outcome + 1) / 2 - expected)
        ratings[first], ratings[second] = ra + change, rb - change
    return ratings


GAMES = [("A", "B", 1, 0.9), ("A", "B", 1, 0.1), ("B", "C", 0, 0.5), ("C", "A", -1, 0.7), ("B", "A", 1, 0.2)]


def test_elo_first_update_by_hand_and_against_the_textbook_loop():
    one = elo([("A", "B", 1, 0.3)], bootstrap=0)
    np.testing.assert_allclose(one.rating, [1002.0, 998.0])  # E = 1/2, K = 4
    expected = plain_elo(GAMES, lambda d: 4.0)
    got = elo(GAMES, bootstrap=0)
    np.testing.assert_allclose(got.rating, [expected[s] for s in got.systems], atol=1e-9)


def test_separability_elo_against_the_textbook_loop():
    k_of = lambda d: 4.0 * (1 + 0.5 * math.tanh(5 * (d - 0.5)))
    expected = plain_elo(GAMES, k_of)
    got = separability_elo(GAMES, bootstrap=0)
    np.testing.assert_allclose(got.rating, [expected[s] for s in got.systems], atol=1e-9)


def test_separability_k_shape():
    assert separability_k(0.5) == pytest.approx(4.0)
    assert separability_k(1.0) == pytest.approx(4 * (1 + 0.5 * math.tanh(2.5)))
    assert np.all(np.diff(separability_k(np.linspace(-1, 1, 21))) > 0)
    # alpha = 0 or delta = tau everywhere reduces to plain Elo
    flat = [(a, b, o, 0.5) for a, b, o, _ in GAMES]
    np.testing.assert_allclose(separability_elo(flat, bootstrap=0).rating, elo(flat, bootstrap=0).rating)
    np.testing.assert_allclose(separability_elo(GAMES, alpha=0, bootstrap=0).rating, elo(GAMES, bootstrap=0).rating)


def test_bootstrap_interval_is_reproducible_and_brackets_a_clear_winner():
    games = [("A", "B", 1, 0.8)] * 40 + [("A", "B", -1, 0.2)] * 10
    first = elo(games, bootstrap=300, seed=4)
    again = elo(games, bootstrap=300, seed=4)
    np.testing.assert_array_equal(first.lower, again.lower)
    assert np.all(first.lower <= first.upper)
    a, b = first.systems.index("A"), first.systems.index("B")
    assert first.lower[a] > first.upper[b]  # 40-10 is decisive


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ABCD"), st.sampled_from("ABCD"), st.sampled_from([-1, 0, 1]), st.floats(-1, 1)),
        min_size=1, max_size=15,
    ).map(lambda rows: [r for r in rows if r[0] != r[1]]).filter(bool)
)
def test_property_swapping_the_two_systems_mirrors_every_result(games):
    mirrored = [(b, a, -o, d) for a, b, o, d in games]
    for rate in (elo, separability_elo):
        x, y = rate(games, bootstrap=50, seed=1), rate(mirrored, bootstrap=50, seed=1)
        assert x.systems == y.systems
        np.testing.assert_allclose(x.rating, y.rating, atol=1e-9)
        np.testing.assert_allclose(x.lower, y.lower, atol=1e-9)
        np.testing.assert_allclose(x.upper, y.upper, atol=1e-9)
        assert x.rating.sum() == pytest.approx(1000 * len(x.systems))  # Elo is zero-sum


def test_bad_input_raises():
    with pytest.raises(ValueError, match="ratings must be"):
        consistency([1, 2])
    with pytest.raises(ValueError, match="k >= 1"):
        consistency([])
    with pytest.raises(ValueError, match="outcome"):
        elo([("A", "B", 0.5, 0.1)])
    with pytest.raises(ValueError, match="itself"):
        elo([("A", "A", 1, 0.1)])
    with pytest.raises(ValueError, match="separability"):
        elo([("A", "B", 1, float("nan"))])
    with pytest.raises(ValueError, match=r"\(first, second, outcome, separability\)"):
        elo([("A", "B", 1)])
    with pytest.raises(ValueError, match="alpha"):
        separability_elo(GAMES, alpha=1.0)
    with pytest.raises(ValueError, match="no comparisons"):
        elo([])


BUNDLE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "separability_prefs.jsonl.gz"
SPEC_MEAN_CONSISTENCY = {  # docs/formulas.md §7 real-data oracle, given to 3 decimals
    "cnndm-flan-gpt": 0.800, "samsum-mistral-vicuna": 0.468, "cnndm-vicuna-gpt": 0.384, "samsum-vicuna-gpt": 0.407,
}


def rating_sets(bundle):
    """{(item, rater): (5,) labels in sample order} from the converted bundle."""
    from scripts.convert.separability_prefs import rater_and_sample

    sets = defaultdict(dict)
    for row in bundle.human_preferences:
        rater, sample = rater_and_sample(row.annotator)
        sets[(row.item, rater)][sample] = row.preference
    return {key: np.array([labels[s] for s in sorted(labels)]) for key, labels in sets.items()}


def test_real_data_mean_consistency_per_file_matches_spec():
    from protocol.bundle import read_bundle

    bundle = read_bundle(BUNDLE)
    sets = rating_sets(bundle)
    by_file = defaultdict(list)
    for (item, _rater), labels in sets.items():
        assert labels.shape == (5,)
        by_file[item.rsplit("-", 1)[0]].append(labels)
    assert {f: len(v) for f, v in by_file.items()} == dict.fromkeys(SPEC_MEAN_CONSISTENCY, 150)
    for name, expected in SPEC_MEAN_CONSISTENCY.items():
        assert consistency(np.array(by_file[name])).mean() == pytest.approx(expected, abs=5e-4), name
    # orientation (docs/formulas.md §7): humans prefer GPT-3.5 (second) over FLAN-T5 (first) in ~95% of decided judgements
    flan = np.concatenate(by_file["cnndm-flan-gpt"])
    assert 0.93 < (flan == -1).sum() / (flan != 0).sum() < 0.97


# ---------------------------------------------------------------- item-clustered inference
def correlated_items(copies):
    """10 items; every judgement of an item agrees (items 0-5 won by A): 20 x copies each."""
    rows, items = [], []
    for item in range(10):
        for _ in range(20 * copies):
            rows.append(("A", "B", 1 if item < 6 else -1, 0.5))
            items.append(f"item{item}")
    order = np.random.default_rng(0).permutation(len(rows))
    return [rows[j] for j in order], [items[j] for j in order]


def test_elo_interval_redraws_whole_items_when_judgements_share_them():
    games, items = correlated_items(1)
    plain = elo(games, bootstrap=300, seed=1)
    clustered = elo(games, bootstrap=300, seed=1, clusters=items)
    np.testing.assert_allclose(clustered.rating, plain.rating)
    # 200 judgements but only 10 independent items: the interval must be far wider
    assert np.all(clustered.upper - clustered.lower > 2 * (plain.upper - plain.lower))
    # doubling the raters of every item does not make the clustered interval narrower
    doubled = elo(*[correlated_items(2)[0]], bootstrap=300, seed=1, clusters=correlated_items(2)[1])
    assert np.all(doubled.upper - doubled.lower > 0.8 * (clustered.upper - clustered.lower))
    # one cluster per judgement is the plain bootstrap again (in distribution)
    singletons = separability_elo(games, bootstrap=300, seed=2, clusters=range(len(games)))
    reference = separability_elo(games, bootstrap=300, seed=2)
    width, reference_width = singletons.upper - singletons.lower, reference.upper - reference.lower
    assert np.all(np.abs(width - reference_width) < 0.25 * reference_width)
    with pytest.raises(ValueError, match="one cluster per comparison"):
        elo(games, clusters=items[:-1])


def rating_sets_on_items(raters):
    rng = np.random.default_rng(3)
    delta = rng.random(12)
    x, y, items = [], [], []
    for item in range(12):
        for _ in range(raters):
            x.append(delta[item])
            y.append(delta[item] + rng.normal(0, 0.6))
            items.append(item)
    return np.array(x), np.array(y), items


def test_clustered_spearman_p_value_does_not_shrink_when_raters_are_duplicated():
    from scipy.stats import spearmanr

    from protocol.rating import clustered_spearman

    x, y, items = rating_sets_on_items(3)
    once = clustered_spearman(x, y, items, permutations=999, bootstrap=300, seed=5)
    twice = clustered_spearman(np.repeat(x, 2), np.repeat(y, 2), np.repeat(items, 2),
                               permutations=999, bootstrap=300, seed=5)
    assert once.rho == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert twice.rho == pytest.approx(once.rho, abs=1e-12)
    assert twice.p == pytest.approx(once.p, abs=1e-12)
    assert (twice.lower, twice.upper) == pytest.approx((once.lower, once.upper), abs=1e-12)
    # the independent-observations p-value is what duplication shrinks
    assert spearmanr(np.repeat(x, 2), np.repeat(y, 2)).pvalue < 0.5 * spearmanr(x, y).pvalue
    assert once.clusters == 12 and once.n == 36


def test_clustered_spearman_p_value_matches_full_enumeration_of_cluster_permutations():
    from itertools import permutations

    from scipy.stats import spearmanr

    from protocol.rating import clustered_spearman

    rng = np.random.default_rng(7)
    delta = np.array([0.1, 0.4, 0.35, 0.8, 0.6, 0.9])
    items = np.repeat(np.arange(6), 3)
    x = delta[items]
    y = x + rng.normal(0, 0.3, len(x))
    observed = abs(spearmanr(x, y).statistic)
    exact = np.mean([abs(spearmanr(np.array(order)[items], y).statistic) >= observed - 1e-12
                     for order in permutations(delta)])
    result = clustered_spearman(x, y, items, permutations=4000, bootstrap=0, seed=1)
    assert result.p == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / 4000) + 1 / 4000)
    with pytest.raises(ValueError, match="constant within each cluster"):
        clustered_spearman(y, x, items)
