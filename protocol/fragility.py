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

from .control_variate import step_factor
from .state import full_step

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
