import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.allocation import choose_items, draw_chances, kind_turn, selection_weights

IDS = [f"doc-{i}" for i in range(10)]
DELTA = np.linspace(-1, 1, 10)


@pytest.mark.parametrize("policy", ["uniform", "weighted", "stratified"])
def test_draws_distinct_unjudged_items_reproducibly(policy):
    judged = {"doc-3", "doc-9"}
    first = choose_items(IDS, DELTA, judged, 5, policy=policy, seed=7)
    again = choose_items(IDS, DELTA, judged, 5, policy=policy, seed=7)
    assert first == again
    assert len(first) == len(set(first)) == 5
    assert not judged & set(first)


@pytest.mark.parametrize("policy", ["uniform", "weighted", "stratified"])
def test_candidate_order_does_not_change_the_draw(policy):
    permutation = np.random.default_rng(0).permutation(10)
    shuffled_ids = [IDS[i] for i in permutation]
    a = choose_items(IDS, DELTA, [], 6, policy=policy, seed=3)
    b = choose_items(shuffled_ids, DELTA[permutation], [], 6, policy=policy, seed=3)
    assert a == b


def test_returns_fewer_when_few_remain_and_nothing_when_all_judged():
    assert sorted(choose_items(IDS[:3], DELTA[:3], ["doc-0"], 10, seed=1)) == ["doc-1", "doc-2"]
    assert choose_items(IDS, DELTA, IDS, 4, seed=1) == []
    assert choose_items([], np.zeros(0), [], 4, seed=1) == []


def test_weighted_prefers_separable_items_at_the_softmax_rate():
    # First draw frequency of each item must match exp(δ/T)/Σ within binomial error.
    temperature = 0.5
    rng = np.random.default_rng(11)
    draws = 6000
    counts = dict.fromkeys(IDS, 0)
    for _ in range(draws):
        counts[choose_items(IDS, DELTA, [], 1, policy="weighted", temperature=temperature, seed=rng)[0]] += 1
    expected = selection_weights(DELTA, policy="weighted", temperature=temperature)
    observed = np.array([counts[i] for i in IDS]) / draws
    standard_error = np.sqrt(expected * (1 - expected) / draws)
    assert np.all(np.abs(observed - expected) < 5 * standard_error + 1e-3)
    assert observed[-1] > 5 * observed[0]


def test_weighted_tends_to_uniform_at_high_temperature():
    weights = selection_weights(DELTA, policy="weighted", temperature=1e6)
    np.testing.assert_allclose(weights, 0.1, atol=1e-6)


def test_stratified_covers_every_bin_before_repeating_one():
    # 4 bins over [-1, 1]; 8 draws must take exactly 2 from each bin (bins hold >= 2 items).
    chosen = choose_items(IDS, DELTA, [], 8, policy="stratified", bins=4, seed=5)
    bin_of = dict(zip(IDS, np.minimum(((DELTA + 1) / 0.5).astype(int), 3)))
    counts = np.bincount([bin_of[c] for c in chosen], minlength=4)
    assert counts.tolist() == [2, 2, 2, 2]
    # the first round visits every bin once
    assert sorted(bin_of[c] for c in chosen[:4]) == [0, 1, 2, 3]


def test_stratified_single_draws_follow_the_even_spread():
    """One item per call (as the app serves one per HIT): each bin with open candidates is
    drawn with equal probability; bins come from all candidates, judged ones included."""
    ids = [f"doc-{i}" for i in range(40)]
    delta = np.linspace(0, 1, 40, endpoint=False)  # 10 items per bin of 4
    bin_of = dict(zip(ids, np.minimum((delta * 4).astype(int), 3)))
    judged = set(ids[30:38])  # bin 3 keeps two open items; its edges must not move
    rng = np.random.default_rng(12)
    draws = 2000
    counts = np.bincount([bin_of[choose_items(ids, delta, judged, 1, policy="stratified", seed=rng)[0]]
                          for _ in range(draws)], minlength=4)
    share = counts / draws
    # binomial standard error of a share 1/4 over 2000 draws: 0.0097; 4.5 se ~ 1 in 10^5
    assert np.all(np.abs(share - 0.25) < 4.5 * np.sqrt(0.25 * 0.75 / draws)), share


def test_stratified_accepts_explicit_edges():
    chosen = choose_items(IDS, DELTA, [], 2, policy="stratified", bins=[-1.0, 0.9, 1.0], seed=2)
    assert "doc-9" in chosen  # the only item with δ >= 0.9 is the whole upper bin


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(policy="greedy"), "policy"),
        (dict(policy="weighted", temperature=0.0), "temperature"),
        (dict(policy="stratified", bins=0), "bins"),
        (dict(policy="stratified", bins=[0.5, 0.1]), "edges"),
    ],
)
def test_bad_options_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        choose_items(IDS, DELTA, [], 2, seed=0, **kwargs)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="shape"):
        choose_items(IDS, DELTA[:5], [], 2)
    with pytest.raises(ValueError, match="duplicate"):
        choose_items(["a", "a"], [0.1, 0.2], [], 1)
    with pytest.raises(ValueError, match="NaN"):
        choose_items(["a", "b"], [0.1, np.nan], [], 1)
    with pytest.raises(ValueError, match="count"):
        choose_items(["a", "b"], [0.1, 0.2], [], -1)


@settings(max_examples=60, deadline=None)
@given(
    delta=st.lists(st.floats(-1, 1), min_size=1, max_size=20),
    count=st.integers(0, 25),
    policy=st.sampled_from(["uniform", "weighted", "stratified"]),
    seed=st.integers(0, 2**32 - 1),
    judged_mask=st.integers(0, 2**20 - 1),
)
def test_property_valid_draws(delta, count, policy, seed, judged_mask):
    ids = [f"i{n}" for n in range(len(delta))]
    judged = {i for n, i in enumerate(ids) if judged_mask >> n & 1}
    chosen = choose_items(ids, np.array(delta), judged, count, policy=policy, seed=seed)
    assert len(chosen) == min(count, len(ids) - len(judged))
    assert len(set(chosen)) == len(chosen)
    assert set(chosen) <= set(ids) - judged


@pytest.mark.parametrize("policy", ["uniform", "weighted", "stratified"])
def test_draw_chances_are_a_distribution_over_the_open_items_matching_the_draws(policy):
    judged = {"doc-0", "doc-4", "doc-5"}
    ids, open_, chance = draw_chances(IDS, DELTA, judged, policy=policy, temperature=0.5)
    assert ids == IDS and open_.tolist() == [i not in judged for i in IDS]
    assert chance[~open_].tolist() == [0.0] * len(judged)
    assert chance.sum() == pytest.approx(1.0)
    rng = np.random.default_rng(11)
    draws = [choose_items(IDS, DELTA, judged, 1, policy=policy, temperature=0.5, seed=rng)[0] for _ in range(4000)]
    frequency = np.array([draws.count(i) for i in IDS]) / len(draws)
    np.testing.assert_allclose(frequency, chance, atol=0.03)  # 4,000 draws: sd <= 0.008


def test_kind_turn_serves_the_kind_with_fewest_items_taken_and_every_kind_in_turn():
    """kind_turn (the active design's turns over kinds of prompt, one draw at a time): always a
    kind with the fewest items taken among those with an open item; drawn to the end it takes
    the kinds in turns, so every prefix holds them equally often to one (as stratified does)."""
    kinds = np.array(["a"] * 5 + ["b"] * 3 + ["c"] * 8)
    taken = np.zeros(len(kinds), dtype=bool)
    for draw in range(len(kinds)):
        chosen = kind_turn(kinds, taken, ~taken, draw)
        assert not taken[chosen]
        counts = {k: int(np.count_nonzero(taken & (kinds == k))) for k in "abc"}
        left = {k for k in "abc" if np.any(~taken & (kinds == k))}
        assert counts[kinds[chosen]] == min(counts[k] for k in left)
        taken[chosen] = True
    assert taken.all()
    # an item taken but still open (another rating of it) counts for its kind; a closed kind is passed over
    assert kinds[kind_turn(kinds, kinds == "a", kinds != "b", 1)] == "c"
    with pytest.raises(ValueError, match="no open candidate"):
        kind_turn(kinds, taken, np.zeros(len(kinds), dtype=bool))
    with pytest.raises(ValueError, match=r"must be \(n,\) alike"):
        kind_turn(kinds, taken[:3], taken)
