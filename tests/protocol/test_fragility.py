"""protocol/fragility.py against brute force: every subset of a small pair's judgements."""
import itertools
import math
import random

import numpy as np
import pytest
from scipy.special import ndtri

from protocol.active_ranking import ActiveSettings, add_labels, counts_ties, counts_wins, fit, fit_by_kind, label_counts
from protocol.adaptive import ProtocolSettings
from protocol.machine import open_rounds, record_judgements, start
from protocol.fragility import (FRAGILE_SHARE, ORDER_REMOVALS_ERROR, order_removals, pair_fragility,
                                sign_removals, top_removals)


def undone(kept: dict, decision: int, steps, bar) -> bool:
    """Whether the judgements ``kept`` (item -> values, in arrival order) no longer give the
    decision: the margin's sign is not the decision, or the wealth of the steps whose item
    keeps a judgement (value of its first kept judgement, bet as made) is below the bar."""
    margin = sum((sum(v) > 0) - (sum(v) < 0) for v in kept.values() if v)
    if margin * decision <= 0:
        return True
    if steps is None:
        return False
    wealth = sum(math.log1p(kept[item][0] * wager * rho) for item, _, wager, rho in steps
                 if kept.get(item) and kept[item][0] != 0)
    return wealth < bar


def brute_force(items: dict, decision: int, steps=None, bar=None) -> int:
    flat = [(item, k) for item, values in items.items() for k in range(len(values))]
    for size in range(len(flat) + 1):
        for removed in itertools.combinations(flat, size):
            gone = set(removed)
            kept = {item: [v for k, v in enumerate(values) if (item, k) not in gone] for item, values in items.items()}
            if undone(kept, decision, steps, bar):
                return size
    raise AssertionError("never undone")


def random_pair(rng, items, per_item, lean=0.6):
    values = {f"i{n}": [1 if rng.random() < lean else rng.choice([0, -1]) for _ in range(rng.randint(1, per_item))]
              for n in range(items)}
    steps = [(item, v[0], rng.uniform(0.05, 0.6), 1.0) for item, v in values.items()]
    return values, steps


def test_the_sign_count_is_exact_on_every_subset():
    rng = random.Random(1)
    checked = 0
    for _ in range(120):
        values, _ = random_pair(rng, rng.randint(1, 6), 3)
        margin = sum((sum(v) > 0) - (sum(v) < 0) for v in values.values())
        if margin == 0 or sum(len(v) for v in values.values()) > 11:
            continue
        decision = 1 if margin > 0 else -1
        assert sign_removals(values, decision) == brute_force(values, decision), values
        checked += 1
    assert checked > 60


def test_with_one_judgement_per_item_the_count_is_exact_and_the_margin_itself():
    rng = random.Random(2)
    for _ in range(80):
        values, steps = random_pair(rng, rng.randint(2, 10), 1, lean=0.75)
        margin = sum(v[0] for v in values.values())
        if margin <= 0:
            continue
        assert sign_removals(values, 1) == margin  # one win removed per step of the margin
        log_wealth = sum(math.log1p(v * b) for _, v, b, _ in steps if v)
        bar = log_wealth - rng.uniform(0, 1.5)
        found = pair_fragility(values, 1, steps, bar)
        assert found.exact and found.removals == brute_force(values, 1, steps, bar), (values, steps, bar)


def test_with_several_judgements_per_item_the_count_is_an_upper_bound():
    rng = random.Random(3)
    tight = 0
    for _ in range(120):
        values, steps = random_pair(rng, rng.randint(2, 5), 3, lean=0.75)
        margin = sum((sum(v) > 0) - (sum(v) < 0) for v in values.values())
        if margin <= 0 or sum(len(v) for v in values.values()) > 11:
            continue
        log_wealth = sum(math.log1p(v[0] * s[2]) for v, s in zip(values.values(), steps) if v[0])
        bar = log_wealth - rng.uniform(0, 1.0)
        found = pair_fragility(values, 1, steps, bar)
        truth = brute_force(values, 1, steps, bar)
        assert found.removals >= truth
        assert found.exact == all(len(v) == 1 for v in values.values())
        tight += found.removals == truth
    assert tight > 40


def test_a_decision_resting_on_few_of_many_judgements_is_fragile():
    """Of 1,000 one-judgement items, 503 for and 497 against: 6 removals undo the sign, 0.6 %
    of the labels (not fragile at the 0.5 % line); 502 against 498: 4, 0.4 %, fragile."""
    def pair(wins, losses):
        return {f"i{n}": [1 if n < wins else -1] for n in range(wins + losses)}
    steady = pair_fragility(pair(503, 497), 1)
    assert (steady.removals, steady.fragile, steady.evidence_removals) == (6, False, None)
    shaky = pair_fragility(pair(502, 498), 1)
    assert shaky.removals == 4 and shaky.share == pytest.approx(0.004) and shaky.fragile
    assert FRAGILE_SHARE == 0.005
    reversed_pair = pair_fragility({k: [-v[0]] for k, v in pair(502, 498).items()}, -1)
    assert reversed_pair.removals == 4


# The fitted order's neighbour claims ------------------------------------------------------------

def _exact_claim_removals(counts, claim, z_star):
    """Brute force: every way of removing labels (labels of one pair and outcome are
    exchangeable, so a way is a count per pair and outcome), the fit redone for each; the least
    total after which some (a, b) of ``claim`` has its statistic below z_star."""
    cells = [tuple(int(x) for x in idx) for idx in zip(*np.nonzero(counts))]
    best = None
    for taken in itertools.product(*(range(counts[c] + 1) for c in cells)):
        total = sum(taken)
        if best is not None and total >= best:
            continue
        left = counts.copy()
        for c, t in zip(cells, taken):
            left[c] -= t
        result = fit(left[0] + left[1] / 2 + (left[2] + left[1] / 2).T)
        if min((result.scores[a] - result.scores[b]) / result.difference_sd(a, b) for a, b in claim) < z_star:
            best = total
    return best


def _exact_order_removals(counts, upper, lower, z_star):
    """Brute force (``_exact_claim_removals``) of the claim "upper above lower"."""
    return _exact_claim_removals(counts, [(upper, lower)], z_star)


@pytest.mark.parametrize("seed", range(6))
def test_order_removals_is_a_removal_that_undoes_the_claim_and_near_the_least(seed):
    """Three systems, three pairs, wins and losses drawn small enough for brute force: the
    greedy count undoes the claim (it is at least the exact least number) and is at most
    ORDER_REMOVALS_ERROR above it."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((3, 3, 3), dtype=np.int64)
    for i, j, n in ((0, 1, 9), (1, 2, 7), (0, 2, 4)):
        won = int(rng.binomial(n, 0.75))
        counts[0, i, j], counts[2, i, j] = won, n - won
    wins = counts[0] + (counts[2]).T
    scores = fit(wins).scores
    upper, lower = (0, 1) if scores[0] >= scores[1] else (1, 0)
    statistic = (scores[upper] - scores[lower]) / fit(wins).difference_sd(upper, lower)
    z_star = statistic * 0.6            # a claim that holds, with room to undo
    found = order_removals(counts, upper, lower, z_star=z_star)
    exact = _exact_order_removals(counts, upper, lower, z_star)
    assert found.removals is not None and exact is not None
    assert exact <= found.removals <= exact + ORDER_REMOVALS_ERROR
    assert found.labels == int(counts.sum()) and found.statistic == pytest.approx(statistic)


def test_order_removals_of_a_claim_that_does_not_hold_is_none_and_bad_counts_are_refused():
    counts = np.zeros((3, 2, 2), dtype=np.int64)
    counts[0, 0, 1], counts[2, 0, 1] = 5, 5
    result = order_removals(counts, 0, 1, z_star=1.645)
    assert result.removals is None and not result.fragile
    with pytest.raises(ValueError, match="only above the diagonal"):
        order_removals(counts.transpose(0, 2, 1), 0, 1, z_star=1.0)
    with pytest.raises(ValueError, match=r"\(3, S, S\)"):
        order_removals(counts[:2], 0, 1, z_star=1.0)


# Top-k claims ------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("k", [1, 2])
def test_top_removals_undoes_the_claim_and_is_near_the_least(seed, k):
    """"The first k of the fit are above the rest" on three systems, with ties, small enough for
    brute force over every removal: the count undoes the claim and is at most
    ORDER_REMOVALS_ERROR above the least number (the stated error of the neighbour claims')."""
    rng = np.random.default_rng(100 + seed)
    counts = np.zeros((3, 3, 3), dtype=np.int64)
    for i, j, n in ((0, 1, 8), (1, 2, 7), (0, 2, 5)):
        counts[:, i, j] = rng.multinomial(n, [0.65, 0.1, 0.25])
    result = fit(counts[0] + counts[1] / 2 + (counts[2] + counts[1] / 2).T)
    order = np.argsort(-result.scores)
    top, rest = order[:k], order[k:]
    claim = [(int(a), int(b)) for a in top for b in rest]
    statistic = min((result.scores[a] - result.scores[b]) / result.difference_sd(a, b) for a, b in claim)
    if statistic <= 0.2:
        pytest.skip("the fit barely orders these systems: no claim to undo")
    z_star = statistic * 0.6
    found = top_removals(counts, top, z_star=z_star)
    exact = _exact_claim_removals(counts, claim, z_star)
    assert found.statistic == pytest.approx(statistic) and found.weakest in claim
    assert found.removals is not None and exact is not None
    assert exact <= found.removals <= exact + ORDER_REMOVALS_ERROR
    assert found.undone_by in claim and found.share == found.removals / found.labels
    # one pair tried (the weakest now) is still a removal that undoes it, never fewer than all pairs'
    assert top_removals(counts, top, z_star=z_star, pairs=1).removals >= found.removals


def test_top_removals_refuses_a_claim_of_every_system_or_none_and_reports_one_that_does_not_hold():
    counts = np.zeros((3, 3, 3), dtype=np.int64)
    counts[0, 0, 1], counts[2, 0, 1], counts[0, 1, 2], counts[0, 0, 2] = 6, 4, 9, 9
    with pytest.raises(ValueError, match="some but not all"):
        top_removals(counts, [0, 1, 2], z_star=1.0)
    with pytest.raises(ValueError, match="some but not all"):
        top_removals(counts, [], z_star=1.0)
    weak = top_removals(counts, [0], z_star=1.645)   # 0 over 1 on 6 of 10: not at the bar
    assert weak.removals is None and weak.weakest == (0, 1) and not weak.fragile


# Claims of the fit by kind of prompt --------------------------------------------------------------

def test_counts_by_kind_add_up_to_the_pooled_counts_and_their_claims_are_the_fit_by_kinds():
    """label_counts with the items' kinds: each kind's wins, ties and losses (of the smaller
    position), summing to the pooled counts. order_removals on them states the claim of
    fit_by_kind (its sd adds the kinds' part), and the removal count undoes it."""
    names = ["c", "a", "b"]   # the start order: positions differ from the names' order
    protocol = ProtocolSettings(budget=200, batch=12, first_round=12, gamma=0.05, policy="adaptive", rule="eprocess",
                                family="none")
    state = open_rounds(start(protocol, {("a", "b"): 12, ("a", "c"): 12, ("b", "c"): 12}))
    kinds = {str(t): ("x", "y", "z")[t % 3] for t in range(12)}
    rng = np.random.default_rng(5)
    for a, b, p in (("a", "b", 0.2), ("a", "c", 0.15), ("b", "c", 0.3)):   # c above a above b
        labels = rng.choice([1, 0, -1], size=12, p=[p, 0.1, 0.9 - p]).tolist()
        state = record_judgements(state, a, b, [str(t) for t in range(12)], labels)
    pooled = label_counts(state.pairs, names)
    by_kind = label_counts(state.pairs, names, kinds)
    assert by_kind.shape == (3, 3, 3, 3) and np.array_equal(by_kind.sum(axis=0), pooled)
    assert pooled[:, 0, 1].tolist() == [int(x) for x in state.pair("a", "c").human_counts[::-1]]  # c is position 0
    confidence = 0.8
    z_star = float(ndtri(confidence))
    wins = by_kind[:, 0] + by_kind[:, 1] / 2 + np.swapaxes(by_kind[:, 2] + by_kind[:, 1] / 2, -1, -2)
    ties = by_kind[:, 1] + np.swapaxes(by_kind[:, 1], -1, -2)
    model = fit_by_kind(wins, ties=ties, confidence=confidence)
    found = order_removals(by_kind, 0, 1, z_star=z_star, confidence=confidence)
    assert found.statistic == pytest.approx((model.scores[0] - model.scores[1]) / model.difference_sd(0, 1))
    # a close claim by kind: its sd weights the kinds' part as the design's stop does
    weight = ActiveSettings(confidence=confidence).kinds_weight
    close = order_removals(by_kind, 0, 1, z_star=1e9, shift=0.05, confidence=confidence, kinds_weight=weight)
    assert weight > 1 and close.statistic == pytest.approx(
        (model.scores[0] - model.scores[1] + 0.05) / model.difference_sd(0, 1, weight))
    assert found.removals is not None and 1 <= found.removals <= found.labels
    with pytest.raises(ValueError, match="confidence of the fit by kind"):
        order_removals(by_kind, 0, 1, z_star=z_star)


def test_each_refit_of_a_count_starts_from_the_fit_before_it(solver_iterations, monkeypatch):
    """A claim's count refits after each removal from the fit before it, and from the study's
    shared fit (``start``) at the first: the same count and statistic as fitting each from
    scratch, in fewer iterations of choix's solver."""
    import protocol.active_ranking as active_ranking

    calls = solver_iterations
    rng = np.random.default_rng(11)
    size = 8
    counts = np.zeros((3, size, size), dtype=np.int64)
    for i in range(size):
        for j in range(i + 1, size):
            n = int(rng.integers(20, 60))
            won = int(rng.binomial(n, 0.5 + 0.05 * (j - i)))
            counts[0, i, j], counts[1, i, j], counts[2, i, j] = won, n // 10, n - won
    z_star = 1.645
    shared = fit(counts_wins(counts)).scores
    calls.clear()
    warm = order_removals(counts, 0, 1, z_star=z_star * 0.5, start=shared)
    warm_calls = len(calls)
    scratch = active_ranking.fit_scores
    monkeypatch.setattr(active_ranking, "fit_scores", lambda wins, *, prior_ties, start=None: scratch(wins, prior_ties=prior_ties))
    calls.clear()
    cold = order_removals(counts, 0, 1, z_star=z_star * 0.5)
    assert cold.removals is not None and (warm.removals, warm.statistic) == (cold.removals, pytest.approx(cold.statistic))
    assert len(calls) > warm_calls > 0
