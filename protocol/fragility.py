"""How many counted human judgements a pair's decision rests on (issue 39, part 3): the least
number whose removal would undo it.

A pair decided by the betting e-process (``protocol.rules.eprocess_decision``) is decided
±1 = the sign of its human margin M = Σ_items sign(sum of the item's judgements) once its log
wealth reaches the bar. Removing judgements undoes the decision when

* **the sign**: M · decision ≤ 0 afterwards (``sign_removals``, exact). Per item only the
  judgements on the decision's side matter: an item labelled for the decision with vote sum
  s loses its label after s removals (reduces M by 1) and turns against it after s + 1 (by 2,
  when it holds a judgement the other way); a tied item turns against it after one removal
  (by 1, when it holds a judgement for the decision). The least total is a knapsack over the
  items, solved exactly by dynamic programming over the reduction needed.
* **the evidence**: the log wealth falls below the bar (``evidence_removals``). The wealth is
  the product of the items' steps 1 + bet × value × ρ, each bet as it was made (a removal
  does not re-make the other bets: ``protocol.machine.rebuild_pairs`` keeps them); an item
  whose judgements are all removed loses its step. The least number of judgements whose items'
  steps carry log wealth − bar is a knapsack over the items (cost: the item's judgements),
  exact by dynamic programming when every item is removed whole, which is all there is when
  each item has one judgement (``ratings_per_item`` = 1, the default); with more, removing
  only an item's first judgement changes its step's value, which this leaves out, so the
  count is then an upper bound.

Either undoes the decision, and any set that undoes it does one of the two, so the least
number is the smaller of the two (``PairFragility.removals``). A decision that the removal of
at most FRAGILE_SHARE of the pair's judgements undoes is marked fragile.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .active_ranking import CLOSE, ORDERED, ActiveSettings, counts_ties, counts_wins, fit, fit_by_kind, label_counts
from .control_variate import step_factor
from .state import PairState, full_step

# A claim undone by removing at most this share of its judgements is fragile (issue 39).
FRAGILE_SHARE = 0.005


@dataclass(frozen=True)
class PairFragility:
    """decision       ±1 the decision looked at
    judgements        counted judgements of the pair
    sign_removals     least removals that take the margin's sign off the decision (exact)
    evidence_removals least removals that take the log wealth below the bar (None: not
                      computed — no steps, or a rule whose evidence is not a product of
                      steps — or out of reach by removing whole items)
    exact             whether ``removals`` is exact (False: items with several judgements
                      made the evidence count an upper bound)
    removals          the least of the two
    share             removals / judgements
    fragile           share ≤ FRAGILE_SHARE
    """

    decision: int
    judgements: int
    sign_removals: int
    evidence_removals: int | None
    exact: bool
    removals: int
    share: float
    fragile: bool


def _knapsack_min_cost(options: Sequence[Sequence[tuple[int, int]]], need: int) -> int:
    """Least total cost of choosing at most one (gain, cost) option per group with total gain
    ≥ need (gains are integers ≥ 1); ``math.inf`` when out of reach."""
    if need <= 0:
        return 0
    best = np.full(need + 1, np.inf)
    best[0] = 0.0
    for group in options:
        new = best.copy()
        for gain, cost in group:
            shifted = np.full(need + 1, np.inf)
            shifted[gain:] = best[:-gain] + cost
            shifted[need] = min(shifted[need], float(np.min(best[max(need - gain, 0):need + 1])) + cost)
            new = np.minimum(new, shifted)
        best = new
    return math.inf if np.isinf(best[need]) else int(best[need])


def sign_removals(item_values: Mapping[str, Sequence[int]], decision: int) -> int:
    """Least number of judgements whose removal leaves Σ_items sign(item sum) · decision ≤ 0.

    item_values: item -> the values (+1 first better, 0, −1) of its counted judgements."""
    margin = 0
    options = []
    for values in item_values.values():
        oriented = [v * decision for v in values]
        total, plus, minus = sum(oriented), oriented.count(1), oriented.count(-1)
        margin += (total > 0) - (total < 0)
        if total > 0:
            group = [(1, total)]
            if minus:
                group.append((2, total + 1))
            options.append(group)
        elif total == 0 and plus:
            options.append([(1, 1)])
    removals = _knapsack_min_cost(options, margin)
    if math.isinf(removals):  # cannot happen: every item for the decision can lose its label
        raise AssertionError("the margin cannot be undone")
    return removals


def evidence_removals(steps: Sequence[tuple[str, int, float, float]], item_values: Mapping[str, Sequence[int]],
                      bar: float) -> tuple[int | None, bool]:
    """(least number of judgements whose items' steps, removed, take the log wealth below
    ``bar``, exact?). steps: the pair's (item, value, bet, rho[, lam, m, c]); an item without judgements in
    ``item_values`` has an inactive step. (None, True) when the wealth is below the bar already
    counts as 0."""
    contribution = {}
    for item, value, wager, rho, lam, m, c in (full_step(step) for step in steps):
        # as protocol.rules.steps_log_evidence counts it: a tie moves the wealth only through
        # the control variate's correction
        if item in item_values and item_values[item] and (value != 0 or lam * (m - c) != 0):
            contribution[item] = math.log(step_factor(value, wager, rho, lam, m - c))
    log_wealth = sum(contribution.values())
    excess = log_wealth - bar
    if excess < 0:
        return 0, True
    gains = sorted(((c, len(item_values[i])) for i, c in contribution.items() if c > 0), reverse=True)
    exact = all(len(v) == 1 for v in item_values.values())
    if all(cost == 1 for _, cost in gains):
        removed = 0.0
        for count, (c, _) in enumerate(gains, start=1):
            removed += c
            if removed > excess:
                return count, exact
        return None, exact
    # items of several judgements: the most wealth removable for each total cost
    total_cost = sum(cost for _, cost in gains)
    most = np.full(total_cost + 1, -np.inf)
    most[0] = 0.0
    for c, cost in gains:
        most[cost:] = np.maximum(most[cost:], most[:-cost] + c)
    reach = np.nonzero(most > excess)[0]
    return (int(reach[0]) if len(reach) else None), exact


def pair_fragility(item_values: Mapping[str, Sequence[int]], decision: int,
                   steps: Sequence[tuple[str, int, float, float]] | None = None,
                   bar: float | None = None) -> PairFragility:
    """The fragility of one decided pair (module docstring). steps and bar: the e-process's
    steps and the log wealth the decision had to reach; None for a rule without them."""
    if decision not in (-1, 1):
        raise ValueError(f"decision must be ±1, got {decision!r}")
    judgements = sum(len(v) for v in item_values.values())
    by_sign = sign_removals(item_values, decision)
    by_evidence, exact = (None, True) if steps is None or bar is None else evidence_removals(steps, item_values, bar)
    removals = by_sign if by_evidence is None else min(by_sign, by_evidence)
    # an upper bound on the evidence count (or "out of reach" by whole items) leaves the least
    # of the two an upper bound too
    share = removals / judgements if judgements else 0.0
    return PairFragility(decision=decision, judgements=judgements, sign_removals=by_sign,
                         evidence_removals=by_evidence, exact=exact, removals=removals, share=share,
                         fragile=share <= FRAGILE_SHARE)


# The fitted order's neighbour claims (the active design) ------------------------------------
# A neighbour claim of ``active_ranking`` says upper is above lower: *ordered* when
# z = d / sd >= z*, *close* when (d + r) / sd >= z* (d = s_upper - s_lower of the Bradley–Terry
# fit of every label, sd its posterior sd). Which labels to remove so that the claim's
# statistic falls below z* is a problem over the whole fit, so the count is approximate:
#
#   removing one label of pair (i, j) with outcome y (1 = i won, 1/2 a tie, 0 = j won) moves the
#   fit by a Newton step, Delta s = -(y - p_ij) C (e_i - e_j) (C the fit's covariance, the
#   inverse information), so d by -(y - p_ij) (C_ui - C_uj - C_li + C_lj);
#
# the labels are removed greedily, each time from the (pair, outcome) whose one removal lowers d
# the most, half the labels that step would take (at least one) before the fit is redone, until
# the redone fit's statistic is below z*. The labels removed undo the claim (each count is a
# set that does), so the count is an upper bound on the least number; against exact brute-force
# removal on small studies it was within ORDER_REMOVALS_ERROR above it (tests/protocol/test_fragility.py).

ORDER_REMOVALS_ERROR = 1


@dataclass(frozen=True)
class OrderFragility:
    """upper, lower     the claim: upper above lower (system indices)
    statistic           the claim's statistic now, (d + shift) / sd
    labels              counted labels of every pair (what the fit rests on)
    removals            labels removed that take the statistic below z* (an upper bound on the
                        least number, within ORDER_REMOVALS_ERROR on the small studies
                        checked); None when no removal lowers it (or the claim does not hold)
    share               removals / labels
    fragile             share <= FRAGILE_SHARE
    """

    upper: int
    lower: int
    statistic: float
    labels: int
    removals: int | None
    share: float | None
    fragile: bool


def _checked_counts(counts, confidence: float | None) -> np.ndarray:
    """``counts`` as int64 (3, S, S) or (K, 3, S, S), checked (by kind, ``confidence`` is needed)."""
    counts = np.array(counts, dtype=np.int64)
    if counts.ndim not in (3, 4) or counts.shape[-3] != 3 or counts.shape[-2] != counts.shape[-1]:
        raise ValueError(f"counts must be (3, S, S) or (kinds, 3, S, S), got shape {counts.shape}")
    pooled = counts.sum(axis=0) if counts.ndim == 4 else counts
    if np.any(counts < 0) or np.any(np.tril(pooled.sum(axis=0)) != 0):
        raise ValueError("counts must be >= 0 and only above the diagonal (pairs i < j)")
    if counts.ndim == 4 and confidence is None:
        raise ValueError("counts by kind need the confidence of the fit by kind")
    return counts


def _fit_counts(counts: np.ndarray, confidence: float | None, start: np.ndarray | None = None):
    """The active design's fit of ``counts``: ``fit`` of the pooled labels (3, S, S), or
    ``fit_by_kind`` at ``confidence`` (K, 3, S, S), ties and all; ``start`` as ``fit``'s."""
    if counts.ndim == 4:
        return fit_by_kind(counts_wins(counts), ties=counts_ties(counts), confidence=confidence, start=start)
    return fit(counts_wins(counts), start=start)


def _order_statistic(counts: np.ndarray, upper: int, lower: int, shift: float, confidence: float | None,
                     kinds_weight: float, start: np.ndarray | None = None) -> tuple[float, object]:
    result = _fit_counts(counts, confidence, start)
    return ((result.scores[upper] - result.scores[lower] + shift)
            / result.difference_sd(upper, lower, kinds_weight)), result


def order_removals(counts: np.ndarray, upper: int, lower: int, *, z_star: float, shift: float = 0.0,
                   confidence: float | None = None, kinds_weight: float = 1.0,
                   max_steps: int = 10_000, start: np.ndarray | None = None) -> OrderFragility:
    """How many counted labels the claim "upper above lower" rests on (the comment above).

    counts   (3, S, S): counts[0][i, j] labels of pair i < j that i won, counts[1][i, j] ties,
             counts[2][i, j] that j won (upper triangle; the rest 0); or (K, 3, S, S), those
             counts for each of K kinds of prompt: the claim is then the fit by kind's
             (``active_ranking.fit_by_kind`` at ``confidence``), the Newton step that chooses
             the (pair, outcome) is the pooled labels', and its labels are taken from the kinds
             that hold most of them first
    z_star   the claim's bar, Phi^-1(confidence); shift 0 for "ordered", the resolution for
             "close"
    kinds_weight  the weight of the kinds' variance in the claim's sd (a close claim by kind:
             ``ActiveSettings.kinds_weight``; 1 for an ordered claim; no effect without kinds)
    start    the scores of a fit of ``counts`` or near them (``active_ranking.fit``'s ``start``:
             the claims of one study share the fit of its counts), None for a fit from scratch
    """
    counts = _checked_counts(counts, confidence)
    labels = int(counts.sum())
    statistic, current = _order_statistic(counts, upper, lower, shift, confidence, kinds_weight, start)
    first = float(statistic)
    if statistic < z_star:
        return OrderFragility(upper, lower, first, labels, None, None, False)
    removed = 0
    outcome_value = np.array([1.0, 0.5, 0.0])
    for _ in range(max_steps):
        c = current.covariance
        s = current.scores
        pooled = counts.sum(axis=0) if counts.ndim == 4 else counts
        i, j = np.nonzero(np.triu(pooled.sum(axis=0) > 0, k=1))
        p = 1.0 / (1.0 + np.exp(s[j] - s[i]))
        reach = c[upper, i] - c[upper, j] - c[lower, i] + c[lower, j]
        # (outcomes, pairs): the change of d by removing one label
        change = -(outcome_value[:, None] - p[None, :]) * reach[None, :]
        change[pooled[:, i, j] == 0] = np.inf
        k, n = np.unravel_index(int(np.argmin(change)), change.shape)
        if not np.isfinite(change[k, n]) or change[k, n] >= 0:
            return OrderFragility(upper, lower, first, labels, None, None, False)
        sd = current.difference_sd(upper, lower, kinds_weight)
        need = (statistic - z_star) * sd
        take = int(min(pooled[k, i[n], j[n]], max(1, math.ceil(need / -change[k, n] / 2))))
        if counts.ndim == 4:
            left = take
            for g in np.argsort(-counts[:, k, i[n], j[n]], kind="stable"):
                part = min(left, int(counts[g, k, i[n], j[n]]))
                counts[g, k, i[n], j[n]] -= part
                left -= part
        else:
            counts[k, i[n], j[n]] -= take
        removed += take
        # the refit after a few labels' removal starts from the fit before it (fewer iterations)
        statistic, current = _order_statistic(counts, upper, lower, shift, confidence, kinds_weight,
                                              start=current.scores)
        if statistic < z_star:
            share = removed / labels if labels else 0.0
            return OrderFragility(upper, lower, first, labels, removed, share, share <= FRAGILE_SHARE)
    return OrderFragility(upper, lower, first, labels, None, None, False)


def neighbour_fragility(pairs: Sequence[PairState], order: Sequence[str], neighbours, *,
                        settings: ActiveSettings, kinds: Mapping[str, str] | None = None
                        ) -> dict[tuple[int, int], OrderFragility]:
    """(upper, lower) -> ``order_removals`` of every neighbour claim among ``neighbours``
    (``active_ranking.Neighbour``, systems by position in ``order``) reported ORDERED (bar
    ``settings.order_bar``) or CLOSE (bar ``settings.stop_bar``, shift the resolution); with
    ``kinds`` (item id -> kind of prompt) the claims of the fit by kind."""
    counts = label_counts(pairs, order, kinds)
    claims = [n for n in neighbours if n.status in (ORDERED, CLOSE)]
    start = _shared_start(counts, settings, claims)
    return {(n.upper, n.lower): order_removals(counts, n.upper, n.lower,
                                               z_star=settings.order_bar if n.status == ORDERED else settings.stop_bar,
                                               confidence=settings.confidence,
                                               shift=0.0 if n.status == ORDERED else settings.resolution,
                                               kinds_weight=1.0 if n.status == ORDERED else settings.kinds_weight,
                                               start=start)
            for n in claims}


def _shared_start(counts: np.ndarray, settings: ActiveSettings, claims) -> np.ndarray | None:
    """The scores of the fit of ``counts``, which every claim's count starts from (one fit from
    scratch for the study's claims, not one each); None without claims."""
    return _fit_counts(counts, settings.confidence).scores if claims else None


# Top-k claims --------------------------------------------------------------------------------
# "The systems of ``top`` are above the rest": every a in top above every b outside at the bar,
# (d_ab + shift) / sd_ab >= z* for each such pair. The claim falls as soon as one pair's
# statistic does, so the least number of removals that undo it is the least, over the pairs, of
# the least that undo that pair's claim: the count is ``order_removals``'s smallest over the
# pairs, an upper bound on the least number within the same ORDER_REMOVALS_ERROR as each
# pair's (the pair whose exact count is least has a greedy count at most that + the error).


@dataclass(frozen=True)
class TopFragility:
    """top         the claim: these systems (indices) are above every other
    statistic      the claim's statistic now: the least (d_ab + shift) / sd_ab over a in top, b not
    weakest        (a, b) the pair of that least statistic
    labels         counted labels of every pair
    removals       labels removed that undo the claim (``order_removals``'s least over the pairs
                   it tried, an upper bound on the least number); None when the claim does not
                   hold or no removal undoes it
    undone_by      (a, b) the pair whose removals those are (None with removals None)
    share, fragile as ``OrderFragility``'s
    """

    top: tuple[int, ...]
    statistic: float
    weakest: tuple[int, int]
    labels: int
    removals: int | None
    undone_by: tuple[int, int] | None
    share: float | None
    fragile: bool


def top_removals(counts: np.ndarray, top: Sequence[int], *, z_star: float, shift: float = 0.0,
                 confidence: float | None = None, pairs: int | None = None,
                 start: np.ndarray | None = None) -> TopFragility:
    """How many counted labels the claim "the systems of ``top`` are above the rest" rests on
    (the comment above), an ordered claim's. ``counts``, ``z_star``, ``shift``, ``confidence``
    ``start`` as ``order_removals``'s;
    ``pairs``: try only this many of the claim's pairs, those of least statistic now (None:
    all, |top| (S - |top|) refits of ``order_removals``; the count stays a removal that undoes
    the claim, but may be further above the least)."""
    counts = _checked_counts(counts, confidence)
    size = counts.shape[-1]
    top = tuple(sorted({int(a) for a in top}))
    rest = [b for b in range(size) if b not in top]
    if not top or not rest or top[0] < 0 or top[-1] >= size:
        raise ValueError(f"top must name some but not all of the {size} systems (0 .. {size - 1}), got {top}")
    result = _fit_counts(counts, confidence, start)
    statistic = {(a, b): (result.scores[a] - result.scores[b] + shift) / result.difference_sd(a, b)
                 for a in top for b in rest}
    ranked = sorted(statistic, key=statistic.get)
    weakest, labels = ranked[0], int(counts.sum())
    if statistic[weakest] < z_star:
        return TopFragility(top, float(statistic[weakest]), weakest, labels, None, None, None, False)
    best: OrderFragility | None = None
    for a, b in ranked[:pairs]:
        found = order_removals(counts, a, b, z_star=z_star, shift=shift, confidence=confidence, start=result.scores)
        if found.removals is not None and (best is None or found.removals < best.removals):
            best = found
    if best is None:
        return TopFragility(top, float(statistic[weakest]), weakest, labels, None, None, None, False)
    return TopFragility(top, float(statistic[weakest]), weakest, labels, best.removals, (best.upper, best.lower),
                        best.share, best.fragile)


# Pairs of a top-k claim the app tries (the weakest now): bounds the cost of a claim to that of
# a few neighbour claims; the count stays a removal that undoes the claim.
TOP_PAIRS_TRIED = 3


def tier_top_fragility(pairs: Sequence[PairState], order: Sequence[str], fitted: Sequence[int], neighbours, *,
                       settings: ActiveSettings, tried: int | None = TOP_PAIRS_TRIED,
                       kinds: Mapping[str, str] | None = None) -> dict[int, TopFragility]:
    """k -> ``top_removals`` of "the first k of the fitted order are above the rest", for every
    k at which the order's neighbours (``active_ranking.Neighbour``, in the order's order) are
    ORDERED (a tier ends there), at the bar of an ordered claim (``settings.order_bar``),
    trying the ``tried`` weakest pairs; systems by position in ``order`` (the start order),
    ``fitted`` the fit's order; ``kinds`` as ``neighbour_fragility``'s."""
    counts = label_counts(pairs, order, kinds)
    claims = [k for k, n in enumerate(neighbours) if n.status == ORDERED]
    start = _shared_start(counts, settings, claims)
    return {k + 1: top_removals(counts, fitted[:k + 1], z_star=settings.order_bar, confidence=settings.confidence,
                                pairs=tried, start=start)
            for k in claims}
