"""Rubrics: several criteria answered in one HIT, each decided by its own protocol.

A rubric study asks every annotator for a verdict on each criterion (helpfulness,
correctness, ...) of the same comparison. Each criterion is a *lane*: a full
``ProtocolState`` with its own pairs, counts, e-processes, decisions and family control
(e-BH runs within a criterion: the criteria are separate questions, each read as its own
ranking). The lanes share what the annotators spend:

* one HIT answers every criterion, so a pair's round is opened for all its undecided lanes
  at once with one quota, and the HITs served count once against the study's budget
  (``RubricState.hits``);
* a lane that has stopped (decided, exhausted, futile) takes no more judgements, while the
  pair is served as long as another of its lanes needs them; the answers it ignores stay in
  the judgements (exports), not in its counts;
* budget left = budget - HITs judged - sum over pairs of the open round's quota.

Item choice is the app's, per pair, so an item is served once for all its criteria. The
error guarantee of each lane is that of its rule (protocol.rules): which lanes are open
depends only on lanes' own past decisions, and a lane's e-process sees its own labels of
items drawn without looking at any criterion's labels.

A single criterion is one lane and every function here is then exactly the machine's.

Shapes: ``criteria`` (C,), ``lanes`` (C,) each with the same P pairs in the same order,
``hits`` (P,).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from . import machine
from .rules import round_size
from .state import FILLED, OPEN, WAITING, PairState, ProtocolSettings, ProtocolState, require_whole


@dataclass(frozen=True)
class RubricState:
    """The protocol state of a rubric study: one lane per criterion, HITs per pair."""

    criteria: tuple[str, ...]
    lanes: tuple[ProtocolState, ...]
    hits: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.criteria or len(self.criteria) != len(self.lanes):
            raise ValueError(f"{len(self.criteria)} criteria but {len(self.lanes)} lanes")
        if len(set(self.criteria)) != len(self.criteria):
            raise ValueError(f"criteria must be distinct, got {list(self.criteria)}")
        if len(self.hits) != len(self.lanes[0].pairs):
            raise ValueError(f"{len(self.lanes[0].pairs)} pairs but {len(self.hits)} HIT counts")
        if len(self.lanes) == 1:
            return  # one criterion: its HITs are its judgements (``single``, the codec)
        keys = [p.key for p in self.lanes[0].pairs]
        for name, lane in zip(self.criteria, self.lanes):
            if [p.key for p in lane.pairs] != keys:
                raise ValueError(f"criterion {name!r} has other pairs than {self.criteria[0]!r}")
            for pair, hits in zip(lane.pairs, self.hits):
                if pair.judgements > hits:
                    raise ValueError(f"pair {pair.key} holds {pair.judgements} judgements of {name!r} "
                                     f"but only {hits} HITs")

    @property
    def primary(self) -> ProtocolState:
        """The first criterion's lane: the one the study's summary columns show."""
        return self.lanes[0]

    @property
    def settings(self) -> ProtocolSettings:
        return self.lanes[0].settings

    @property
    def closes(self) -> int:
        return self.lanes[0].closes

    @property
    def keys(self) -> list[tuple[str, str]]:
        return [p.key for p in self.lanes[0].pairs]

    def lane(self, criterion: str) -> ProtocolState:
        if criterion not in self.criteria:
            raise ValueError(f"unknown criterion {criterion!r}; the study's are {list(self.criteria)}")
        return self.lanes[self.criteria.index(criterion)]

    def lane_pairs(self, index: int) -> tuple[PairState, ...]:
        """Pair ``index`` in every lane (C,)."""
        return tuple(lane.pairs[index] for lane in self.lanes)

    def quota(self, index: int) -> int:
        """HITs pair ``index``'s open round still needs (its open lanes share one quota)."""
        return max(p.quota for p in self.lane_pairs(index))

    def status(self, index: int) -> str:
        """Pair ``index``'s serving status: open while any lane takes judgements, filled while
        any waits for its close, waiting while any waits for a round, else the first lane's."""
        statuses = [p.status for p in self.lane_pairs(index)]
        for status in (OPEN, FILLED, WAITING):
            if status in statuses:
                return status
        return statuses[0]

    @property
    def spent(self) -> int:
        return sum(self.hits)

    @property
    def reserved(self) -> int:
        return sum(self.quota(i) for i in range(len(self.hits)))

    @property
    def budget_left(self) -> int:
        """Budget neither spent nor reserved, over every pair of the study: a partial state's
        left-out pairs take its first lane's ``outside.used`` (HITs and quotas)."""
        outside = self.lanes[0].outside
        return self.settings.budget - self.spent - self.reserved - (outside.used if outside else 0)

    @property
    def finished(self) -> bool:
        """No round open or filled in any lane, and no waiting lane can be funded any more."""
        require_whole(self.lanes[0], "finished")
        statuses = {self.status(i) for i in range(len(self.hits))}
        if statuses & {OPEN, FILLED}:
            return False
        return self.budget_left <= 0 or WAITING not in statuses


def with_settings(state: RubricState, settings: ProtocolSettings) -> RubricState:
    """The same state under other settings (e.g. a changed budget), in every lane."""
    return replace(state, lanes=tuple(replace(lane, settings=settings) for lane in state.lanes))


def single(state: ProtocolState, criterion: str = "") -> RubricState:
    """A one-criterion study's state as a rubric (HITs = the lane's judgements)."""
    return RubricState((criterion,), (state,), tuple(p.judgements for p in state.pairs))


def with_pairs(state: RubricState, extra: Sequence[PairState]) -> RubricState:
    """A one-criterion partial state with ``extra``, pairs it left out with no judgement and no
    round, read in (``machine.with_pairs``)."""
    if len(state.lanes) != 1:
        raise ValueError("with_pairs reads pairs into a one-criterion state")
    return single(machine.with_pairs(state.primary, extra), state.criteria[0])


def start(
    settings: ProtocolSettings,
    criteria: Sequence[str],
    capacities: Mapping[tuple[str, str], int],
    metrics: Mapping[str, Mapping[tuple[str, str], Mapping[str, int]] | None],
    counts: Mapping[str, Mapping[tuple[str, str], Sequence[int]] | None] | None = None,
) -> RubricState:
    """A fresh rubric: every lane waiting (``machine.start`` per criterion).

    metrics  criterion -> the metric labels of its lane (as machine.start); a criterion without
             a metric (None or missing) runs human-only
    counts   criterion -> its lane's ``metric_counts`` (as machine.start), when counted apart
    """
    counts = counts or {}
    lanes = tuple(machine.start(settings, capacities, metrics.get(name), metric_counts=counts.get(name))
                  for name in criteria)
    return RubricState(tuple(criteria), lanes, (0,) * len(lanes[0].pairs))


def open_rounds(state: RubricState) -> RubricState:
    """Open one round per pair for all its waiting lanes, within the budget left.

    A pair with a lane open or filled waits for it. Its round asks for the largest round any
    of its waiting lanes asks for (``machine.round_size``), at most what each can still
    receive; the budget is shared out as ``machine.fund_rounds`` does, closeness being the
    largest |theta - 1/2| over the waiting lanes.
    """
    if len(state.lanes) == 1:
        return single(machine.open_rounds(state.primary), state.criteria[0])
    quotas, lanes_of = _round_quotas(state)
    if not quotas:
        return state
    lanes = tuple(
        machine.open_pairs(lane, {i: q for i, q in quotas.items() if c in lanes_of[i]})
        for c, lane in enumerate(state.lanes))
    return replace(state, lanes=lanes)


def opening(state: RubricState) -> tuple[frozenset[int], ...]:
    """Each lane's pairs (indices) that ``open_rounds`` opens a round for now. The funding reads
    no prediction, so a caller can calibrate just these first (``machine.calibrated``'s ``only``)."""
    if len(state.lanes) == 1:
        return (frozenset(machine.round_quotas(state.primary)),)
    quotas, lanes_of = _round_quotas(state)
    return tuple(frozenset(i for i in quotas if c in lanes_of[i]) for c in range(len(state.lanes)))


def _round_quotas(state: RubricState) -> tuple[dict[int, int], dict[int, list[int]]]:
    """``open_rounds``' funding of a rubric of several lanes: pair index -> its round's quota,
    and pair index -> the lanes that open it."""
    asks, closeness, lanes_of = {}, {}, {}
    for i in range(len(state.hits)):
        pairs = state.lane_pairs(i)
        if any(p.status in (OPEN, FILLED) for p in pairs):
            continue
        waiting = [c for c, p in enumerate(pairs) if p.status == WAITING]
        if not waiting:
            continue
        asks[i] = min(max(round_size(state.lanes[c].settings, pairs[c]) for c in waiting),
                      min(pairs[c].remaining for c in waiting))
        closeness[i] = max(abs(pairs[c].theta[-1] - 0.5) if pairs[c].theta else 0.0 for c in waiting)
        lanes_of[i] = waiting
    if not asks:
        return {}, lanes_of
    return machine.fund_rounds(state.settings, state.closes, asks, closeness, state.budget_left), lanes_of


def record_judgements(
    state: RubricState, first: str, second: str, items: Sequence[str],
    answers: Sequence[Mapping[str, int]],
    probabilities: Sequence[float | None] | None = None,
    smallest: Sequence[float | None] | None = None,
) -> RubricState:
    """Record HITs of one pair: answers (k,) criterion -> value in {-1, 0, 1} (canonical order).

    Every lane of the pair that is open records its criterion's values
    (``machine.record_judgements``, with the draws' chances); lanes that have stopped ignore
    theirs. Each HIT counts once. ValueError when no lane of the pair is open, or an answer
    lacks an open lane's criterion.
    """
    keys = state.keys
    if (first, second) not in keys:
        raise ValueError(f"unknown pair ({first!r}, {second!r}); pairs are in canonical order first < second")
    index = keys.index((first, second))
    if len(items) != len(answers):
        raise ValueError(f"{len(items)} items but {len(answers)} answers")
    open_lanes = [c for c, p in enumerate(state.lane_pairs(index)) if p.status == OPEN]
    if not open_lanes:
        raise ValueError(f"pair ({first}, {second}) takes no judgements now: it is {state.status(index)}")
    lanes = list(state.lanes)
    for c in open_lanes:
        name = state.criteria[c]
        missing = [item for item, answer in zip(items, answers) if name not in answer]
        if missing:
            raise ValueError(f"criterion {name!r} has no answer for item {missing[0]!r}")
        lanes[c] = machine.record_judgements(lanes[c], first, second, items, [a[name] for a in answers],
                                             probabilities, smallest)
    hits = list(state.hits)
    hits[index] += len(items)
    return replace(state, lanes=tuple(lanes), hits=tuple(hits))


def close_rounds(state: RubricState, *, force: bool = False, decide: machine.DecideMany | None = None) -> RubricState:
    """``machine.close_rounds`` in every lane (each lane's family rule sees its own pairs); the
    lanes keep one count of closes, the study's, raised once when any lane closed a round."""
    lanes = tuple(machine.close_rounds(lane, force=force, decide=decide) for lane in state.lanes)
    closes = state.closes + 1 if any(a.closes != b.closes for a, b in zip(lanes, state.lanes)) else state.closes
    return replace(state, lanes=tuple(replace(lane, closes=closes) for lane in lanes))


def seed_judgements(state: RubricState,
                    existing: Mapping[tuple[str, str], Sequence[tuple[str, Mapping[str, int]]]]) -> RubricState:
    """Record judgements collected before the protocol started as one closed round per pair.

    existing  (first, second) -> [(item, {criterion: value})] in arrival order; a pair takes at
              most what it can receive (its first ones)
    Each lane's e-process takes the pair's judgements in short rounds, as live rounds would take
    them: before each, the pair's bets are made again from the judgements recorded before it
    (``machine.rebet_pairs``, the basis ``open_pairs`` makes), so an item's step bets on what the
    pair's earlier items showed, never on its own labels or later ones. A round takes
    max(1, recorded // IMPORT_ROUND_SHARE) judgements: the first bets see every label before
    them, later ones lag by at most that share of the pair's labels, and a start makes
    O(log n) rounds, not n. (Recorded as one round, the bets were all made before any label:
    every bet was 0, and a study imported with all its judgements, PandaLM's, decided nothing.)
    The items come in an order drawn from the protocol's seed (``import_order``), as a live
    round draws them: uniformly, whatever the labels or the metric say, which the e-process's
    validity needs (docs/formulas.md, section 8); an item's judgements keep their arrival order
    (its first is its step's, as rebuilds keep it). The pairs are then closed as one look.
    """
    lanes = []
    for lane in state.lanes:
        pairs = list(lane.pairs)
        for index, pair in enumerate(pairs):
            labels = existing.get(pair.key)
            if labels:
                pairs[index] = replace(pair, round=1, quota=min(len(labels), pair.remaining), status=OPEN)
        lanes.append(replace(lane, pairs=tuple(pairs)))
    state = replace(state, lanes=tuple(lanes))
    keys = state.keys
    position = {key: index for index, key in enumerate(keys)}
    queues = {position[key]: import_order(labels[:state.quota(position[key])], state.settings.seed, position[key])
              for key, labels in sorted(existing.items()) if labels}
    # Every pair has recorded the same number of judgements at each round (or all of its own),
    # so the rounds of all pairs go together: the pooled parts of a bet (the control variate's
    # reliance, the pooled confusion) are computed once per round, from the rounds before.
    recorded, longest = 0, max(map(len, queues.values()), default=0)
    while recorded < longest:
        size = max(1, recorded // IMPORT_ROUND_SHARE)
        turn = [index for index, labels in queues.items() if recorded < len(labels)]
        state = replace(state, lanes=tuple(machine.rebet_pairs(lane, turn) for lane in state.lanes))
        for index in turn:
            items, answers = zip(*queues[index][recorded:recorded + size])
            state = record_judgements(state, *keys[index], list(items), list(answers))
        recorded += size
    return close_rounds(state)


# seed_judgements' rounds: each takes 1 / IMPORT_ROUND_SHARE of the judgements recorded before it
# (at least one): bets at most an eighth of the labels stale, O(log n) rounds.
IMPORT_ROUND_SHARE = 8


def import_order(labels: Sequence[tuple[str, Mapping[str, int]]], seed: int, index: int) -> list:
    """A pair's judgements (item, answer) in the order ``seed_judgements`` records them: its items
    (sorted) permuted by a draw from (seed, the pair's index), each item's judgements together in
    their arrival order. Neither the draw nor the items' order reads a label, a metric value or
    the bundle's order of lines (a file sorted by preference would give the e-process a drift
    no null has)."""
    by_item: dict[str, list] = {}
    for item, answer in labels:
        by_item.setdefault(item, []).append((item, answer))
    items = sorted(by_item)
    drawn = np.random.default_rng([seed, IMPORT_STREAM, index]).permutation(len(items))
    return [label for k in drawn for label in by_item[items[k]]]


# The random stream of the import order (machine's draws take 1 and 3).
IMPORT_STREAM = 19


def rebuild_pairs(
    state: RubricState,
    labels: Mapping[tuple[str, str], tuple[Sequence[str], Sequence[Mapping[str, int]]]],
    chances: Mapping[tuple[str, str], Mapping[str, float | tuple[float, float]]] | None = None,
) -> RubricState:
    """Re-decide the given pairs from exactly the HITs given (``machine.rebuild_pairs`` in every
    lane, each with its criterion's values; the pair's HITs become len(items)).

    labels  (first, second) -> (items (k,), answers (k,) criterion -> value), in arrival order
    Every lane of a rebuilt pair takes all k answers, including those given while it had
    stopped (they are judgements of its criterion like any other).
    """
    lanes = []
    for name, lane in zip(state.criteria, state.lanes):
        mine = {}
        for key, (items, answers) in labels.items():
            missing = [item for item, answer in zip(items, answers) if name not in answer]
            if missing:
                raise ValueError(f"pair {key}: criterion {name!r} has no answer for item {missing[0]!r}")
            mine[key] = (list(items), [a[name] for a in answers])
        lanes.append(machine.rebuild_pairs(lane, mine, chances))
    keys = state.keys
    hits = list(state.hits)
    for key, (items, _) in labels.items():
        hits[keys.index(key)] = len(items)
    closes = max(lane.closes for lane in lanes)
    return replace(state, lanes=tuple(replace(lane, closes=closes) for lane in lanes), hits=tuple(hits))


def pair_changed(before: RubricState, after: RubricState, index: int) -> bool:
    """Does pair ``index`` differ between two states of one study (any lane, or its HITs)?"""
    return before.hits[index] != after.hits[index] or any(
        _differs(b.pairs[index], a.pairs[index]) for b, a in zip(before.lanes, after.lanes))


def changed_pairs(before: RubricState, after: RubricState) -> list[int]:
    """The indices of the pairs that differ between two states of one study (``pair_changed``),
    in one pass: a close or a submit changes a few of a study's pairs and leaves the others the
    same objects, which are not compared field by field (1,225 pairs at 50 systems)."""
    lanes = tuple(zip(before.lanes, after.lanes))
    return [index for index in range(len(before.hits)) if before.hits[index] != after.hits[index]
            or any(_differs(b.pairs[index], a.pairs[index]) for b, a in lanes)]


def _differs(old: PairState, new: PairState) -> bool:
    return old is not new and old != new


__all__ = ["RubricState", "close_rounds", "open_rounds", "opening", "changed_pairs", "pair_changed", "rebuild_pairs", "record_judgements",
           "import_order", "seed_judgements", "single", "start", "with_pairs", "with_settings"]
