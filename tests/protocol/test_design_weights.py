"""Item choice that does not bias the decision (issue 9 item 3), on the separability human data.

The samsum mistral-7b vs vicuna-7b file: 50 items, 3 raters x 5 judgements each. An item's
label is the sign of the mean of its judgements (the item is the unit); over all 50 items
the margin p+ - p- is 0.14. Choosing items by exp(δ / 0.25) (the app's default) over-samples
separable items, where mistral wins more clearly: without a correction the decision estimates
a margin near 0.33. With each draw's selection probability recorded and the Des Raj design
weights given to the counts, it estimates the margin of all items.
"""
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.allocation import choose_items, choose_one, design_weights, selection_probability
from protocol.decision import PairCounts, closed_form_theta, counts_from_labels, decide

BUNDLE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "separability_prefs.jsonl.gz"
TEMPERATURE = 0.25   # annotation.models.Study.item_choice_temperature's default
DRAWS = 15           # 30 % of the file's items
REPLICATES = 1000


@pytest.fixture(scope="module")
def mistral_vicuna():
    from protocol.bundle import read_bundle
    from protocol.separability import bundle_separability

    bundle = read_bundle(BUNDLE)
    separability = bundle_separability(bundle, "rouge1", workers=1)
    delta = {item: d for (item, _, _), d in zip(separability.comparisons, separability.separability)}
    votes = defaultdict(list)
    for row in bundle.human_preferences:
        if row.item.startswith("samsum-mistral-vicuna"):
            votes[row.item].append(row.preference)
    items = sorted(votes)
    labels = np.array([int(np.sign(np.mean(votes[i]))) for i in items])
    return items, np.array([delta[i] for i in items]), labels


def margin(counts: PairCounts) -> float:
    n = counts.n.astype(float)
    return float((n[0] - n[2]) / n.sum())


def sequential_draws(items, delta, count, policy, rng):
    judged, probabilities = [], []
    for _ in range(count):
        chosen, chance = choose_one(items, delta, judged, policy=policy, temperature=TEMPERATURE, seed=rng)
        probabilities.append(chance)
        judged.append(chosen)
    return judged, probabilities


@pytest.mark.parametrize("policy", ["weighted", "stratified"])
def test_design_weights_give_the_uniform_margin_under_separability_choice(mistral_vicuna, policy):
    items, delta, labels = mistral_vicuna
    label_of = dict(zip(items, labels))
    population = float(np.mean(labels == 1) - np.mean(labels == -1))
    assert population == pytest.approx(0.14)
    rng = np.random.default_rng(20261123)
    plain, weighted = [], []
    for _ in range(REPLICATES):
        drawn, probabilities = sequential_draws(items, delta, DRAWS, policy, rng)
        values = [label_of[i] for i in drawn]
        plain.append(margin(counts_from_labels(drawn, values, [], [])))
        weights = dict(zip(drawn, design_weights(probabilities)))
        weighted.append(margin(counts_from_labels(drawn, values, [], [], human_weights=weights)))
    plain, weighted = np.array(plain), np.array(weighted)
    error = weighted.std(ddof=1) / np.sqrt(REPLICATES)
    # the weighted margin is a ratio estimator: its bias is O(1/n), inside 0.01 here
    assert abs(weighted.mean() - population) < 4 * error + 0.01
    if policy == "weighted":
        # without the weights the decision estimates a margin near the δ-weighted population's
        # (0.33): measured 0.247 against 0.139 with the weights (15 of 50 items drawn)
        assert plain.mean() - population > 0.08
        assert plain.mean() - population > 6 * plain.std(ddof=1) / np.sqrt(REPLICATES)
        assert plain.mean() - population > 4 * error + 0.01   # the weighted check would fail


def test_weighted_counts_keep_their_effective_sample_size_and_feed_the_decision():
    items = [f"i{k}" for k in range(6)]
    values = [1, 1, 1, -1, 0, 1]
    raw = np.array([4.0, 1.0, 1.0, 2.0, 1.0, 3.0])
    counts = counts_from_labels(items, values, ["i0", "x"], [1, -1], human_weights=dict(zip(items, raw)))
    ess = raw.sum() ** 2 / (raw ** 2).sum()
    assert counts.weighted and counts.paired.sum() + counts.human_only.sum() == pytest.approx(ess)
    scale = ess / raw.sum()
    assert counts.paired[0, 0] == pytest.approx(4 * scale)          # i0: metric +, human +
    np.testing.assert_allclose(counts.human_only, np.array([5.0, 1.0, 2.0]) * scale)
    assert counts.metric_only.tolist() == [0, 0, 1]
    # without metric-only items the posterior is Dir(weighted n + 1): the closed form
    human_only = counts_from_labels(items, values, [], [], human_weights=dict(zip(items, raw)))
    result = decide(human_only)
    assert result.theta == pytest.approx(float(closed_form_theta(human_only.n)), abs=1e-12)
    # with metric-only items the samplers take fractional counts and are reproducible
    assert decide(counts, seed=3).theta == decide(counts, seed=3).theta
    with pytest.raises(ValueError, match="no weight for the judged item"):
        counts_from_labels(items, values, [], [], human_weights={"i0": 1.0})


def test_equal_weights_change_nothing():
    items = [f"i{k}" for k in range(8)]
    values = [1, 1, 0, -1, 1, 1, -1, 1]
    counts = counts_from_labels(items, values, [], [], human_weights=dict.fromkeys(items, 0.3))
    assert counts.key() == counts_from_labels(items, values, [], []).key()


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 12), st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_des_raj_weights_estimate_any_population_total_without_bias(size, draws, seed):
    # exact expectation over every ordered draw sequence of a small population
    from itertools import permutations

    draws = min(draws, size, 4)
    rng = np.random.default_rng(seed)
    y = rng.normal(size=size)
    w = rng.random(size) + 0.1                      # selection ∝ w among the open items
    expected = 0.0
    for order in permutations(range(size), draws):
        chance, left, probabilities = 1.0, set(range(size)), []
        for unit in order:
            q = w[unit] / w[list(left)].sum()
            chance *= q
            probabilities.append(q)
            left.remove(unit)
        expected += chance * float(design_weights(probabilities) @ y[list(order)])
    assert expected == pytest.approx(y.sum(), abs=1e-9)


def test_selection_probability_matches_the_draw_frequencies():
    ids = [f"d{k}" for k in range(8)]
    delta = np.linspace(-1, 1, 8)
    judged = ["d7", "d2"]
    rng = np.random.default_rng(4)
    for policy in ("uniform", "weighted", "stratified"):
        seen = defaultdict(int)
        for _ in range(4000):
            seen[choose_items(ids, delta, judged, 1, policy=policy, temperature=0.5, seed=rng)[0]] += 1
        for item in set(ids) - set(judged):
            expected = selection_probability(ids, delta, judged, item, policy=policy, temperature=0.5)
            assert seen[item] / 4000 == pytest.approx(expected, abs=5 * np.sqrt(expected / 4000) + 1e-3)
        total = sum(selection_probability(ids, delta, judged, i, policy=policy, temperature=0.5)
                    for i in set(ids) - set(judged))
        assert total == pytest.approx(1.0)
    with pytest.raises(ValueError, match="judged"):
        selection_probability(ids, delta, judged, "d7")


def test_the_protocol_state_records_draws_and_decides_on_the_weighted_counts():
    from protocol import adaptive

    settings = adaptive.ProtocolSettings.paper(budget=100, batch=6, gamma=0.05)
    state = adaptive.open_rounds(adaptive.start(settings, {("A", "B"): 20}))
    items = [f"i{k}" for k in range(6)]
    values = [1, 1, 1, 1, -1, 0]
    chances = [0.30, 0.25, 0.20, 0.25, 0.02, 0.05]   # the -1 and 0 items were unlikely draws
    state = adaptive.record_judgements(state, "A", "B", items[:3], values[:3], chances[:3])
    for item, value, chance in zip(items[3:], values[3:], chances[3:]):
        state = adaptive.record_judgement(state, "A", "B", item, value, probability=chance)
    pair = state.pair("A", "B")
    assert pair.draws == tuple(zip(items, chances)) and adaptive.design_weighted(pair)
    assert adaptive.PairState.from_dict(pair.to_dict()) == pair
    weights = dict(zip(items, design_weights(chances)))
    expected = counts_from_labels(items, values, [], [], human_weights=weights)
    assert adaptive.pair_counts(pair).key() == expected.key()
    closed = adaptive.close_rounds(state)
    assert closed.pair("A", "B").theta[-1] == pytest.approx(float(closed_form_theta(expected.n)), abs=1e-12)
    # the unlikely -1 item weighs more than it would as one of six equal items
    assert closed.pair("A", "B").theta[-1] < float(closed_form_theta(np.array([4, 1, 1])))
    # without recorded draws (uniform choice, imported judgements) the counts stay whole
    plain = adaptive.record_judgements(adaptive.open_rounds(adaptive.start(settings, {("A", "B"): 20})),
                                       "A", "B", items, values)
    assert not adaptive.design_weighted(plain.pair("A", "B"))
    assert adaptive.pair_counts(plain.pair("A", "B")).key() == counts_from_labels(items, values, [], []).key()


def test_rebuilding_a_pair_after_an_exclusion_keeps_the_draws_of_the_items_that_stay():
    from protocol import adaptive

    settings = adaptive.ProtocolSettings.paper(budget=100, batch=6, gamma=0.05)
    state = adaptive.open_rounds(adaptive.start(settings, {("A", "B"): 20}))
    items = [f"i{k}" for k in range(6)]
    values = [1, 1, 1, 1, -1, 0]
    chances = [0.30, 0.25, 0.20, 0.25, 0.02, 0.05]
    state = adaptive.close_rounds(adaptive.record_judgements(state, "A", "B", items, values, chances))
    kept = [0, 1, 2, 4]                       # an excluded annotator judged i3 and i5
    rebuilt = adaptive.rebuild_pairs(state, {("A", "B"): ([items[k] for k in kept], [values[k] for k in kept])})
    pair = rebuilt.pair("A", "B")
    assert pair.draws == tuple((items[k], chances[k]) for k in kept) and adaptive.design_weighted(pair)
    weights = dict(zip([items[k] for k in kept], design_weights([chances[k] for k in kept])))
    expected = counts_from_labels([items[k] for k in kept], [values[k] for k in kept], [], [], human_weights=weights)
    assert adaptive.pair_counts(pair).key() == expected.key()


@pytest.mark.parametrize("policy", ["uniform", "weighted", "stratified"])
def test_choose_one_is_the_first_draw_and_its_chance(policy):
    ids = [f"i{n}" for n in range(12)]
    delta = np.linspace(-1, 1, 12)
    judged = ["i3", "i7"]
    chosen, chance = choose_one(ids, delta, judged, policy=policy, temperature=0.5, seed=7)
    assert chosen == choose_items(ids, delta, judged, 1, policy=policy, temperature=0.5, seed=7)[0]
    assert chance == selection_probability(ids, delta, judged, chosen, policy=policy, temperature=0.5)
    with pytest.raises(ValueError, match="no open candidate"):
        choose_one(ids, delta, ids, policy=policy, temperature=0.5, seed=7)
