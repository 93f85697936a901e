import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.rating import consistency, elo, preference_strength, separability_elo, separability_k

SPEC_ORACLES = [  # SPEC §7: ratings -> (consistency, preference strength)
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
SPEC_MEAN_CONSISTENCY = {  # SPEC §7 real-data oracle, given to 3 decimals
    "cnndm-flan-gpt": 0.800, "samsum-mistral-vicuna": 0.468, "cnndm-vicuna-gpt": 0.384, "samsum-vicuna-gpt": 0.407,
}


def rating_sets(bundle):
    """{(item, rater): (5,) labels in sample order} from the converted bundle."""
    from scripts.convert_separability_prefs import rater_and_sample

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
    # orientation (SPEC §7): humans prefer GPT-3.5 (second) over FLAN-T5 (first) in ~95% of decided judgements
    flan = np.concatenate(by_file["cnndm-flan-gpt"])
    assert 0.93 < (flan == -1).sum() / (flan != 0).sum() < 0.97
