"""A ranking, not every pair: the sort design for studies of many systems (issue 22).

The all-pairs protocol decides all k (k - 1) / 2 pairs, so its human budget grows with k^2.
A ranking needs far fewer decisions: this design runs a merge sort over the systems in which
every comparison is one pair decided by the protocol's own per-pair sequential rule (the
anytime-valid betting e-process, ``ProtocolSettings(policy="adaptive", rule="eprocess")``,
protocol.adaptive), and lets the decided pairs imply the others by transitivity.

The sort
--------
Top-down merge sort over the systems in a given initial order (the caller's: a seeded
shuffle for a human-only study, the metric's order when there is a metric; a good initial
order saves comparisons but never changes the error statement). A comparison asks the
protocol to decide the pair: +1 / -1 when its e-process reaches 1 / level, or undecided (0)
when the pair stops without a decision (futility stop, or its items or its per-pair budget
run out). An undecided comparison is ordered by the sign of its human margin (the earlier
system of the initial order on a zero margin), so the sort always finishes, but it is no
decision. Each merge first compares the two halves' boundary, the last system of the upper
half with the first of the lower: when the upper one wins, the halves are already in order
and the merge costs that one comparison; otherwise it merges from the front as usual (the
boundary's outcome is reused when the merge reaches that pair). On the metric's order, whose
halves are mostly in order already, the sort then asks for little more than the k - 1
neighbours of the order. The merge sort
  * never asks for a pair whose order is implied by earlier comparisons (its two systems come
    from different halves, never compared before, directly or transitively);
  * decides at most ``planned_decisions(k)`` = C(k) pairs, C(1) = 0,
    C(k) = C(a) + C(b) + (a + b when both halves have two systems or more, else a + b - 1),
    a = ceil(k/2), b = floor(k/2) (= 254 at k = 50 against 1,225 pairs): a merge runs at
    most a + b - 1 comparisons and its boundary, which a merge with a single system on one
    side always reaches; an initial order already in order needs k - 1;
  * outputs an order that respects every comparison it made, and every two neighbours of the
    output were compared directly (the winner of a merge step is always compared with the
    next system it passes; halves kept in order were compared at their boundary).
The comparisons of one level of the recursion are independent, so many pairs are in flight
at once: ``sort_plan`` replays the sort from the outcomes known so far and returns the pairs
that need deciding now (a resumable plan; the outcomes are the only state).

Error control
-------------
``error="fwer"`` (default): every pair run decides at level gamma / m, m = ``settings.planned(k)``
fixed before any data (C(k); plus 2 (k - 1) refinement runs in the two-stage variant). A pair's
e-process wrongly reaches 1 / level with probability at most level (Ville, at any looks), and
whether the sort runs a pair depends only on other pairs' outcomes, so the expected number of
wrong decisions is at most level x runs <= gamma, and when all direct decisions are right so
is every pair they imply (the truth is an order):

    P(any pair of the reported partial order, direct or implied, is wrong) <= gamma.

This assumes a pair's labels say nothing about other pairs' labels beyond the truth (separate
judgements); the two-stage refinement of a pair depends on its own sort run, which the bound
does not cover exactly (measured, docs/ranking-results.md). ``error="per_pair"``: each run at level
gamma, as the all-pairs protocol decides each pair; no family-wise bound, and one false direct
decision can carry into implied pairs.

The result is a partial order: the decided pairs and their transitive closure; systems whose
pairs stay undecided are tied at the study's resolution (``max_labels``: most labels a pair
may take; 0 = all of its items). ``tiers`` groups the consecutive systems of the order whose
neighbour pair is undecided (neighbours were compared directly, so no implication can
separate them either).

Two-stage variant (``sort_labels`` > 0): the sort's runs are capped at ``sort_labels``
labels; then every pair of neighbours in the order that no decision orders gets one full run
(the pairs adjacent or uncertain in the current order), reversals found move the systems, and
the new neighbours are looked at (``ranking_plan``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType, SimpleNamespace

import numpy as np

from .adaptive import (
    PARKED,
    STOPPED,
    WAITING,
    PairState,
    ProtocolSettings,
    ProtocolState,
    close_rounds,
    needed,
    open_rounds,
    record_judgements,
    start,
    theta_closed_form,
)
from .machine import with_pairs
from .state import require_whole

ERRORS = ("fwer", "per_pair")
SORT, REFINE, DONE = "sort", "refine", "done"
STAGES = (SORT, REFINE)
Pair = tuple[int, int]


@dataclass(frozen=True)
class RankingSettings:
    """How a ranking study spends its human labels.

    gamma        error level of the whole ranking ("fwer") or of each pair ("per_pair")
    error        "fwer" (every pair at level gamma / planned_decisions) or "per_pair" (gamma)
    sort_labels  most human labels a comparison of the sort stage may take (0 = no cap and
                 no refinement stage: one stage, every comparison run to its end)
    max_labels   most human labels a pair run may take (0 = all of its items): the study's
                 resolution; with a capped sort stage it caps the refinement runs only
    batch        largest round of a pair (the protocol's ``batch``)
    seed         seed of the protocol (rounds, and the item order the replays draw)
    futility     the pair runs' futility level (the protocol's ``futility``: a study's setting)
    """

    gamma: float = 0.05
    error: str = "fwer"
    sort_labels: int = 0
    max_labels: int = 0
    batch: int = 50
    seed: int = 0
    futility: float = ProtocolSettings.futility

    def __post_init__(self) -> None:
        if not (isinstance(self.gamma, (int, float)) and 0 < self.gamma < 1):
            raise ValueError(f"gamma must lie strictly between 0 and 1, got {self.gamma!r}")
        if self.error not in ERRORS:
            raise ValueError(f"error must be one of {ERRORS}, got {self.error!r}")
        for name, low in (("sort_labels", 0), ("max_labels", 0), ("batch", 1), ("seed", 0)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        # the futility level is the pair protocol's: its own check names what is wrong
        ProtocolSettings(budget=0, futility=self.futility)

    @property
    def refines(self) -> bool:
        return self.sort_labels > 0

    def planned(self, systems: int) -> int:
        """Most pair runs of a study of ``systems`` systems: the sort's worst case, plus
        2 (k - 1) refinement runs when the sort stage is capped."""
        return planned_decisions(systems) + (refine_limit(systems) if self.refines else 0)

    def level(self, systems: int) -> float:
        """The level every pair run is decided at, for a study of ``systems`` systems."""
        if self.error == "per_pair":
            return float(self.gamma)
        return float(self.gamma) / max(1, self.planned(systems))

    def capacity(self, stage: str, items: int) -> int:
        """Labels a pair run of ``stage`` ("sort" or "refine") may take, of its ``items``."""
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        cap = self.sort_labels if stage == SORT and self.refines else self.max_labels
        return min(items, cap) if cap else items

    def protocol(self, systems: int, capacity: int) -> ProtocolSettings:
        """The per-pair protocol settings: the adaptive policy with the e-process rule, at the
        study's futility level."""
        return ProtocolSettings(budget=int(capacity), batch=self.batch, gamma=self.level(systems),
                                policy="adaptive", rule="eprocess", seed=self.seed, futility=self.futility)


def planned_decisions(systems: int) -> int:
    """Most pairs the merge sort of ``systems`` systems compares (its worst case, whatever
    the outcomes), C(k): the count the family-wise level divides gamma by."""
    if systems < 0:
        raise ValueError(f"systems must not be negative, got {systems}")
    if systems <= 1:
        return 0
    upper = systems - systems // 2
    lower = systems // 2
    merge = systems if min(upper, lower) >= 2 else systems - 1
    return planned_decisions(upper) + planned_decisions(lower) + merge


def refine_limit(systems: int) -> int:
    """Most refinement runs: twice the neighbours of the order (a reversal found by one
    refinement gives the moved systems new neighbours)."""
    return 2 * max(0, systems - 1)


@dataclass(frozen=True)
class PairOutcome:
    """A pair's result from the protocol, oriented as asked (+1 = the first system better).

    decision  +1 / -1 when the e-process decided, 0 when the pair stopped undecided
    margin    human wins minus losses of the first system over the pair's judged items
    labels    human judgements the pair took
    status    the protocol's final status (decided, futile, exhausted)
    """

    decision: int
    margin: int
    labels: int
    status: str

    def __post_init__(self) -> None:
        if self.decision not in (-1, 0, 1):
            raise ValueError(f"decision must be -1, 0 or 1, got {self.decision!r}")
        if self.labels < 0:
            raise ValueError(f"labels must not be negative, got {self.labels!r}")

    def flipped(self) -> PairOutcome:
        return PairOutcome(-self.decision, -self.margin, self.labels, self.status)

    @property
    def prefers_first(self) -> bool:
        """The sort's direction: the decision, else the margin, else the first system."""
        if self.decision:
            return self.decision > 0
        return self.margin >= 0


def human_theta(counts, *, gamma, method, seed):
    """theta from the human counts alone (conjugate, instant). Under the e-process rule theta
    only sizes the next round, so the sort does not pay the metric model's sampler per round."""
    human = np.array([np.asarray(c.paired).sum(axis=0) + np.asarray(c.human_only) for c in counts],
                     dtype=float).reshape(-1, 3)
    return SimpleNamespace(theta=theta_closed_form(human),
                           p_mean=(human + 1) / (human.sum(axis=1, keepdims=True) + 3))


def decide_pair(labels, *, settings: ProtocolSettings, order=None, metric=None) -> PairOutcome:
    """Run the protocol on one pair until it stops, drawing its items in ``order``.

    labels    (T,) human label of every item in {-1, 0, 1} (+1 = first system better)
    order     item indices in the order they are judged (default: 0..T-1); its length is the
              pair's capacity (``settings.budget`` caps it too)
    metric    (T,) metric labels in {-1, 0, 1}, or None (human only): the e-process bets on
              them (protocol.adaptive.bet), which can sharpen but never invalidate the test
    """
    labels = np.asarray(labels).reshape(-1)
    order = np.arange(len(labels)) if order is None else np.asarray(order, dtype=np.int64).reshape(-1)
    if len(order) and (order.min() < 0 or order.max() >= len(labels)):
        raise ValueError(f"item order must index the {len(labels)} labels")
    if len(np.unique(order)) != len(order):
        raise ValueError("item order must not repeat an item")
    order = order[: settings.budget]
    key = ("a", "b")
    metric_map = None
    if metric is not None:
        metric = np.asarray(metric).reshape(-1)
        if metric.shape != labels.shape:
            raise ValueError(f"{len(metric)} metric labels for {len(labels)} items")
        metric_map = {key: {str(t): int(metric[t]) for t in range(len(metric))}}
    state = start(settings, {key: len(order)}, metric_map)
    drawn = 0
    while not state.finished:
        state = open_rounds(state)
        want = needed(state).get(key, 0)
        if want == 0:
            break
        chosen = order[drawn: drawn + want]
        drawn += want
        state = record_judgements(state, *key, [str(t) for t in chosen], labels[chosen])
        state = close_rounds(state, force=True, decide=human_theta)
    return pair_outcome(state.pairs[0])


def pair_outcome(pair: PairState) -> PairOutcome:
    """A protocol pair's outcome, oriented as its key (+1 = ``pair.first`` better)."""
    counts = pair.human_counts
    return PairOutcome(decision=int(pair.decision), margin=int(counts[0] - counts[2]),
                       labels=int(pair.judgements), status=pair.status)


@dataclass(frozen=True)
class SortPlan:
    """Where the merge sort stands given the outcomes known so far.

    pending  pairs (i, j), i < j positions in the initial order, the sort needs decided now
    order    positions best first when the sort is complete, else None
    """

    pending: tuple[Pair, ...]
    order: tuple[int, ...] | None

    @property
    def complete(self) -> bool:
        return self.order is not None


def sort_plan(systems: int, outcomes: Mapping[Pair, PairOutcome]) -> SortPlan:
    """Replay the merge sort of positions 0..systems-1 from ``outcomes`` ((i, j) with i < j,
    oriented +1 = position i better) and return the pairs it waits for, or the order."""
    pending: list[Pair] = []

    def above(x: int, y: int) -> bool | None:
        """Whether x goes above y by their comparison; None (and pending) before it ran."""
        key = (x, y) if x < y else (y, x)
        outcome = outcomes.get(key)
        if outcome is None:
            pending.append(key)
            return None
        return outcome.prefers_first == (x < y)

    def sort(lo: int, hi: int) -> list[int] | None:
        if hi - lo <= 1:
            return list(range(lo, hi))
        mid = lo + (hi - lo + 1) // 2   # the upper half takes ceil: planned_decisions' split
        upper, lower = sort(lo, mid), sort(mid, hi)
        if upper is None or lower is None:
            return None
        in_order = above(upper[-1], lower[0])
        if in_order is None:
            return None
        if in_order:
            return upper + lower
        merged, a, b = [], 0, 0
        while a < len(upper) and b < len(lower):
            first = above(upper[a], lower[b])
            if first is None:
                return None
            if first:
                merged.append(upper[a])
                a += 1
            else:
                merged.append(lower[b])
                b += 1
        return merged + upper[a:] + lower[b:]

    order = sort(0, systems)
    return SortPlan(pending=tuple(sorted(pending)), order=None if order is None else tuple(order))


def closure(systems: int, wins: Sequence[Pair]) -> np.ndarray:
    """(S, S) bool: [i, j] when i is above j through a chain of the given (winner, loser)
    pairs, taken in the given order; a pair contradicting the chains already there (it would
    close a cycle: some decision is false) is left out."""
    reach = np.zeros((systems, systems), dtype=bool)
    for winner, loser in wins:
        if winner == loser or reach[loser, winner] or reach[winner, loser]:
            continue
        above = reach[:, winner].copy()
        above[winner] = True
        below = reach[loser, :].copy()
        below[loser] = True
        reach |= above[:, None] & below[None, :]
    return reach


def _wins(outcomes: Mapping[Pair, PairOutcome]) -> list[Pair]:
    return [(i, j) if o.decision > 0 else (j, i) for (i, j), o in sorted(outcomes.items()) if o.decision]


def _merged(sorted_: Mapping[Pair, PairOutcome], refined: Mapping[Pair, PairOutcome]) -> dict[Pair, PairOutcome]:
    """Every pair's latest outcome: its refinement run when it has one."""
    return {**sorted_, **refined}


def _extension(order: Sequence[int], above: np.ndarray) -> list[int]:
    """The linear extension of ``above`` closest to ``order``: repeatedly the earliest system
    of ``order`` that no remaining system is above (Kahn's algorithm by position)."""
    remaining = list(order)
    out = []
    while remaining:
        for n, candidate in enumerate(remaining):
            if not any(above[other, candidate] for other in remaining if other != candidate):
                out.append(remaining.pop(n))
                break
    return out


@dataclass(frozen=True)
class RankingPlan:
    """Where a ranking study stands given the outcomes known so far.

    stage    "sort" (the capped merge sort runs), "refine" (neighbours of the order not yet
             ordered by a decision get a full run) or "done"
    pending  pairs (i, j), i < j positions in the initial order, to run now in ``stage``
    order    positions, best first, once the sort stage is complete (else None)
    """

    stage: str
    pending: tuple[Pair, ...]
    order: tuple[int, ...] | None

    @property
    def complete(self) -> bool:
        return self.stage == DONE


def ranking_plan(systems: int, sorted_: Mapping[Pair, PairOutcome], refined: Mapping[Pair, PairOutcome],
                 settings: RankingSettings) -> RankingPlan:
    """Replay the ranking design from the outcomes known so far (the outcomes are its only
    state): ``sorted_`` of the sort stage's runs, ``refined`` of the refinement runs, keys
    (i, j) positions with i < j, +1 = position i better.

    Sort stage: the merge sort of ``sort_plan`` over the sort runs. Refinement stage (when
    ``settings.sort_labels`` caps the sort's runs): every pair of neighbours in the current
    order that no decision orders, direct or implied, and that had no refinement run yet, is
    run again with the refinement cap; the order then becomes the linear extension of all
    decisions closest to it (a reversal found moves the two systems), and the new neighbours
    are looked at, until no such pair is left or ``refine_limit`` runs were made.
    """
    plan = sort_plan(systems, sorted_)
    if not plan.complete:
        return RankingPlan(SORT, plan.pending, None)
    order = list(plan.order)
    if not settings.refines:
        return RankingPlan(DONE, (), tuple(order))
    limit = refine_limit(systems)
    used: set[Pair] = set()
    while True:
        above = closure(systems, _wins(_merged(sorted_, {k: v for k, v in refined.items() if k in used})))
        order = _extension(order, above)
        wanted = []
        for upper, lower in zip(order, order[1:]):
            key = (upper, lower) if upper < lower else (lower, upper)
            if not above[upper, lower] and key not in used:
                wanted.append(key)
        wanted = wanted[: limit - len(used)]
        if not wanted:
            return RankingPlan(DONE, (), tuple(order))
        missing = tuple(sorted(key for key in wanted if key not in refined))
        if missing:
            return RankingPlan(REFINE, missing, tuple(order))
        used.update(wanted)


@dataclass(frozen=True)
class RankingResult:
    """The ranking of one study.

    systems   (S,) names in the initial order (positions index them)
    order     names, best first (a linear extension of every decision, and of the sort's
              undecided comparisons where no decision says otherwise)
    above     (S, S) bool over positions: [i, j] when i is decided above j, directly or by
              transitivity: the reported partial order
    tiers     names grouped into consecutive runs of the order whose neighbour pairs are not
              ordered by a decision (tied at the study's resolution), best tier first
    outcomes  (i, j) positions, i < j -> the pair's latest PairOutcome (refinement over sort)
    spent     (i, j) -> human labels the pair took (a refined pair reuses its sort-stage
              labels: its runs draw its items in one order, so it costs the longer run)
    labels    human labels spent in total
    runs      pair runs made (sort and refinement): what the error statement counts
    level     the level every run was decided at
    """

    systems: tuple[str, ...]
    order: tuple[str, ...]
    above: np.ndarray
    tiers: tuple[tuple[str, ...], ...]
    outcomes: Mapping[Pair, PairOutcome]
    spent: Mapping[Pair, int]
    labels: int
    runs: int
    level: float

    @property
    def decided(self) -> int:
        """Pairs decided directly."""
        return sum(1 for o in self.outcomes.values() if o.decision)

    @property
    def implied(self) -> int:
        """Pairs ordered by the partial order (direct and implied)."""
        return int(self.above.sum())

    def decisions(self) -> dict[tuple[str, str], int]:
        """Every pair of names (canonical: first < second) -> +1 / -1 / 0 from the partial
        order (0 = tied at the resolution)."""
        out = {}
        for i, a in enumerate(self.systems):
            for j, b in enumerate(self.systems):
                if a < b:
                    out[(a, b)] = 1 if self.above[i, j] else -1 if self.above[j, i] else 0
        return out


def ranking_result(systems: Sequence[str], plan: RankingPlan, sorted_: Mapping[Pair, PairOutcome],
                   refined: Mapping[Pair, PairOutcome], level: float) -> RankingResult:
    """Assemble the result of a complete plan."""
    if not plan.complete:
        raise ValueError(f"the ranking is not complete: {len(plan.pending)} pairs wait in its {plan.stage} stage")
    systems = tuple(systems)
    outcomes = _merged(sorted_, refined)
    above = closure(len(systems), _wins(outcomes))
    order = plan.order
    tiers, current = [], [order[0]] if len(order) else []
    for upper, lower in zip(order, order[1:]):
        if above[upper, lower]:
            tiers.append(current)
            current = [lower]
        else:
            current.append(lower)
    if current:
        tiers.append(current)
    spent = {key: max(sorted_[key].labels if key in sorted_ else 0, refined[key].labels if key in refined else 0)
             for key in outcomes}
    return RankingResult(
        systems=systems,
        order=tuple(systems[i] for i in order),
        above=above,
        tiers=tuple(tuple(systems[i] for i in tier) for tier in tiers),
        outcomes=MappingProxyType(outcomes),
        spent=MappingProxyType(spent),
        labels=int(sum(spent.values())),
        runs=len(sorted_) + len(refined),
        level=float(level),
    )


def rank(systems: Sequence[str], compare: Callable[[int, int, str], PairOutcome], settings: RankingSettings,
         ) -> RankingResult:
    """Run the design to the end, asking ``compare(i, j, stage)`` (positions, i < j; +1 = i
    better; stage "sort" or "refine", whose cap is ``settings.capacity(stage, items)``) for
    each pair the plan waits for: a synchronous driver for replays and scripts (the app opens
    protocol rounds for ``ranking_plan(...).pending`` instead)."""
    systems = tuple(systems)
    if len(set(systems)) != len(systems):
        raise ValueError("system names must be unique")
    runs: dict[str, dict[Pair, PairOutcome]] = {SORT: {}, REFINE: {}}
    while True:
        plan = ranking_plan(len(systems), runs[SORT], runs[REFINE], settings)
        if plan.complete:
            break
        for pair in plan.pending:
            outcome = compare(*pair, plan.stage)
            if not isinstance(outcome, PairOutcome):
                raise ValueError(f"compare{pair} must return a PairOutcome, got {type(outcome).__name__}")
            runs[plan.stage][pair] = outcome
    return ranking_result(systems, plan, runs[SORT], runs[REFINE], settings.level(len(systems)))


def item_order(seed: int, first: int, second: int, items: int, cap: int = 0) -> np.ndarray:
    """The seeded order in which a replay judges a pair's items: uniform without replacement,
    like the app's allocation; ``cap`` > 0 keeps its first ``cap`` items. The order depends on
    the unordered pair only, so a pair's refinement run continues on its sort run's items."""
    lo, hi = min(first, second), max(first, second)
    order = np.random.default_rng([seed, 11, lo, hi]).permutation(items)
    return order[:cap] if cap else order


def start_order(systems: int, *, seed: int, scores=None) -> np.ndarray:
    """The sort's initial order (system indices, best first): by ``scores`` (S,) descending,
    ties by index, when given (the metric's mean score per system), else a seeded shuffle."""
    if scores is not None:
        scores = np.asarray(scores, dtype=float).reshape(-1)
        if len(scores) != systems or not np.all(np.isfinite(scores)):
            raise ValueError(f"scores must be {systems} finite numbers, one per system")
        return np.lexsort((np.arange(systems), -scores))
    return np.random.default_rng([seed, 13]).permutation(systems)


# The design inside the app: the sort over a protocol state -------------------------------
# The app keeps one ProtocolState of all k (k - 1) / 2 pairs (one criterion, the e-process at
# ``RankingSettings.level``, family "none"). A pair the sort has not asked for is PARKED, which
# ``open_rounds`` never funds; after every close the sort is replayed from the stopped pairs'
# outcomes (``sort_advance``) and the pairs it asks for wait for their first round. One stage
# only: every run goes to its end (sort_labels = 0).

def start_positions(pairs: Sequence[PairState], order: Sequence[str], *, some: bool = False) -> dict[str, int]:
    """Each system's position in ``order`` (a ranking design's initial order), which must name
    every system of ``pairs`` once, and no other (``some``: ``pairs`` are some of the study's,
    a partial state's, and may leave systems out)."""
    position = {name: n for n, name in enumerate(order)}
    if len(position) != len(order):
        raise ValueError("the ranking's initial order names a system twice")
    named = {name for p in pairs for name in p.key}
    if (not named <= set(position)) if some else named != set(position):
        missing, extra = sorted(named - set(position)), sorted(set(position) - named)
        raise ValueError(f"the ranking's initial order does not match the study's systems "
                         f"(missing {missing}, unknown {extra})")
    return position


def _sort_key(pair: PairState, position: Mapping[str, int]) -> tuple[Pair, bool]:
    """The pair's (i, j) positions, i < j, and whether its key's first system is position i."""
    a, b = position[pair.first], position[pair.second]
    return ((a, b), True) if a < b else ((b, a), False)


def sort_outcomes(pairs: Sequence[PairState], order: Sequence[str], *, some: bool = False) -> dict[Pair, PairOutcome]:
    """The outcomes of the stopped pairs that ran, keyed by positions in ``order`` ((i, j),
    i < j, +1 = position i better). A pair stopped without ever being asked for (no items:
    capacity 0) is one too: its outcome is an undecided comparison with margin 0. ``some``:
    ``pairs`` are some of the study's (a partial state's, holding every pair not parked)."""
    position = start_positions(pairs, order, some=some)
    outcomes = {}
    for pair in pairs:
        if pair.status in STOPPED:
            key, as_keyed = _sort_key(pair, position)
            outcome = pair_outcome(pair)
            outcomes[key] = outcome if as_keyed else outcome.flipped()
    return outcomes


# A comparison the sort asked for when its planned runs were all spent: not run, so no
# decision (the two systems share a tier unless other decisions order them).
NOT_RUN = "not_run"


def _asked(pairs: Sequence[PairState]) -> list[PairState]:
    """The pair runs so far: the pairs the sort asked for (not parked) that have items."""
    return [p for p in pairs if p.status != PARKED and p.capacity > 0]


def _sort_within_plan(pairs: Sequence[PairState], order: Sequence[str], *,
                      some: bool = False) -> tuple[SortPlan, dict, set]:
    """Replay the sort from the stopped pairs' outcomes within its planned runs.

    Returns (the plan, the outcomes it was replayed from, the parked pairs (keys) to run now).
    The runs never exceed ``planned_decisions(k)``, the count the error statement divides γ by:
    the sort asks for at most that many pairs, but a re-decision after an exclusion can change
    an outcome and so the sort's path; a parked pair it then asks for beyond the planned runs
    is not run and counts as an undecided comparison (``NOT_RUN``, margin 0). ``some``:
    ``pairs`` hold every pair of the study that is not parked; a pair they lack is parked."""
    outcomes = sort_outcomes(pairs, order, some=some)
    by_key = {p.key: p for p in pairs}
    left = planned_decisions(len(order)) - len(_asked(pairs))
    while True:
        plan = sort_plan(len(order), outcomes)
        parked = []
        for i, j in plan.pending:
            key = (order[i], order[j]) if order[i] < order[j] else (order[j], order[i])
            held = by_key.get(key)
            if (held.status == PARKED) if held is not None else some:
                parked.append(((i, j), key))
        if len(parked) <= left:
            return plan, outcomes, {key for _, key in parked}
        for (i, j), _ in parked[left:]:
            outcomes[(i, j)] = PairOutcome(decision=0, margin=0, labels=0, status=NOT_RUN)
        if left:
            return sort_plan(len(order), outcomes), outcomes, {key for _, key in parked[:left]}


def sort_advance(state: ProtocolState, order: Sequence[str],
                 more: Callable[[list[tuple[str, str]]], Sequence[PairState]] | None = None) -> ProtocolState:
    """Let the pairs the sort asks for now wait for a round (PARKED -> WAITING).

    order  system names, the sort's initial order (``start_order``), fixed for the study
    more   for a partial state (``ProtocolState.outside``) that holds every pair not parked
           or with a judgement, the others being parked with none (the app's round close
           reads no more: issue 41): ``more(keys)`` -> the pairs of ``keys`` (canonical
           (first, second)) that it leaves out. The replay needs only the stopped pairs'
           outcomes and the count of pairs run, all in such a state; the parked pairs it asks
           for that the state lacks are read in (``machine.with_pairs``), so the result holds
           them and is, pair for pair, the whole state's
    Replays the merge sort from the stopped pairs' outcomes (``sort_plan``): the pairs it waits
    for that are parked become waiting (``open_rounds`` funds them within the budget), as long
    as the runs stay within ``planned_decisions(k)`` (``_sort_within_plan``); those already
    running stay as they are. Unchanged when the sort waits for running pairs only or is
    complete (then the parked pairs stay parked: the order implies or does not need them).
    """
    partial = state.outside is not None
    if partial and more is None:
        require_whole(state, "the merge sort's replay (or ``more``: the pairs it leaves out)")
    _, _, wanted = _sort_within_plan(state.pairs, order, some=partial)
    if partial:
        held = {p.key for p in state.pairs}
        lacking = sorted(wanted - held)
        extra = list(more(lacking)) if lacking else []
        if sorted(p.key for p in extra) != lacking:
            raise ValueError(f"more gave other pairs than the {len(lacking)} asked for")
        if extra:
            state = with_pairs(state, extra)
    pairs = tuple(replace(p, status=WAITING) if p.status == PARKED and p.key in wanted else p for p in state.pairs)
    return state if pairs == state.pairs else replace(state, pairs=pairs)


def sort_start(state: ProtocolState, order: Sequence[str], *, max_labels: int = 0) -> ProtocolState:
    """Park every waiting pair of a fresh state, then let the sort's first pairs wait.

    max_labels  most human judgements a comparison may take, the study's resolution
                (``RankingSettings.max_labels`` of the replays): every pair's capacity is
                capped at it, so a run still undecided then stops (exhausted, or futile
                earlier) and is a tie; 0 = all of its items
    ValueError when a pair already holds judgements (imported with the bundle): the design
    decides only the pairs its sort asks for, each at the level its error statement counts."""
    held = [p.key for p in state.pairs if p.judgements]
    if held:
        raise ValueError(f"the ranking design starts with no human judgements; {len(held)} pairs hold some "
                         f"(first: {held[0]}): use the all-pairs design for a bundle with judgements")
    if not isinstance(max_labels, int) or isinstance(max_labels, bool) or max_labels < 0:
        raise ValueError(f"max_labels must be an integer >= 0, got {max_labels!r}")
    start_positions(state.pairs, order)
    parked = tuple(replace(p, status=PARKED, capacity=min(p.capacity, max_labels) if max_labels else p.capacity)
                   if p.status == WAITING else p for p in state.pairs)
    return sort_advance(replace(state, pairs=parked), order)


@dataclass(frozen=True)
class SortProgress:
    """Where a ranking study stands (the app's dashboard).

    systems   (S,) names in the initial order (positions index them)
    planned   C(S): most pairs the sort runs (its error statement's count)
    runs      pairs asked for so far (not parked), items permitting
    running   pairs asked for and not stopped yet, (first, second) names
    above     (S, S) bool over positions: the partial order of the decisions so far (with
              their transitive closure)
    labels    human judgements of the pairs asked for
    level     the level every pair is decided at
    result    the ranking once the sort is complete (order, tiers), else None
    """

    systems: tuple[str, ...]
    planned: int
    runs: int
    running: tuple[tuple[str, str], ...]
    above: np.ndarray
    labels: int
    level: float
    result: RankingResult | None

    @property
    def complete(self) -> bool:
        return self.result is not None

    @property
    def error_bound(self) -> float:
        """The bound on P(any wrong pair in the partial order): level x pairs run, <= gamma
        (the runs never exceed the plan, ``_sort_within_plan``)."""
        return min(1.0, self.level * self.runs)


def sort_progress(pairs: Sequence[PairState], order: Sequence[str], level: float) -> SortProgress:
    """The ranking study's progress and, once the sort is complete, its result."""
    order = tuple(order)
    plan, outcomes, _ = _sort_within_plan(pairs, order)
    asked = _asked(pairs)
    result = None
    if plan.complete:
        result = ranking_result(order, RankingPlan(DONE, (), plan.order), outcomes, {}, level)
    return SortProgress(
        systems=order, planned=planned_decisions(len(order)), runs=len(asked),
        running=tuple(p.key for p in asked if p.status not in STOPPED),
        above=closure(len(order), _wins(outcomes)), labels=sum(p.judgements for p in asked),
        level=float(level), result=result)


def describe(settings: RankingSettings, systems: int) -> str:
    """One sentence of the error statement, for reports."""
    level = settings.level(systems)
    if settings.error == "fwer":
        return (f"each pair run at level {settings.gamma} / {settings.planned(systems)} = {level:.2g}: "
                f"P(any wrong pair in the partial order) <= {settings.gamma}")
    return f"each pair run at level {settings.gamma}: per-pair error <= {settings.gamma} (no family-wise bound)"
