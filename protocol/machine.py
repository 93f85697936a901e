"""The budgeted protocol's state machine: start, open rounds, record judgements, close
rounds, rebuild pairs after exclusions, run to the end (overview: ``protocol.adaptive``).
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

import numpy as np

from .control_variate import Moments, cross_fitted_predictions, cv_bet, reliance, step_factor
from .decision import PairCounts, decision_from_theta
from .level_prior import PairLevel, margin_posteriors
from .rules import (
    bet,
    boundary_can_decide,
    boundary_decision,
    boundary_level,
    decide_closed_form,
    draw_rho,
    eprocess_can_decide,
    eprocess_decision,
    final_can_reject,
    margin_can_reach,
    pair_log_e_value,
    final_decision_probabilities,
    look_level,
    pair_counts,
    round_size,
    steps_log_evidence,
    weighted_bet,
    family_thresholds,
)
from .rules import default_decide
from .state import (
    LABEL_INDEX,
    ADAPTIVE,
    BAYES,
    BOUNDARY,
    EPROCESS,
    POOLED,
    DECIDED,
    EXHAUSTED,
    FILLED,
    FUTILE,
    OPEN,
    WAITING,
    PairState,
    ProtocolSettings,
    ProtocolState,
    check_state,
    require_whole,
    frozen_diagnostics,
    full_step,
    pair_index,
    pair_position,
    sign_of,
)

def start(
    settings: ProtocolSettings,
    capacities: Mapping[tuple[str, str], int],
    metric: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
    *,
    metric_counts: Mapping[tuple[str, str], Sequence[int]] | None = None,
) -> ProtocolState:
    """A fresh protocol: every pair waiting, no judgement.

    capacities     (first, second) -> human judgements the pair can receive; first < second
    metric         (first, second) -> {item: metric label in -1/0/1}; None or a missing pair
                   means no metric (the human-only protocol)
    metric_counts  (first, second) -> (n+, n=, n-) of the pair's metric labels, when the caller
                   counted them without building the labels (from the scores, vectorised): a
                   pair with counts keeps its ``metric`` mapping unread (a ``LazyLabels``
                   computes its labels when the pair first needs an item's label), so a start
                   holds no label per (pair, item): 40 M at 200 systems x 2,000 items
    """
    metric = metric or {}
    metric_counts = metric_counts or {}
    extra = (set(metric) | set(metric_counts)) - set(capacities)
    if extra:
        raise ValueError(f"metric labels for pairs without a capacity: {sorted(extra)[:3]}")
    pairs = []
    for (first, second), capacity in sorted(capacities.items()):
        if not first < second:
            raise ValueError(f"pair ({first!r}, {second!r}) is not in canonical order first < second")
        if not isinstance(capacity, (int, np.integer)) or capacity < 0:
            raise ValueError(f"capacity of ({first}, {second}) must be a non-negative integer, got {capacity!r}")
        counted = metric_counts.get((first, second))
        if counted is not None:
            metric_only = tuple(int(x) for x in counted)
            if len(metric_only) != 3 or min(metric_only) < 0:
                raise ValueError(f"metric counts of ({first}, {second}) must be 3 counts >= 0, got {counted!r}")
            labels = metric.get((first, second), MappingProxyType({}))
        else:
            labels = MappingProxyType(_checked_labels(first, second, metric.get((first, second), {})))
            metric_only = _label_counts(labels.values())
        pairs.append(
            PairState(
                first=first,
                second=second,
                capacity=int(capacity),
                metric=labels,
                metric_only=metric_only,
                status=WAITING if capacity > 0 else EXHAUSTED,
            )
        )
    return ProtocolState(settings, tuple(pairs))


def _checked_labels(first: str, second: str, labels: Mapping[str, int]) -> dict[str, int]:
    """{item: label} as str -> int; ValueError naming the first label outside -1/0/1."""
    checked = {str(item): int(value) for item, value in labels.items()}
    bad = [item for item, value in checked.items() if value not in LABEL_INDEX]
    if bad:
        raise ValueError(f"metric labels of ({first}, {second}) must be -1, 0 or 1; item {bad[0]!r} is not")
    return checked


def _label_counts(values: Iterable[int]) -> tuple[int, int, int]:
    """(n+, n=, n-) of metric labels (LABEL_INDEX order)."""
    counts = [0, 0, 0]
    for value in values:
        counts[LABEL_INDEX[value]] += 1
    return tuple(counts)


def needed(state: ProtocolState) -> dict[tuple[str, str], int]:
    """Pairs that need annotations now -> how many more judgements their open round needs."""
    return {p.key: p.quota for p in state.pairs if p.status == OPEN}


def open_rounds(state: ProtocolState) -> ProtocolState:
    """Open a round for every waiting pair, within the budget left.

    A round asks for min(round_size, judgements the pair can still receive). When the budget
    cannot fund all of them, the paper policy funds pairs in a seeded random order, the
    adaptive policy the pairs closest to a decision first; the last funded pair may get a
    smaller round so that the budget is never exceeded.
    """
    if not any(p.status == WAITING for p in state.pairs):
        return state
    return open_pairs(state, round_quotas(state))


def round_quotas(state: ProtocolState) -> dict[int, int]:
    """The rounds ``open_rounds`` opens: waiting pair index -> its quota. Neither the asks nor
    the funding read a pair's prediction, so the pairs about to open are known before any is
    calibrated (``calibrated``'s ``only``)."""
    waiting = [i for i, p in enumerate(state.pairs) if p.status == WAITING]
    if not waiting:
        return {}
    asks = {i: min(round_size(state.settings, state.pairs[i]), state.pairs[i].remaining) for i in waiting}
    closeness = {i: abs(state.pairs[i].theta[-1] - 0.5) if state.pairs[i].theta else 0.0 for i in waiting}
    return fund_rounds(state.settings, state.closes, asks, closeness, state.budget_left)


def fund_rounds(settings: ProtocolSettings, closes: int, asks: Mapping[int, int], closeness: Mapping[int, float],
                budget: int) -> dict[int, int]:
    """Share ``budget`` out among rounds that ask for ``asks`` (pair index -> judgements):
    everything when it suffices; otherwise the paper policy funds pairs in a seeded random
    order (by seed and ``closes``), the adaptive policy the largest ``closeness`` (|theta - 1/2|)
    first, and the last funded pair may get a smaller round. Returns pair index -> quota."""
    order = sorted(asks)
    if sum(asks.values()) > budget:
        if settings.policy == ADAPTIVE:
            order.sort(key=lambda i: (-closeness[i], i))
        else:
            permutation = np.random.default_rng([settings.seed, 1, closes]).permutation(len(order))
            order = [order[j] for j in permutation]
    quotas = {}
    for i in order:
        quota = min(asks[i], budget)
        if quota <= 0:
            break
        budget -= quota
        quotas[i] = quota
    return quotas


def open_pairs(state: ProtocolState, quotas: Mapping[int, int]) -> ProtocolState:
    """Open a round of the given size for each waiting pair named, with no budget check: the
    caller funded them (``open_rounds``, or ``protocol.rubric`` sharing one budget between the
    criteria of a rubric). quotas: index into state.pairs -> judgements the round asks for (> 0).
    """
    pairs = list(state.pairs)
    for i, quota in quotas.items():
        p = pairs[i]
        if p.status != WAITING or not 0 < quota <= p.remaining:
            raise ValueError(f"pair {p.key} cannot open a round of {quota}: it is {p.status} "
                             f"with {p.remaining} judgements left")
    for i, (basis, cv) in _bet_bases(state, list(quotas)).items():
        pairs[i] = replace(pairs[i], quota=quotas[i], round=pairs[i].round + 1, status=OPEN, round_basis=basis,
                           cv_basis=cv)
    return replace(state, pairs=tuple(pairs))


def rebet_pairs(state: ProtocolState, indices: Sequence[int]) -> ProtocolState:
    """The state with the open pairs at ``indices`` betting from now on as if their round had
    opened now: their bets' basis (``round_basis``, ``cv_basis``) made from their labels so far,
    exactly as ``open_pairs`` makes it. For an open round recorded in parts (judgements
    collected before the protocol started, ``protocol.rubric.seed_judgements``): each part's
    bets then use every label recorded before it, and none of its own or later. Precondition:
    every pair named is open."""
    pairs = list(state.pairs)
    for i, (basis, cv) in _bet_bases(state, indices).items():
        if pairs[i].status != OPEN:
            raise ValueError(f"pair {pairs[i].key} takes no bets now: it is {pairs[i].status}")
        pairs[i] = replace(pairs[i], round_basis=basis, cv_basis=cv)
    return replace(state, pairs=tuple(pairs))


def _bet_bases(state: ProtocolState, indices: Sequence[int]) -> dict[int, tuple[tuple, tuple]]:
    """index -> (round_basis, cv_basis) of the pairs at ``indices`` if their round opened now
    (PairState: the counts behind the bets of a round, the control variate's (lam, c, bet))."""
    pooled = ()
    if state.settings.rule == EPROCESS and state.settings.confusion == POOLED:
        # the metric's confusion over every judged item of the study: far better estimated
        # than one pair's, and other pairs' labels are independent of this pair's under the null
        require_whole(state, "the pooled confusion")
        pooled = tuple(int(x) for x in np.sum([p.paired for p in state.pairs], axis=0).ravel())
    control_variate = state.settings.rule == EPROCESS and state.settings.control_variate
    # the reliance on the metric, pooled over the study's judged items (any past label may enter
    # a bet: only the next label must be unpredictable; protocol.control_variate)
    lam = reliance(study_moments(state)) if control_variate and indices else 0.0
    bases = {}
    for i in indices:
        p = state.pairs[i]
        basis = (*(x for row in p.paired for x in row), *p.human_only, *p.metric_only, *pooled)
        bases[i] = (basis, cv_basis(p, lam, state.settings.max_bet) if control_variate else ())
    return bases


def study_moments(state: ProtocolState) -> Moments:
    """The control variate's moments (first judgement s, metric value m) over every kept
    uniform-draw step of the study's pairs (``pair_moments``), those a partial state leaves out
    included (``Outside.moments``). Summed exactly (``math.fsum``: the exact sum, rounded once),
    so the order of the pairs does not matter and a partial state whose ``Outside`` holds the
    exact sums of the others (as floats that add up to them) gets the whole state's moments to
    the last bit: with calibrated predictions the metric values are no integers. (Integer
    moments, the metric's labels, sum exactly either way.)"""
    columns: list[list[float]] = [[] for _ in range(6)]
    if state.outside:
        for column, part in zip(columns, state.outside.moments):
            column.extend(part if isinstance(part, tuple) else (part,))
    for pair in state.pairs:
        moments = pair_moments(pair)
        for column, value in zip(columns, (moments.n, moments.s, moments.m, moments.ss, moments.mm, moments.sm)):
            column.append(value)
    return Moments(*(math.fsum(column) for column in columns))


def pair_moments(pair: PairState) -> Moments:
    """The control variate's moments over the pair's kept uniform-draw steps, with the metric
    value each step recorded (so no metric label is computed for it). Steps without a metric
    term (made before the control variate, or on a pair without a metric: lam = m = c = 0) are
    left out."""
    kept = set(pair.votes) if pair.votes else set(pair.judged_items)
    rows = [(value, m) for item, value, _, rho, lam, m, c in map(full_step, pair.steps)
            if item in kept and rho == 1.0 and (lam, m, c) != (0.0, 0.0, 0.0)]
    if not rows:
        return Moments()
    values, metric = zip(*rows)
    return Moments.of(values, metric)


def pair_level(pair: PairState) -> PairLevel | None:
    """The pair's part of the level prior (protocol.level_prior): the metric's level, its mean
    over the pair's items (of the calibrated prediction where there is one, else of its labels,
    counted from ``paired`` and ``metric_only`` without reading them), and its kept uniform-draw
    steps' control-variate increments s - lam (m - c) (s alone where lam = 0). None for a pair
    without a metric value."""
    if pair.prediction:
        level = math.fsum(pair.prediction.values()) / len(pair.prediction)
    else:
        paired = np.asarray(pair.paired).sum(axis=1)
        plus, minus = int(paired[0]) + pair.metric_only[0], int(paired[2]) + pair.metric_only[2]
        total = int(paired.sum()) + sum(pair.metric_only)
        if not total:
            return None
        level = (plus - minus) / total
    kept = set(pair.votes) if pair.votes else set(pair.judged_items)
    increments = [value - lam * (m - c) for item, value, _, rho, lam, m, c in map(full_step, pair.steps)
                  if item in kept and rho == 1.0]
    return PairLevel.of(level, increments)


def pair_level_sums(pair: PairState) -> tuple[int, float, float, float, float]:
    """What a round close that does not decode the pair reads of it for the level prior
    (``PairLevel.sums``; zeros without a metric)."""
    level = pair_level(pair)
    return (0, 0.0, 0.0, 0.0, 0.0) if level is None else level.sums()


def calibrated(state: ProtocolState, features: Mapping[tuple[str, str], Mapping[str, Sequence[float]]], *,
               only: Iterable[int] | None = None) -> ProtocolState:
    """The state with waiting pairs' ``prediction`` refitted from several metrics: the
    cross-fitted calibration of protocol.control_variate on the OTHER pairs' judged items
    (their human item labels so far). Pairs with a round open or filled keep theirs, so that
    a round's steps and its centre use one predictor; stopped pairs are not touched.

    features  (first, second) -> {item: (q,) the metrics' values, + = first system better}
    only      indices of the pairs to refit (default every waiting pair): the pairs about to
              open (``round_quotas``) need it, and a prediction is used only from its opening
              on, so the others keep theirs until they open (the fit of each is the same)
    A partial state (``Outside``) needs its left-out pairs' sums (``Outside.calibration``).
    """
    outside = None
    if state.outside is not None:
        if state.outside.calibration is None:
            require_whole(state, "the calibration across pairs")
        sums = np.asarray(state.outside.calibration, dtype=float)
        q = int(round((math.sqrt(1 + 4 * len(sums)) - 1) / 2))
        outside = (sums[:q * q].reshape(q, q), sums[q * q:])
    refit = [i for i, p in enumerate(state.pairs) if p.status == WAITING] if only is None else sorted(set(only))
    refit = [i for i in refit if state.pairs[i].status == WAITING and features.get(state.pairs[i].key)]
    if not refit:
        return state
    judged = {p.key: pair_judged(p) for p in state.pairs}
    predictions = cross_fitted_predictions({p.key: features.get(p.key, {}) for p in state.pairs}, judged,
                                           outside=outside, only=[state.pairs[i].key for i in refit])
    pairs = list(state.pairs)
    for i in refit:
        pairs[i] = replace(pairs[i], prediction=MappingProxyType(predictions[pairs[i].key]))
    return replace(state, pairs=tuple(pairs))


def pair_judged(pair: PairState) -> dict[str, int]:
    """item -> the pair's human label of it (the sign of its judgements' sum), its judged items:
    what the cross-fitted calibration fits (``calibrated``, ``control_variate.calibration_sums``)."""
    return {item: sign_of(total) for item, total in pair.votes.items()}


def cv_metric_value(pair: PairState, item: str) -> float | None:
    """The item's metric value for the control variate: its calibrated prediction when the
    pair has predictions, else its metric label; None when it has neither."""
    if pair.prediction:
        value = pair.prediction.get(item)
        return None if value is None else float(value)
    value = pair.metric.get(item)
    return None if value is None else float(value)


def cv_basis(pair: PairState, lam: float, max_bet: float) -> tuple[float, float, float]:
    """(lam, c, bet) of the pair's next round (protocol.control_variate): c the mean metric
    value over its unjudged items (from the metric-only counts when it has labels only), the
    bet Kelly for s - lam (m - c) over its past uniform-draw steps; lam = 0 without a metric."""
    if pair.prediction:
        left = [v for item, v in pair.prediction.items() if item not in pair.judged_items]
        centre = float(np.mean(left)) if left else 0.0
        reach = max((abs(v - centre) for v in left), default=0.0)
    else:
        plus, _, minus = pair.metric_only
        total = sum(pair.metric_only)
        centre = (plus - minus) / total if total else 0.0
        reach = max((abs(value - centre) for value, count in zip((1, 0, -1), pair.metric_only) if count),
                    default=0.0)
    if not (pair.prediction or sum(pair.metric_only) or np.sum(pair.paired)):
        lam = 0.0          # no metric value on any item (counted without reading the labels)
    kept = set(pair.votes) if pair.votes else set(pair.judged_items)
    residual_square = cross = 0.0
    for item, value, _, rho, _, m, c in map(full_step, pair.steps):
        if item in kept and rho == 1.0:
            d = m - c
            residual_square += d * d
            cross += value * d
    wins, _, losses = (float(x) for x in pair.human_counts)
    # the reliance of this pair's round: the pooled one, half of it, or none, whichever
    # promises the pair the most growth on its past steps (a strong pair needs bets larger
    # than the cap that a large reliance imposes); ties go to less reliance
    best = (0.0, 0.0, -math.inf)
    for candidate in (0.0, lam / 2, lam) if lam else (0.0,):
        wager = cv_bet(wins, losses, residual_square, cross, candidate, reach, max_bet=max_bet)
        spread = wins + losses + candidate * candidate * residual_square - 2.0 * candidate * cross
        growth = wager * (wins - losses) - wager * wager * spread / 2.0
        if growth > best[2] + 1e-12:
            best = (candidate, wager, growth)
    return (float(best[0]), float(centre), float(best[1]))



def record_judgement(state: ProtocolState, first: str, second: str, item: str, value: int,
                     probability: float | None = None, smallest: float | None = None) -> ProtocolState:
    """Record one human judgement (value in canonical order: +1 = first better); probability:
    the chance with which the item was drawn, when items are chosen unequally (see PairState);
    smallest: the smallest chance among the candidates open at that draw."""
    return record_judgements(state, first, second, [item], [value],
                             None if probability is None else [probability],
                             None if smallest is None else [smallest])


def record_judgements(
    state: ProtocolState, first: str, second: str, items: Sequence[str], values: Sequence[int],
    probabilities: Sequence[float | None] | None = None,
    smallest: Sequence[float | None] | None = None,
) -> ProtocolState:
    """Record several human judgements of one pair; items (k,) str, values (k,) in {-1, 0, 1};
    probabilities (k,) or None: each item's selection probability at its draw (None when not
    known: a uniform draw), kept for an item's first judgement (PairState.draws);
    smallest (k,) or None: the smallest selection probability among the candidates open at
    each draw (protocol.allocation.smallest_selection_probability). An unequal draw moves the
    e-process by rho = smallest / probability of a full step (module doc); without its
    smallest chance it does not move it at all (valid, but no evidence).

    The pair must have an open round with at least k judgements missing: a decided or
    stopped pair, or one whose round is full, never receives more. Every judgement spends
    budget, but an item counts once in the decision's counts: with the label the sign of the
    mean of all its judgements (protocol.preferences.sign_of_mean_per_item), so several
    annotators of one item are not taken for independent observations.
    """
    index = pair_position(state, (first, second))
    if index is None:
        raise ValueError(f"unknown pair ({first!r}, {second!r}); pairs are in canonical order first < second")
    pair = state.pairs[index]
    items = [str(i) for i in items]
    values = [int(v) for v in np.asarray(values).ravel()] if len(values) else []
    if len(items) != len(values):
        raise ValueError(f"{len(items)} items but {len(values)} values")
    if pair.status != OPEN:
        raise ValueError(f"pair ({first}, {second}) takes no judgements now: it is {pair.status}")
    if len(items) > pair.quota:
        raise ValueError(f"pair ({first}, {second}) needs {pair.quota} more judgements in this round, got {len(items)}")
    chances = [None] * len(items) if probabilities is None else list(probabilities)
    if len(chances) != len(items):
        raise ValueError(f"{len(items)} items but {len(chances)} probabilities")
    floors = [None] * len(items) if smallest is None else list(smallest)
    if len(floors) != len(items):
        raise ValueError(f"{len(items)} items but {len(floors)} smallest probabilities")
    steps = [full_step(step) for step in pair.steps]
    stepped = sorted(steps)  # by item: where a step left by excluded judgements is found
    draws = list(pair.draws)
    paired = [list(row) for row in pair.paired]
    human_only = list(pair.human_only)
    metric_only = list(pair.metric_only)
    judged = set(pair.judged_items)
    votes = dict(pair.votes)
    log_evidence = pair.log_evidence
    for item, value, chance, floor in zip(items, values, chances, floors):
        if value not in LABEL_INDEX:
            raise ValueError(f"a judgement must be -1, 0 or 1, got {value!r} for item {item!r}")
        if chance is not None and state.settings.rule == BOUNDARY:
            raise ValueError("rule 'boundary' refuses unequal draws: its sign statistic counts every item alike, "
                             "so items chosen by separability would bias it; choose items uniformly")
        if chance is not None and item not in judged:
            if not 0 < float(chance) <= 1:
                raise ValueError(f"item {item!r}: selection probability must lie in (0, 1], got {chance!r}")
            draws.append((item, float(chance)))
        metric_value = pair.metric.get(item)
        if item not in judged:
            lam = m = c = 0.0
            if chance is None and pair.cv_basis:
                # the control variate (protocol.control_variate): lam, c and the bet were fixed
                # when the round opened; the item's own metric value enters only the increment
                lam, c, wager = pair.cv_basis
                own = cv_metric_value(pair, item)
                m = c if own is None else own       # no metric value: no metric term
            elif chance is None:
                basis = pair.round_basis or (*(x for row in pair.paired for x in row),
                                             *pair.human_only, *pair.metric_only)
                others = list(basis[12:])
                if metric_value is not None:
                    others[LABEL_INDEX[metric_value]] -= 1     # never the item's own metric label
                wager = bet(np.reshape(basis[:9], (3, 3)), basis[9:12], others[:3],
                            max_bet=state.settings.max_bet,
                            confusion=np.reshape(basis[15:24], (3, 3)) if len(basis) >= 24 else None,
                            metric_weight=state.settings.metric_weight)
            else:
                # unequal chances: a bet that is the same for every candidate of the draw
                wager = weighted_bet([v for i, v, *_ in steps if i in judged])
            rho = draw_rho(chance, floor)
            # an item judged again after all its judgements were excluded takes a new step
            at = bisect.bisect_left(stepped, (item,))
            if at < len(stepped) and stepped[at][0] == item:
                steps = [step for step in steps if step[0] != item]
            steps.append((item, value, wager, rho, lam, m, c))
            if (value != 0 or lam * (m - c) != 0) and state.settings.mixture is None:
                log_evidence += math.log(step_factor(value, wager, rho, lam, m - c))
        counts = human_only if metric_value is None else paired[LABEL_INDEX[metric_value]]
        if item in votes:
            # a further judgement of a judged item replaces the item's label, never adds one
            counts[LABEL_INDEX[sign_of(votes[item])]] -= 1
        elif item in judged:
            pass   # judged before votes were stored (old state): counted per judgement
        elif metric_value is not None:
            # An item's metric label counts as metric-only until its first human label.
            metric_only[LABEL_INDEX[metric_value]] -= 1
        if item in judged and item not in votes:
            counts[LABEL_INDEX[value]] += 1
        else:
            votes[item] = votes.get(item, 0) + value
            counts[LABEL_INDEX[sign_of(votes[item])]] += 1
        judged.add(item)
    if state.settings.mixture is not None and (steps or not pair.judgements):
        log_evidence = steps_log_evidence(steps, judged, mixture=state.settings.mixture,
                                          weighted={item for item, _ in draws})
    quota = pair.quota - len(items)
    pairs = list(state.pairs)
    pairs[index] = replace(
        pair,
        paired=tuple(tuple(row) for row in paired),
        human_only=tuple(human_only),
        metric_only=tuple(metric_only),
        judged_items=frozenset(judged),
        votes=MappingProxyType(votes),
        log_evidence=log_evidence,
        draws=tuple(draws),
        # the wealth is a product, so the steps' order is immaterial once their bets are made:
        # sorted, the state does not depend on the order a round's judgements arrived in
        steps=tuple(sorted(steps)),
        judgements=pair.judgements + len(items),
        quota=quota,
        status=OPEN if quota else FILLED,
    )
    return replace(state, pairs=tuple(pairs))


def rebuild_pairs(
    state: ProtocolState, labels: Mapping[tuple[str, str], tuple[Sequence[str], Sequence[int]]],
    chances: Mapping[tuple[str, str], Mapping[str, float | tuple[float, float]]] | None = None,
) -> ProtocolState:
    """Re-decide the given pairs from exactly the judgements given (e.g. after the judgements of
    an excluded annotator left, or came back).

    labels  (first, second) -> (items (k,), values (k,) in {-1, 0, 1}), in the order the
            judgements arrived; pairs not named are unchanged
    Each named pair forgets its counts and records its k judgements as one look (a round of
    size k, closed at once with the others in one batched decision, the study's other pairs
    in the family rule's view), so it ends decided, exhausted, futile or waiting for another
    round (``open_rounds`` funds it within the budget left); with k = 0 it waits undecided.
    Its round counter and θ history continue (the look is a round; θ gains one entry when
    k > 0). Capacity grows to k when the pair holds more judgements than it could receive (a
    re-included annotator's comparisons were served again).
    The e-process keeps its steps (PairState.steps): every item's step keeps the bet it was
    made with and takes the value of the item's first kept judgement; a step whose item has no
    kept judgement counts nothing (and counts again if a judgement of it comes back), and an
    item without a step (never recorded) takes a step at the end with a bet from the metric
    labels alone. So a rebuild with the same judgements leaves the evidence unchanged, and
    after exclusions the evidence is the product over the remaining judgements in their
    original order with the bets made at the time (valid when the exclusion does not depend
    on the pair's labels). A state stored before steps existed keeps its log_evidence.
    chances (first, second) -> {item: chance, or (chance, smallest chance among the open
            candidates)} of the items' draws, when known (the app reads them from the
            judgements' leases); otherwise the items that stay keep their recorded draw
            (PairState.draws). A design-weighted pair thus stays weighted (Des Raj's weights
            over the remaining draws: approximate once draws are removed).
    Precondition: ``state.settings.budget`` already accounts for the change (spent + reserved
    may not exceed it).
    """
    index = pair_index(state)
    pairs = list(state.pairs)
    named = []
    for key, (items, values) in sorted(labels.items()):
        if key not in index:
            raise ValueError(f"unknown pair {key!r}; pairs are in canonical order first < second")
        old = state.pairs[index[key]]
        if len(items) != len(values):
            raise ValueError(f"pair {key}: {len(items)} items but {len(values)} values")
        metric_only = _label_counts(old.metric.values())
        capacity = max(old.capacity, len(items))
        fresh = PairState(first=old.first, second=old.second, capacity=capacity, metric=old.metric,
                          prediction=old.prediction,
                          metric_only=tuple(metric_only), round=old.round, theta=old.theta,
                          status=WAITING if capacity > 0 else EXHAUSTED)
        if items:
            fresh = replace(fresh, round=old.round + 1, quota=len(items), status=OPEN,
                            round_basis=(0,) * 12 + tuple(metric_only),
                            # under the control variate an item the pair never stepped bets
                            # nothing (its step would need the round's basis, long gone)
                            cv_basis=(0.0, 0.0, 0.0) if state.settings.rule == EPROCESS
                            and state.settings.control_variate else ())
        pairs[index[key]] = fresh
        named.append(key)
    if not named:
        return state
    looked = replace(state, pairs=tuple(pairs))
    for key in named:
        old = state.pairs[index[key]]
        items, values = labels[key]
        if items:
            # the items that stay keep the chance of their draw (design weights, PairState.draws)
            chance: dict = dict(old.draws)
            if chances is not None and key in chances:
                chance = {str(item): value for item, value in chances[key].items()}
            drawn = [chance.get(str(item)) for item in items]
            looked = record_judgements(
                looked, *key, list(items), list(values),
                [c[0] if isinstance(c, (tuple, list)) else c for c in drawn],
                [c[1] if isinstance(c, (tuple, list)) else None for c in drawn])
        pair = looked.pairs[index[key]]
        steps, log_evidence = _kept_steps(old, pair, [str(i) for i in items], [int(v) for v in values],
                                          state.settings.mixture)
        pairs = list(looked.pairs)
        pairs[index[key]] = replace(pair, steps=steps, log_evidence=log_evidence)
        looked = replace(looked, pairs=tuple(pairs))
    filled = [index[key] for key in named if looked.pairs[index[key]].status == FILLED]
    result = _close(looked, filled, decide=None) if filled else looked
    check_state(result)
    return result


def _kept_steps(old: PairState, fresh: PairState, items: list[str], values: list[int], mixture: float | None):
    """(steps, log evidence) of a rebuilt pair (rebuild_pairs): the old steps with the values of
    the items' first kept judgements, then fresh steps for items the old pair never stepped."""
    if not old.steps and old.judgements:
        return (), old.log_evidence          # stored before steps existed: keep its wealth
    first_kept: dict[str, int] = {}
    for item, value in zip(items, values):
        first_kept.setdefault(item, value)
    stepped = {step[0] for step in old.steps}
    steps = [(item, first_kept.get(item, value), *rest) for item, value, *rest in map(full_step, old.steps)]
    steps += [step for step in fresh.steps if step[0] not in stepped]
    return tuple(sorted(steps)), steps_log_evidence(steps, first_kept, mixture=mixture,
                                                    weighted={item for item, _ in fresh.draws})


DecideMany = Callable[..., object]


def close_rounds(state: ProtocolState, *, force: bool = False, decide: DecideMany | None = None) -> ProtocolState:
    """Decide every filled pair in one batched call and move it on.

    force   also close open rounds that are not full (their missing judgements go back to
            the budget), e.g. when annotators have left
    decide  the batched decision function, ``decide_many(counts, *, gamma, method, seed)``
            returning ``.theta`` (P,) and ``.p_mean`` (P, 3); default protocol.decision
    """
    closing = [i for i, p in enumerate(state.pairs) if p.status == FILLED or (force and p.status == OPEN)]
    if not closing:
        return state
    return _close(state, closing, decide=decide)


def _close(state: ProtocolState, closing: list[int], *, decide: DecideMany | None) -> ProtocolState:
    """close_rounds for the pairs at ``closing`` (indices into state.pairs); under the
    e-process the family rule sees every pair of the state."""
    settings = state.settings
    counts = [pair_counts(state.pairs[i]) for i in closing]
    if settings.rule != BAYES:
        # theta does not decide under the e-process (it sizes rounds and is shown): the
        # human-only posterior, exact and instant, instead of the metric model's sampler
        counts = [PairCounts(paired=np.zeros((3, 3)), human_only=np.asarray(c.paired).sum(axis=0) + c.human_only)
                  for c in counts]
        decide = decide_closed_form
    decide = decide or default_decide
    batch = decide(
        counts,
        gamma=settings.gamma,
        method=settings.method,
        # decide_many seeds every pair by (seed, its counts): the same counts give the same
        # theta whatever else is in the batch, which keeps replays resumable and cacheable.
        seed=settings.seed,
    )
    theta = np.asarray(batch.theta, dtype=float).reshape(-1)
    p_mean = np.asarray(batch.p_mean, dtype=float).reshape(-1, 3)
    if len(theta) != len(closing) or len(p_mean) != len(closing):
        raise ValueError(f"decide returned {len(theta)} results for {len(closing)} pairs")
    levels = np.array([look_level(settings, state.pairs[i].capacity) for i in closing])
    if settings.rule == EPROCESS:
        # control across the study's pairs: every pair's e-value (stopped pairs keep theirs)
        in_family, bar = family_thresholds(family_log_e_values(state), settings.gamma, settings.family)
        decisions = [eprocess_decision(state.pairs[i], settings.gamma, threshold=-math.inf)
                     if in_family[i] else 0 for i in closing]
    elif settings.rule == BOUNDARY:
        require_whole(state, "the boundary rule's family")
        level = boundary_level(settings, len(state.pairs))
        decisions = [boundary_decision(state.pairs[i], level) for i in closing]
        if settings.family == "ebh":
            # every pair's crossing as the e-value 1 / level (stopped pairs keep theirs)
            crossed = [boundary_decision(p, level) != 0 for p in state.pairs]
            in_family, _ = family_thresholds([-math.log(level) if c else -math.inf for c in crossed],
                                             settings.gamma, "ebh")
            decisions = [d if in_family[i] else 0 for d, i in zip(decisions, closing)]
    else:
        decisions = [decision_from_theta(t, g) for t, g in zip(theta, levels)]
    futile = np.zeros(len(closing), dtype=bool)
    if settings.policy == ADAPTIVE and settings.rule == BOUNDARY:
        for j, i in enumerate(closing):
            pair = state.pairs[i]
            if decisions[j] == 0 and settings.futility > 0 and pair.remaining > 0 \
                    and pair.judgements >= settings.futility_min_judgements:
                futile[j] = not boundary_can_decide(pair, level, settings.futility)
    if settings.policy == ADAPTIVE and settings.rule == EPROCESS:
        # the family's bar can only fall to 1 / gamma (every pair decided): optimistic
        bar = math.log(1.0 / (settings.gamma * (1 - settings.final_share)))
        posteriors = {}
        if settings.futility_prior and settings.futility > 0:
            posteriors = margin_posteriors([pair_level(p) for p in state.pairs], closing,
                                           state.outside.levels if state.outside else ())
        for j, i in enumerate(closing):
            pair = state.pairs[i]
            if decisions[j] == 0 and settings.futility > 0 and pair.remaining > 0 \
                    and pair.judgements >= settings.futility_min_judgements:
                can = eprocess_can_decide(pair, settings.gamma, settings.futility, threshold=bar)
                if can and i in posteriors:
                    can = margin_can_reach(pair, posteriors[i], settings.futility, bar)
                futile[j] = not (can or final_can_reject(pair, settings))
    elif settings.policy == ADAPTIVE and settings.rule == BAYES:
        candidates = [
            j for j, i in enumerate(closing)
            if decisions[j] == 0 and settings.futility > 0 and state.pairs[i].remaining > 0
            and state.pairs[i].judgements >= settings.futility_min_judgements
        ]
        if candidates:
            chosen = [state.pairs[closing[j]] for j in candidates]
            final = final_decision_probabilities(
                [p.paired for p in chosen],
                [p.human_only for p in chosen],
                [p.metric_only for p in chosen],
                [p.remaining for p in chosen],
                levels[candidates],
                draws=settings.futility_draws,
                sweeps=settings.futility_sweeps,
                rng=np.random.default_rng([settings.seed, 3, state.closes]),
            )
            threshold = np.full(len(candidates), settings.futility)
            if settings.futility_labels_per_error > 0:
                # Stopping saves at most the remaining labels and risks an omission: late in a
                # pair the saving is small, so the risk accepted shrinks with it.
                saved = np.array([p.remaining for p in chosen], dtype=float)
                threshold = np.minimum(threshold, saved / settings.futility_labels_per_error)
            futile[candidates] = 1 - final[:, 1] < threshold
    pairs = list(state.pairs)
    for j, i in enumerate(closing):
        pair = pairs[i]
        decision = decisions[j]
        if decision != 0:
            status = DECIDED
        elif pair.remaining == 0:
            status = EXHAUSTED
        elif futile[j]:
            status = FUTILE
        else:
            status = WAITING
        pairs[i] = replace(
            pair,
            quota=0,
            status=status,
            decision=decision,
            theta=pair.theta + (float(theta[j]),),
            p_mean=tuple(float(x) for x in p_mean[j]),
            diagnostics=_batch_diagnostics(batch, j),
        )
    return replace(state, pairs=tuple(pairs), closes=state.closes + 1)



def family_log_e_values(state: ProtocolState) -> list[float]:
    """(P + m,) the log e-values the family rule reads: the state's pairs' (P, in order), then
    those a partial state leaves out (``Outside``: the ones that may pass, the others as
    -inf), m of them."""
    values = [pair_log_e_value(p, state.settings) for p in state.pairs]
    if state.outside:
        values += [*state.outside.log_e_values, *[-math.inf] * (state.outside.pairs - len(state.outside.log_e_values))]
    return values


def with_pairs(state: ProtocolState, extra: Sequence[PairState]) -> ProtocolState:
    """A partial state (``ProtocolState.outside``) with ``extra``, pairs it left out, read in:
    a design that reads only the pairs with judgements or a round asks for a few others once it
    knows which (``active_ranking.active_advance``'s ``more``: the neighbours of its fitted
    order). Each must hold no judgement and no round, so it adds nothing to the totals the
    state keeps of the pairs left out (no budget used, no control-variate moment, an e-value
    below the family's floor): those totals stand, one pair fewer each. ValueError otherwise,
    or for a whole state or a pair it already holds."""
    if state.outside is None:
        raise ValueError("with_pairs reads pairs into a partial state; this state holds every pair")
    if not extra:
        return state
    held = {p.key for p in state.pairs}
    floor = family_floor(state.settings)
    for pair in extra:
        if pair.key in held:
            raise ValueError(f"pair {pair.key} is in the state already")
        if pair.judgements or pair.quota or pair.status in (OPEN, FILLED) or \
                pair_log_e_value(pair, state.settings) >= floor:
            raise ValueError(f"pair {pair.key} holds judgements or a round: the totals of the pairs left out "
                             "count it")
    outside = replace(state.outside, pairs=state.outside.pairs - len(extra))
    return ProtocolState.from_pairs(state.settings, [*state.pairs, *extra], state.closes, outside)


def family_floor(settings: ProtocolSettings) -> float:
    """The least log e-value with which a pair can be decided under any family rule: log 1 /
    gamma (e-BH's bar m / (gamma k) and Bonferroni's m / gamma are never lower). A partial
    state's ``Outside.log_e_values`` need only the left-out pairs at or above it."""
    return math.log(1.0 / settings.gamma)


def _batch_diagnostics(batch, j: int) -> MappingProxyType:
    """The diagnostics of result j of a decide batch (defaults for a closed-form batch)."""
    method = getattr(batch, "method", None)
    ess = getattr(batch, "ess", None)
    draws = getattr(batch, "draws", None)
    se = getattr(batch, "theta_se", None)
    return frozen_diagnostics({
        "method": "closed_form" if method is None else method[j],
        "ess": None if ess is None else ess[j],
        "draws": 0 if draws is None else draws[j],
        "theta_se": 0.0 if se is None else se[j],
    })



def run_rounds(
    state: ProtocolState,
    collect: Callable[[ProtocolState, Mapping[tuple[str, str], int]], Iterable[tuple[str, str, Sequence[str], Sequence[int]]]],
    *,
    decide: DecideMany | None = None,
    on_round: Callable[[ProtocolState], None] | None = None,
    prepare: Callable[[ProtocolState], ProtocolState] | None = None,
) -> ProtocolState:
    """Drive Algorithm 2 to the end: open rounds, collect, close, until finished.

    collect(state, needed) yields (first, second, items, values) for the open rounds.

    prepare(state) -> state, when given, runs before every opening (e.g. ``calibrated``).

    The default rule (adaptive policy, betting e-process, e-BH at gamma 0.05) on two pairs of
    60 items: the humans always prefer A to B, and split A against C evenly. A-B is decided
    after 15 judgements (log wealth past log 20 = 3.0); A-C stops as futile after 25.

    >>> def collect(state, needed):
    ...     for (first, second), quota in needed.items():
    ...         done = next(p.judgements for p in state.pairs if (p.first, p.second) == (first, second))
    ...         values = [1 if second == "B" else (-1) ** i for i in range(done, done + quota)]
    ...         yield first, second, [f"item{i}" for i in range(done, done + quota)], values
    >>> state = start(ProtocolSettings(budget=200), {("A", "B"): 60, ("A", "C"): 60})
    >>> end = run_rounds(state, collect)
    >>> [(p.first, p.second, p.status, p.decision, p.judgements, round(p.log_evidence, 1)) for p in end.pairs]
    [('A', 'B', 'decided', 1, 15, 4.7), ('A', 'C', 'futile', 0, 25, -0.2)]
    """
    while not state.finished:
        if prepare is not None:
            state = prepare(state)
        state = open_rounds(state)
        want = needed(state)
        spent = state.spent
        for first, second, items, values in collect(state, want):
            state = record_judgements(state, first, second, items, values)
        if state.spent == spent:
            raise ValueError("collect returned no judgement for the open rounds; the protocol cannot advance")
        state = close_rounds(state, force=True, decide=decide)
        if on_round is not None:
            on_round(state)
    return state
