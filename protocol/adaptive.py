"""The budgeted protocol (correction-of-errors §4, Alg. 2; SPEC §5) as a resumable state machine.

Judgements trickle in from many annotators, so the protocol is data that advances one
judgement at a time and that the web app persists (``ProtocolState.to_dict`` gives JSON-able
dicts, one per pair for PairState). The cycle for every system pair is

    waiting --open_rounds--> open --record_judgement x quota--> filled --close_rounds--> ...

and ``close_rounds`` runs the decision function on all filled pairs at once (one batched
``decide_many`` call), then marks each pair ``decided`` (±1), ``exhausted`` (no human label
left to collect), ``futile`` (adaptive policy: a ± decision has become unlikely) or puts it
back to ``waiting`` for another round. Rounds are per pair, so the app can close a pair as
soon as its round fills; a replay that opens, fills and closes all pairs together is exactly
Algorithm 2.

Counts are sums and the judged items a set, so the order in which the judgements of a round
arrive does not matter. Everything random is seeded from ``ProtocolSettings.seed``: the
decision sampler per pair by (seed, the pair's counts), the budget order in a tight round and
the futility simulation by (seed, closes so far); a state restored from its dict continues
exactly as the uninterrupted one.
How items are chosen is not this module's business (the app uses ``protocol.allocation``;
the replay in ``protocol.simulate`` draws them).

Policies
--------
``paper``     Algorithm 2: every undecided pair gets ``batch`` new judgements per round; a pair
              stops only on a ± decision or when its items run out; all stop when the budget is
              spent. When the budget cannot fund every pair's round, the pairs that get it are
              drawn at random (seeded).
``adaptive``  ours; the same decision function, three rules on top (defaults in brackets):
              * futility stop — a pair that closes a round undecided with at least
                ``futility_min_judgements`` (20) judgements is stopped with decision 0 when the
                posterior predictive probability that the human-only decision on ALL its
                labels is ±1 is below min(``futility`` (0.05), remaining /
                ``futility_labels_per_error`` (500)). The predictive draws p ~ Dir(n + 1)
                (``futility_sweeps`` > 0 first moves p towards the metric labels of the
                unjudged items by data-augmentation Gibbs sweeps), the remaining R labels
                ~ Multinomial(R, p), and takes theta in closed form. The second term of the
                threshold accepts less risk late, when stopping saves little. Ties under the
                full human evaluation (a quarter of SummEval pairs) otherwise take 100 % of
                their labels; among futility stops on SummEval ~4 % turn out to be omissions,
                within the 5 % the threshold allows.
              * round sizing — the first round asks ``first_round`` (5) labels: a clear winner
                is decided from 5 unanimous labels (theta = 1 - 2^-6). Later rounds ask the
                labels the pair is expected to need, between ``min_round`` (5) and ``batch``:
                z = Phi^-1(theta) grows like sqrt(n) along the current evidence, so reaching
                z* = Phi^-1(1 - level/2) takes about n ((z*/z)^2 - 1) more.
              * when the budget cannot fund every round, pairs closest to a decision
                (largest |theta - 1/2|) go first.
              Items stay the app's (or the replay's uniform) choice: a choice driven by the
              metric would bias the human counts that the decision function treats as a
              random sample of the pair's items.
              Measured on SummEval (4 criteria x {bert_score_f, rougel_f, none} x 5 seeds,
              batch 10): 0.79x the paper policy's annotations on average (at most 0.905x),
              correct 0.012 lower on average (at worst 0.042), no inversion in any run
              (docs/results.md, scripts/report/protocol_results.py).

Error control at the stated level (``rule="eprocess"``)
-------------------------------------------------------
Every pair carries a betting e-process over its items in the order they were judged:
wealth K starts at 1 and every newly judged item with a non-tie human label s in {+1, -1}
multiplies it by (1 + b s). The bet b in [-MAX_BET, MAX_BET] is predictable: it is the Kelly
bet 2 r - 1 for r = P(+ | not a tie) estimated from the counts when the item's round opened
(so the order within a round does not matter) and the metric labels of the pair's OTHER
items (paired confusion, +1 smoothed, imputes the human labels of
the metric-only items; the judged item's own metric label is left out, because under a null
its human and metric labels flip together). When the two systems are exchangeable within
items (the item-flipping null of ``protocol.simulate``), the sign of the next item's human
label is a fair coin independent of b, so K is a nonnegative martingale and by Ville's
inequality P(K ever reaches 1/gamma) <= gamma: with ``rule="eprocess"`` a pair is decided
± (the sign of its human margin) when log K >= log(1 / gamma), at any number of looks and
any round sizes, futility stops included. The metric makes the bets sharp early (few
labels to a decision when it agrees with the humans) and cannot make the test invalid, only
weaker when it misleads. Only an item's first judgement moves K (later ones are fair coins
too, but not independent of the first).

Error control (``strict``)
--------------------------
Checking after every round is a group-sequential test: with K looks the chance of a false ±
decision on a pair without a difference is well above gamma (measured on null SummEval
pairs: 0.18 without, 0.22 with bert_score_f, at gamma = 0.05). ``strict=True`` splits gamma
over the pair's largest possible number of looks K (paper: ceil(capacity / batch);
adaptive: one ``first_round`` look, then rounds of ``batch``, as round sizing is switched
off under strict):
``spending="bonferroni"`` (default) decides at level gamma / K per look; by the union bound
the chance of any false ± is at most gamma whatever the dependence between looks (measured:
0.037 / 0.033 with bert_score_f). ``spending="pocock"`` uses Pocock's constant nominal level,
exact for the normal approximation of the sign statistic and cheaper (K = 10: 0.0106 instead
of 0.005); measured 0.05 without a metric but 0.065-0.073 with bert_score_f, so it is not the
default. Either costs annotations and omissions against the full evaluation at level gamma;
``protocol.simulate`` measures both.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType

import numpy as np
from scipy.special import betainc, ndtri

PAPER = "paper"
ADAPTIVE = "adaptive"
POLICIES = (PAPER, ADAPTIVE)

WAITING = "waiting"      # undecided, no round open (start, or not funded yet)
OPEN = "open"            # round open, judgements still missing
FILLED = "filled"        # round complete, waiting for close_rounds
DECIDED = "decided"      # ±1 decision, stops
EXHAUSTED = "exhausted"  # undecided and no human label left to collect
FUTILE = "futile"        # adaptive policy: stopped, a ± decision is unlikely
STATUSES = (WAITING, OPEN, FILLED, DECIDED, EXHAUSTED, FUTILE)
STOPPED = (DECIDED, EXHAUSTED, FUTILE)

METHODS = ("fast", "nuts")
RULES = ("bayes", "eprocess")
#: largest |bet| of the e-process: a wrong bet then keeps 1 - 0.6 of the wealth
MAX_BET = 0.6
SPENDING = ("bonferroni", "pocock")
_LABEL_INDEX = {1: 0, 0: 1, -1: 2}  # class order (+, =, -)


@dataclass(frozen=True)
class ProtocolSettings:
    """Parameters of one protocol run (stored with the state).

    budget                  human judgements the protocol may spend in total
    batch                   judgements per pair and round (the paper's N)
    gamma                   decision level: ±1 when theta > 1 - gamma/2 or < gamma/2
    policy                  "paper" or "adaptive" (see module docstring)
    strict                  split gamma over the looks (false ± rate <= gamma, see module doc)
    rule                    "bayes" (theta thresholds, SPEC §4) or "eprocess" (anytime-valid
                            betting e-process; false ± rate <= gamma at any looks, module doc)
    spending                under strict: "bonferroni" (gamma / K per look) or "pocock"
    futility                adaptive: stop when P(± on all labels) is below this ...
    futility_labels_per_error  ... and below remaining labels / this (0 = no such term)
    futility_min_judgements adaptive: no futility stop before this many judgements of a pair
    min_round, first_round  adaptive: smallest later round, size of the first round
    futility_draws          posterior predictive draws for the futility probability
    futility_sweeps         Gibbs sweeps pulling the predictive towards the metric (0 = human only)
    method                  decision sampler, "fast" or "nuts" (protocol.decision)
    seed                    seed of everything random in the protocol
    """

    budget: int
    batch: int = 10
    gamma: float = 0.05
    policy: str = PAPER
    strict: bool = False
    spending: str = "bonferroni"
    rule: str = "bayes"
    futility: float = 0.05
    futility_labels_per_error: float = 500.0
    futility_min_judgements: int = 20
    min_round: int = 5
    first_round: int = 5
    futility_draws: int = 2000
    futility_sweeps: int = 0
    method: str = "fast"
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("budget", "futility_min_judgements", "futility_sweeps", "seed"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        for name in ("batch", "futility_draws", "min_round", "first_round"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (isinstance(self.gamma, (int, float)) and 0 < self.gamma < 1):
            raise ValueError(f"gamma must lie strictly between 0 and 1, got {self.gamma!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (isinstance(self.futility, (int, float)) and 0 <= self.futility < 1):
            raise ValueError(f"futility must lie in [0, 1), got {self.futility!r}")
        if not (isinstance(self.futility_labels_per_error, (int, float)) and self.futility_labels_per_error >= 0):
            raise ValueError(f"futility_labels_per_error must be >= 0, got {self.futility_labels_per_error!r}")
        if self.spending not in SPENDING:
            raise ValueError(f"spending must be one of {SPENDING}, got {self.spending!r}")
        if not isinstance(self.strict, bool):
            raise ValueError(f"strict must be True or False, got {self.strict!r}")
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {self.rule!r}")


@dataclass(frozen=True)
class PairState:
    """Protocol state of one system pair (canonical order: first < second).

    capacity      human judgements this pair can ever receive (items x ratings per item)
    metric        item -> metric label in {-1, 0, 1}, all known from the start (read-only)
    paired        (3, 3) counts, metric label rows x human label columns, order (+, =, -):
                  judged items with a metric label, each counted once with its human label
                  (the sign of the mean of its judgements: the item is the unit)
    human_only    (3,) judged items without a metric label, by human label
    metric_only   (3,) metric labels of items without any human judgement yet
    judged_items  items with at least one human judgement
    votes         item -> sum of its judgements (their mean's sign is the item's label)
    judgements    human judgements recorded
    round         rounds opened for this pair
    quota         judgements still missing in the open round
    status        one of STATUSES
    decision      last decision, -1/0/+1
    theta         theta after every closed round, oldest first
    p_mean        (3,) posterior mean of (p+, p=, p-) at the last close, or None
    log_evidence  log wealth of the pair's betting e-process (module doc), 0 at the start
    round_basis   the 15 counts (paired, human_only, metric_only) when the open round opened:
                  every bet of a round is made from them, so the order of a round's
                  judgements does not matter
    diagnostics   how the last close computed theta, or None: {"method": one of
                  protocol.decision.METHODS, "ess": effective sample size (None when exact),
                  "draws": posterior draws, "theta_se": Monte-Carlo standard error}
    draws         (item, selection probability) of every judged item's first judgement, in
                  the order they arrived, when items are chosen with unequal probabilities
                  (separability-weighted or stratified choice; protocol.allocation). When
                  every judged item has one, the decision counts each item with its design
                  weight (protocol.allocation.design_weights), so it decides for all the
                  pair's items rather than for the over-sampled ones (pair_counts).
    """

    first: str
    second: str
    capacity: int
    metric: Mapping[str, int]
    paired: tuple[tuple[int, int, int], ...] = ((0, 0, 0), (0, 0, 0), (0, 0, 0))
    human_only: tuple[int, int, int] = (0, 0, 0)
    metric_only: tuple[int, int, int] = (0, 0, 0)
    judged_items: frozenset[str] = field(default_factory=frozenset)
    votes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    judgements: int = 0
    round: int = 0
    quota: int = 0
    status: str = WAITING
    decision: int = 0
    theta: tuple[float, ...] = ()
    p_mean: tuple[float, float, float] | None = None
    diagnostics: Mapping | None = None
    log_evidence: float = 0.0
    round_basis: tuple[int, ...] = ()
    draws: tuple[tuple[str, float], ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.first, self.second)

    @property
    def remaining(self) -> int:
        """Judgements this pair can still receive (capacity minus recorded)."""
        return self.capacity - self.judgements

    @property
    def human_counts(self) -> np.ndarray:
        """(3,) all human judgements of the pair, order (+, =, -)."""
        return np.asarray(self.paired).sum(axis=0) + np.asarray(self.human_only)

    def to_dict(self) -> dict:
        """JSON-able dict (what the app stores in PairState)."""
        return {
            "first": self.first,
            "second": self.second,
            "capacity": int(self.capacity),
            "metric": dict(sorted(self.metric.items())),
            "paired": [list(row) for row in self.paired],
            "human_only": list(self.human_only),
            "metric_only": list(self.metric_only),
            "judged_items": sorted(self.judged_items),
            "votes": dict(sorted(self.votes.items())),
            "judgements": int(self.judgements),
            "round": int(self.round),
            "quota": int(self.quota),
            "status": self.status,
            "decision": int(self.decision),
            "theta": [float(t) for t in self.theta],
            "p_mean": None if self.p_mean is None else [float(p) for p in self.p_mean],
            "diagnostics": None if self.diagnostics is None else dict(self.diagnostics),
            "log_evidence": float(self.log_evidence),
            "round_basis": list(self.round_basis),
            "draws": [[item, float(chance)] for item, chance in self.draws],
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> PairState:
        try:
            state = cls(
                first=str(data["first"]),
                second=str(data["second"]),
                capacity=int(data["capacity"]),
                metric=MappingProxyType({str(k): int(v) for k, v in data["metric"].items()}),
                paired=tuple(tuple(int(x) for x in row) for row in data["paired"]),
                human_only=tuple(int(x) for x in data["human_only"]),
                metric_only=tuple(int(x) for x in data["metric_only"]),
                judged_items=frozenset(str(i) for i in data["judged_items"]),
                # states stored before votes existed counted every judgement (see record)
                votes=MappingProxyType({str(k): int(v) for k, v in data.get("votes", {}).items()}),
                judgements=int(data["judgements"]),
                round=int(data["round"]),
                quota=int(data["quota"]),
                status=str(data["status"]),
                decision=int(data["decision"]),
                theta=tuple(float(t) for t in data["theta"]),
                p_mean=None if data["p_mean"] is None else tuple(float(p) for p in data["p_mean"]),
                # states stored before diagnostics existed have none
                diagnostics=_diagnostics(data.get("diagnostics")),
                log_evidence=float(data.get("log_evidence", 0.0)),
                round_basis=tuple(int(x) for x in data.get("round_basis", ())),
                # states stored before draws were recorded have none (unweighted counts)
                draws=tuple((str(item), float(chance)) for item, chance in data.get("draws", ())),
            )
        except KeyError as missing:
            raise ValueError(f"pair state is missing the field {missing}") from None
        _check_pair_state(state)
        return state


def _check_pair_state(state: PairState) -> None:
    name = f"pair ({state.first}, {state.second})"
    if state.status not in STATUSES:
        raise ValueError(f"{name}: unknown status {state.status!r}")
    if np.asarray(state.paired).shape != (3, 3) or len(state.human_only) != 3 or len(state.metric_only) != 3:
        raise ValueError(f"{name}: paired must be 3x3, human_only and metric_only 3 counts")
    if min(np.min(state.paired), min(state.human_only), min(state.metric_only)) < 0:
        raise ValueError(f"{name}: counts must not be negative")
    if state.decision not in (-1, 0, 1):
        raise ValueError(f"{name}: decision must be -1, 0 or 1, got {state.decision}")
    if not 0 <= state.judgements <= state.capacity:
        raise ValueError(f"{name}: {state.judgements} judgements for capacity {state.capacity}")
    counted = int(np.sum(state.paired)) + sum(state.human_only)
    if state.judgements < len(state.judged_items) or (state.judgements and not state.judged_items) \
            or sum(abs(v) for v in state.votes.values()) > state.judgements:
        raise ValueError(f"{name}: counts do not add up to {state.judgements} judgements")
    if set(state.votes) == set(state.judged_items):
        if counted != len(state.votes):
            raise ValueError(f"{name}: counts do not add up to {len(state.votes)} judged items")
    elif not set(state.votes) <= set(state.judged_items) or counted > state.judgements:
        # a state stored before votes existed counted every judgement
        raise ValueError(f"{name}: counts do not add up to {state.judgements} judgements")
    if state.quota < 0 or (state.quota > 0) != (state.status == OPEN):
        raise ValueError(f"{name}: quota {state.quota} does not fit status {state.status!r}")
    drawn = [item for item, _ in state.draws]
    if len(set(drawn)) != len(drawn) or not set(drawn) <= set(state.judged_items) \
            or not all(0 < chance <= 1 for _, chance in state.draws):
        raise ValueError(f"{name}: draws must name judged items once each, with probabilities in (0, 1]")


@dataclass(frozen=True)
class ProtocolState:
    """The whole protocol: settings, one PairState per pair (sorted), closes done so far."""

    settings: ProtocolSettings
    pairs: tuple[PairState, ...]
    closes: int = 0

    @property
    def spent(self) -> int:
        """Human judgements recorded over all pairs."""
        return sum(p.judgements for p in self.pairs)

    @property
    def reserved(self) -> int:
        """Judgements promised to open rounds but not yet recorded."""
        return sum(p.quota for p in self.pairs)

    @property
    def budget_left(self) -> int:
        """Budget neither spent nor reserved by an open round."""
        return self.settings.budget - self.spent - self.reserved

    @property
    def finished(self) -> bool:
        """No round open or filled, and no waiting pair can be funded any more."""
        if any(p.status in (OPEN, FILLED) for p in self.pairs):
            return False
        return self.budget_left == 0 or not any(p.status == WAITING for p in self.pairs)

    def pair(self, first: str, second: str) -> PairState:
        index = _index(self).get((first, second))
        if index is None:
            raise ValueError(f"unknown pair ({first!r}, {second!r}); pairs are in canonical order first < second")
        return self.pairs[index]

    def decisions(self) -> dict[tuple[str, str], int]:
        return {p.key: p.decision for p in self.pairs}

    def to_dict(self) -> dict:
        return {"settings": asdict(self.settings), "closes": self.closes, "pairs": [p.to_dict() for p in self.pairs]}

    @classmethod
    def from_pairs(cls, settings: ProtocolSettings, pairs: Sequence[PairState], closes: int = 0) -> ProtocolState:
        """The state of ``pairs`` (each valid, e.g. from PairState.from_dict; any order), validated
        as a whole like ``from_dict`` (unique pairs, budget not overspent)."""
        state = cls(settings, tuple(sorted(pairs, key=lambda p: p.key)), int(closes))
        _check_state(state)
        return state

    @classmethod
    def from_dict(cls, data: Mapping) -> ProtocolState:
        try:
            settings = ProtocolSettings(**data["settings"])
            pairs = tuple(PairState.from_dict(p) for p in data["pairs"])
            closes = int(data["closes"])
        except KeyError as missing:
            raise ValueError(f"protocol state is missing the field {missing}") from None
        except TypeError as error:
            raise ValueError(f"protocol settings are malformed: {error}") from None
        state = cls(settings, pairs, closes)
        _check_state(state)
        return state


def _index(state: ProtocolState) -> dict[tuple[str, str], int]:
    return {p.key: i for i, p in enumerate(state.pairs)}


def _check_state(state: ProtocolState) -> None:
    keys = [p.key for p in state.pairs]
    if keys != sorted(set(keys)):
        raise ValueError("pairs must be unique and sorted by (first, second)")
    if state.budget_left < 0:
        raise ValueError(
            f"state overspends its budget: {state.spent} spent + {state.reserved} reserved > {state.settings.budget}"
        )


def start(
    settings: ProtocolSettings,
    capacities: Mapping[tuple[str, str], int],
    metric: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
) -> ProtocolState:
    """A fresh protocol: every pair waiting, no judgement.

    capacities  (first, second) -> human judgements the pair can receive; first < second
    metric      (first, second) -> {item: metric label in -1/0/1}; None or a missing pair
                means no metric (the human-only protocol)
    """
    metric = metric or {}
    extra = set(metric) - set(capacities)
    if extra:
        raise ValueError(f"metric labels for pairs without a capacity: {sorted(extra)[:3]}")
    pairs = []
    for (first, second), capacity in sorted(capacities.items()):
        if not first < second:
            raise ValueError(f"pair ({first!r}, {second!r}) is not in canonical order first < second")
        if not isinstance(capacity, (int, np.integer)) or capacity < 0:
            raise ValueError(f"capacity of ({first}, {second}) must be a non-negative integer, got {capacity!r}")
        labels = {str(item): int(value) for item, value in metric.get((first, second), {}).items()}
        bad = [item for item, value in labels.items() if value not in _LABEL_INDEX]
        if bad:
            raise ValueError(f"metric labels of ({first}, {second}) must be -1, 0 or 1; item {bad[0]!r} is not")
        metric_only = [0, 0, 0]
        for value in labels.values():
            metric_only[_LABEL_INDEX[value]] += 1
        pairs.append(
            PairState(
                first=first,
                second=second,
                capacity=int(capacity),
                metric=MappingProxyType(labels),
                metric_only=tuple(metric_only),
                status=WAITING if capacity > 0 else EXHAUSTED,
            )
        )
    return ProtocolState(settings, tuple(pairs))


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
    waiting = [i for i, p in enumerate(state.pairs) if p.status == WAITING]
    if not waiting:
        return state
    budget = state.budget_left
    asks = {i: min(round_size(state.settings, state.pairs[i]), state.pairs[i].remaining) for i in waiting}
    if sum(asks.values()) > budget:
        if state.settings.policy == ADAPTIVE:
            closeness = {i: abs(state.pairs[i].theta[-1] - 0.5) if state.pairs[i].theta else 0.0 for i in waiting}
            waiting.sort(key=lambda i: (-closeness[i], i))
        else:
            order = np.random.default_rng([state.settings.seed, 1, state.closes]).permutation(len(waiting))
            waiting = [waiting[j] for j in order]
    pairs = list(state.pairs)
    for i in waiting:
        quota = min(asks[i], budget)
        if quota <= 0:
            break
        budget -= quota
        p = pairs[i]
        basis = (*(x for row in p.paired for x in row), *p.human_only, *p.metric_only)
        pairs[i] = replace(p, quota=quota, round=p.round + 1, status=OPEN, round_basis=basis)
    return replace(state, pairs=tuple(pairs))


def round_size(settings: ProtocolSettings, pair: PairState) -> int:
    """Judgements to ask for in the pair's next round (before capping by what remains).

    paper: always ``batch``. adaptive with ``min_round < batch``: a pair whose theta is
    heading for a threshold gets just the labels it is expected to need, never fewer than
    ``min_round``: on the straight line of the current evidence, z = Phi^-1(theta) grows like
    sqrt(judgements), so reaching z* = Phi^-1(1 - level/2) takes about
    judgements * ((z* / z)^2 - 1) more labels.
    """
    if settings.policy != ADAPTIVE:
        return settings.batch
    if not pair.theta:
        return min(settings.first_round, settings.batch)
    if settings.min_round >= settings.batch or settings.strict:
        # strict spends its level over a fixed number of looks, so rounds keep their size
        return settings.batch
    z = abs(float(ndtri(min(max(pair.theta[-1], 1e-12), 1 - 1e-12))))
    target = float(ndtri(1 - look_level(settings, pair.capacity) / 2))
    if z < 1e-6:
        return settings.batch
    expected = pair.judgements * ((target / z) ** 2 - 1)
    return int(min(settings.batch, max(settings.min_round, math.ceil(expected))))


def record_judgement(state: ProtocolState, first: str, second: str, item: str, value: int,
                     probability: float | None = None) -> ProtocolState:
    """Record one human judgement (value in canonical order: +1 = first better); probability:
    the chance with which the item was drawn, when items are chosen unequally (see PairState)."""
    return record_judgements(state, first, second, [item], [value],
                             None if probability is None else [probability])


def record_judgements(
    state: ProtocolState, first: str, second: str, items: Sequence[str], values: Sequence[int],
    probabilities: Sequence[float | None] | None = None,
) -> ProtocolState:
    """Record several human judgements of one pair; items (k,) str, values (k,) in {-1, 0, 1};
    probabilities (k,) or None: each item's selection probability at its draw (None when not
    known), kept for an item's first judgement (PairState.draws).

    The pair must have an open round with at least k judgements missing: a decided or
    stopped pair, or one whose round is full, never receives more. Every judgement spends
    budget, but an item counts once in the decision's counts: with the label the sign of the
    mean of all its judgements (protocol.preferences.sign_of_mean_per_item), so several
    annotators of one item are not taken for independent observations.
    """
    index = _index(state).get((first, second))
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
    draws = list(pair.draws)
    paired = [list(row) for row in pair.paired]
    human_only = list(pair.human_only)
    metric_only = list(pair.metric_only)
    judged = set(pair.judged_items)
    votes = dict(pair.votes)
    log_evidence = pair.log_evidence
    for item, value, chance in zip(items, values, chances):
        if value not in _LABEL_INDEX:
            raise ValueError(f"a judgement must be -1, 0 or 1, got {value!r} for item {item!r}")
        if chance is not None and item not in judged:
            if not 0 < float(chance) <= 1:
                raise ValueError(f"item {item!r}: selection probability must lie in (0, 1], got {chance!r}")
            draws.append((item, float(chance)))
        metric_value = pair.metric.get(item)
        if item not in judged and value != 0:
            basis = pair.round_basis or (*(x for row in pair.paired for x in row),
                                         *pair.human_only, *pair.metric_only)
            others = list(basis[12:])
            if metric_value is not None:
                others[_LABEL_INDEX[metric_value]] -= 1     # never the item's own metric label
            wager = bet(np.reshape(basis[:9], (3, 3)), basis[9:12], others)
            log_evidence += math.log1p(value * wager)
        counts = human_only if metric_value is None else paired[_LABEL_INDEX[metric_value]]
        if item in votes:
            # a further judgement of a judged item replaces the item's label, never adds one
            counts[_LABEL_INDEX[_sign(votes[item])]] -= 1
        elif item in judged:
            pass   # judged before votes were stored (old state): counted per judgement
        elif metric_value is not None:
            # An item's metric label counts as metric-only until its first human label.
            metric_only[_LABEL_INDEX[metric_value]] -= 1
        if item in judged and item not in votes:
            counts[_LABEL_INDEX[value]] += 1
        else:
            votes[item] = votes.get(item, 0) + value
            counts[_LABEL_INDEX[_sign(votes[item])]] += 1
        judged.add(item)
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
        judgements=pair.judgements + len(items),
        quota=quota,
        status=OPEN if quota else FILLED,
    )
    return replace(state, pairs=tuple(pairs))


def rebuild_pairs(
    state: ProtocolState, labels: Mapping[tuple[str, str], tuple[Sequence[str], Sequence[int]]],
    chances: Mapping[tuple[str, str], Mapping[str, float]] | None = None,
) -> ProtocolState:
    """Re-decide the given pairs from scratch from exactly the judgements given (e.g. after the
    judgements of an excluded annotator left, or came back).

    labels  (first, second) -> (items (k,), values (k,) in {-1, 0, 1}); pairs not named are
            unchanged
    Each named pair forgets its counts and records its k judgements as one look (a round of
    size k, closed at once with the others in one batched decision), so it ends decided,
    exhausted, futile or waiting for another round (``open_rounds`` funds it within the budget
    left); with k = 0 it waits undecided. Its round counter and θ history continue (the look
    is a round; θ gains one entry when k > 0). Capacity grows to k when the pair holds more
    judgements than it could receive (a re-included annotator's comparisons were served again).
    chances (first, second) -> {item: selection probability of its draw} for the named pairs,
            when known (the app reads them from the judgements' leases); otherwise the items
            that stay keep their recorded draw (PairState.draws). A design-weighted pair thus
            stays weighted (Des Raj's weights over the remaining draws: approximate once draws
            are removed).
    Precondition: ``state.settings.budget`` already accounts for the change (spent + reserved
    may not exceed it).
    """
    index = _index(state)
    rebuilt = []
    for key, (items, values) in sorted(labels.items()):
        if key not in index:
            raise ValueError(f"unknown pair {key!r}; pairs are in canonical order first < second")
        old = state.pairs[index[key]]
        if len(items) != len(values):
            raise ValueError(f"pair {key}: {len(items)} items but {len(values)} values")
        metric_only = [0, 0, 0]
        for value in old.metric.values():
            metric_only[_LABEL_INDEX[value]] += 1
        capacity = max(old.capacity, len(items))
        fresh = PairState(first=old.first, second=old.second, capacity=capacity, metric=old.metric,
                          metric_only=tuple(metric_only), round=old.round, theta=old.theta,
                          status=WAITING if capacity > 0 else EXHAUSTED)
        if items:
            fresh = replace(fresh, round=old.round + 1, quota=len(items), status=OPEN,
                            round_basis=(0,) * 12 + tuple(metric_only))
        rebuilt.append(fresh)
    if not rebuilt:
        return state
    looked = ProtocolState(state.settings, tuple(rebuilt), state.closes)
    for pair in rebuilt:
        items, values = labels[pair.key]
        if items:
            # the items that stay keep the chance of their draw (design weights, PairState.draws)
            chance = dict(state.pairs[index[pair.key]].draws)
            if chances is not None and pair.key in chances:
                chance = {str(item): value for item, value in chances[pair.key].items()}
            looked = record_judgements(looked, pair.first, pair.second, list(items), list(values),
                                       [chance.get(str(item)) for item in items])
    if any(p.status == FILLED for p in looked.pairs):
        looked = close_rounds(looked)
    pairs = list(state.pairs)
    for pair in looked.pairs:
        pairs[index[pair.key]] = pair
    result = replace(state, pairs=tuple(pairs), closes=looked.closes)
    _check_state(result)
    return result


def bet(paired, human_only, metric_only) -> float:
    """The e-process bet on the next item's human label (module doc), in [-MAX_BET, MAX_BET].

    paired (3, 3) metric rows x human columns, human_only (3,), metric_only (3,) metric labels
    of the unjudged items other than the one bet on. The human labels of the metric-only items
    are imputed with the +1-smoothed confusion P(human | metric), then
    r = (n+ + 1/2) / (n+ + n- + 1) and b = 2 r - 1, clipped.
    """
    paired = np.asarray(paired, dtype=float)
    human = paired.sum(axis=0) + np.asarray(human_only, dtype=float)
    given_metric = (paired + 1.0) / (paired.sum(axis=1, keepdims=True) + 3.0)   # rows: metric
    imputed = np.asarray(metric_only, dtype=float) @ given_metric
    wins, losses = human[0] + imputed[0], human[2] + imputed[2]
    r = (wins + 0.5) / (wins + losses + 1.0)
    return float(np.clip(2.0 * r - 1.0, -MAX_BET, MAX_BET))


def _sign(total: int) -> int:
    return (total > 0) - (total < 0)


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
    settings = state.settings
    decide = decide or _default_decide
    batch = decide(
        [pair_counts(state.pairs[i]) for i in closing],
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
    if settings.rule == "eprocess":
        decisions = [eprocess_decision(state.pairs[i], settings.gamma) for i in closing]
    else:
        decisions = [decision_at(t, g) for t, g in zip(theta, levels)]
    futile = np.zeros(len(closing), dtype=bool)
    if settings.policy == ADAPTIVE and settings.rule == "eprocess":
        for j, i in enumerate(closing):
            pair = state.pairs[i]
            if decisions[j] == 0 and settings.futility > 0 and pair.remaining > 0 \
                    and pair.judgements >= settings.futility_min_judgements:
                futile[j] = not eprocess_can_decide(pair, settings.gamma, settings.futility)
    elif settings.policy == ADAPTIVE:
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


def _diagnostics(data: Mapping | None) -> MappingProxyType | None:
    if data is None:
        return None
    ess = data.get("ess")
    return MappingProxyType({
        "method": str(data["method"]),
        "ess": None if ess is None or not math.isfinite(float(ess)) else float(ess),
        "draws": int(data["draws"]),
        "theta_se": float(data["theta_se"]),
    })


def _batch_diagnostics(batch, j: int) -> MappingProxyType:
    """The diagnostics of result j of a decide batch (defaults for a closed-form batch)."""
    method = getattr(batch, "method", None)
    ess = getattr(batch, "ess", None)
    draws = getattr(batch, "draws", None)
    se = getattr(batch, "theta_se", None)
    return _diagnostics({
        "method": "closed_form" if method is None else method[j],
        "ess": None if ess is None else ess[j],
        "draws": 0 if draws is None else draws[j],
        "theta_se": 0.0 if se is None else se[j],
    })


def eprocess_can_decide(pair: PairState, gamma: float, futility: float) -> bool:
    """Whether the pair's e-process can still reach 1/gamma on its remaining labels.

    Optimistic: the share r of first-system wins among non-ties is put at the end of its
    (1 - futility) credible interval (Beta(n+ + 1, n- + 1)) farther from 1/2, and the wealth
    grows at the Kelly rate KL(r || 1/2) per non-tie label (tie share as observed, +1
    smoothed). A futility stop never decides ±, so it cannot break the error control.
    """
    from scipy.stats import beta as beta_distribution

    wins, ties, losses = (float(x) for x in pair.human_counts)
    r = max(beta_distribution.ppf(1 - futility, wins + 1, losses + 1),
            1 - beta_distribution.ppf(futility, wins + 1, losses + 1))
    r = min(r, 1 - 1e-9)
    rate = r * math.log(2 * r) + (1 - r) * math.log(2 * (1 - r))
    non_tie_share = (wins + losses + 1) / (wins + ties + losses + 2)
    reachable = pair.log_evidence + pair.remaining * non_tie_share * rate
    return reachable >= math.log(1.0 / gamma)


def eprocess_decision(pair: PairState, gamma: float) -> int:
    """±1 (the sign of the human margin) once log K >= log(1 / gamma), else 0."""
    if pair.log_evidence < math.log(1.0 / gamma):
        return 0
    margin = pair.human_counts[0] - pair.human_counts[2]
    return int(np.sign(margin))


def decision_at(theta: float, gamma: float) -> int:
    """+1 if theta > 1 - gamma/2, -1 if theta < gamma/2, else 0 (SPEC §4)."""
    if theta > 1 - gamma / 2:
        return 1
    if theta < gamma / 2:
        return -1
    return 0


def look_level(settings: ProtocolSettings, capacity: int) -> float:
    """Decision level used at each look of a pair: gamma, or Pocock's level under strict."""
    if not settings.strict:
        return settings.gamma
    if settings.policy == ADAPTIVE:
        first = min(settings.first_round, settings.batch)
        looks = max(1, 1 + math.ceil(max(capacity - first, 0) / settings.batch))
    else:
        looks = max(1, math.ceil(capacity / settings.batch))
    if settings.spending == "pocock":
        return pocock_level(looks, settings.gamma)
    return settings.gamma / looks


@lru_cache(maxsize=256)
def pocock_level(looks: int, gamma: float, paths: int = 100_000) -> float:
    """Nominal two-sided level per look so that K equally spaced looks reject with prob. gamma.

    Under no difference the standardised sign statistic after k of K equal increments is
    S_k / sqrt(k) for a Gaussian random walk S; Pocock's constant c solves
    P(max_k |S_k| / sqrt(k) > c) = gamma (found by simulation with a fixed seed, so the
    level is reproducible), and the nominal level is 2 (1 - Phi(c)).
    """
    from scipy.stats import norm

    if looks < 1:
        raise ValueError(f"looks must be at least 1, got {looks}")
    if looks == 1:
        return gamma
    rng = np.random.default_rng(20230710)
    maxima = []
    chunk = max(1, 4_000_000 // looks)
    for start in range(0, paths, chunk):
        steps = rng.standard_normal((min(chunk, paths - start), looks))
        standardised = np.abs(np.cumsum(steps, axis=1)) / np.sqrt(np.arange(1, looks + 1))
        maxima.append(standardised.max(axis=1))
    critical = float(np.quantile(np.concatenate(maxima), 1 - gamma))
    return float(2 * norm.sf(critical))


def final_decision_probabilities(
    paired: np.ndarray,
    human_only: np.ndarray,
    metric_only: np.ndarray,
    remaining: np.ndarray,
    gamma: float | np.ndarray,
    *,
    draws: int = 2000,
    sweeps: int = 10,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """P(the human-only decision on all of a pair's labels will be +1, 0, -1), predictive.

    paired (P, 3, 3) metric rows x human columns; human_only (P, 3); metric_only (P, 3);
    remaining (P,) human labels still to come; gamma scalar or (P,). Returns (P, 3).

    p is drawn from the decision function's posterior, approximately: ``draws`` chains of
    the data-augmentation Gibbs sampler (SPEC §4) start from the human-only posterior
    Dir(n + 1) and run ``sweeps`` sweeps, so the metric labels of the not yet judged items
    pull p towards what they predict (a chain that has not mixed fully is still wider than
    the posterior: the estimate errs towards "not futile"). The remaining labels are then
    ~ Multinomial(remaining, p) and the final theta is the closed form on all of them.
    """
    paired = np.asarray(paired, dtype=np.int64).reshape(-1, 3, 3)
    size = len(paired)
    human_only = np.asarray(human_only, dtype=np.int64).reshape(size, 3)
    metric_only = np.asarray(metric_only, dtype=np.int64).reshape(size, 3)
    remaining = np.asarray(remaining, dtype=np.int64).reshape(size)
    if np.any(remaining < 0):
        raise ValueError("remaining labels must not be negative")
    gamma = np.broadcast_to(np.asarray(gamma, dtype=float), (size,))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if size == 0:
        return np.zeros((0, 3))
    human = paired.sum(axis=1) + human_only  # (P, 3)

    def dirichlet(alpha):  # over the last axis, any batch shape
        g = rng.standard_gamma(alpha)
        return g / g.sum(axis=-1, keepdims=True)

    p = dirichlet(np.broadcast_to(human[:, None, :] + 1.0, (size, draws, 3)))
    if metric_only.any() and sweeps > 0:
        # mu[..., c, c'] = P(metric c | oracle c'); each column c' is Dirichlet(N[:, c'] + 1 + K[:, c'])
        column_alpha = np.swapaxes(paired, 1, 2)[:, None, :, :] + 1.0  # (P, 1, c', c)
        mu = np.swapaxes(dirichlet(np.broadcast_to(column_alpha, (size, draws, 3, 3))), -1, -2)
        counts = np.broadcast_to(metric_only[:, None, :], (size, draws, 3))
        for _ in range(sweeps):
            weights = mu * p[:, :, None, :]
            weights /= weights.sum(axis=-1, keepdims=True)
            latent = rng.multinomial(counts, weights)  # (P, D, c, c')
            p = dirichlet(human[:, None, :] + 1.0 + latent.sum(axis=2))
            mu = np.swapaxes(dirichlet(column_alpha + np.swapaxes(latent, -1, -2)), -1, -2)
    future = rng.multinomial(np.broadcast_to(remaining[:, None], (size, draws)), p)
    theta = theta_closed_form(human[:, None, :] + future)
    half = gamma[:, None] / 2
    plus = np.mean(theta > 1 - half, axis=1)
    minus = np.mean(theta < half, axis=1)
    return np.stack([plus, 1 - plus - minus, minus], axis=1)


def theta_closed_form(human_counts: np.ndarray) -> np.ndarray:
    """theta = P(p+ > p-) = 1 - I_{1/2}(n+ + 1, n- + 1) without metric (SPEC §4); (..., 3) -> (...)."""
    counts = np.asarray(human_counts, dtype=float)
    return 1.0 - betainc(counts[..., 0] + 1, counts[..., 2] + 1, 0.5)


def pair_counts(pair: PairState):
    """The pair's counts as protocol.decision.PairCounts (paired, human_only, metric_only).

    When every judged item has a recorded draw (PairState.draws), the human counts are
    design-weighted (protocol.decision.counts_from_labels(human_weights=...)).
    """
    paired = np.asarray(pair.paired, dtype=np.int64)
    human_only = np.asarray(pair.human_only, dtype=np.int64)
    metric_only = np.asarray(pair.metric_only, dtype=np.int64)
    try:
        from .decision import PairCounts, counts_from_labels
    except ImportError:
        return _Counts(paired, human_only, metric_only)
    if design_weighted(pair):
        from .allocation import design_weights

        weights = dict(zip((item for item, _ in pair.draws),
                           design_weights([chance for _, chance in pair.draws]).tolist()))
        items = sorted(pair.votes)
        metric_items = sorted(pair.metric)
        return counts_from_labels(items, [_sign(pair.votes[i]) for i in items], metric_items,
                                  [pair.metric[i] for i in metric_items], human_weights=weights)
    return PairCounts(paired=paired, human_only=human_only, metric_only=metric_only)


def design_weighted(pair: PairState) -> bool:
    """Whether the pair's decision weights its items by their draws (every judged item has one)."""
    return bool(pair.draws) and {item for item, _ in pair.draws} == set(pair.judged_items) == set(pair.votes)


@dataclass(frozen=True)
class _Counts:
    paired: np.ndarray
    human_only: np.ndarray
    metric_only: np.ndarray


@dataclass(frozen=True)
class _ClosedFormBatch:
    theta: np.ndarray
    p_mean: np.ndarray


def decide_closed_form(counts: Sequence, *, gamma: float = 0.05, method: str = "fast", seed: int = 0) -> _ClosedFormBatch:
    """Exact decision function for counts without metric-only items (conjugate posterior;
    weighted counts too)."""
    human = np.array([np.asarray(c.paired).sum(axis=0) + np.asarray(c.human_only) for c in counts], dtype=float)
    if any(np.asarray(c.metric_only).sum() for c in counts):
        raise ValueError("the closed form only applies to counts without metric-only items")
    human = human.reshape(-1, 3)
    return _ClosedFormBatch(theta=theta_closed_form(human), p_mean=(human + 1) / (human.sum(axis=1, keepdims=True) + 3))


def _default_decide(counts: Sequence, *, gamma: float, method: str, seed: int):
    if all(not np.asarray(c.metric_only).any() for c in counts):
        # Without metric-only items the posterior is conjugate: exact and instant.
        return decide_closed_form(counts, gamma=gamma)
    from .decision import decide_many

    return decide_many(counts, gamma=gamma, method=method, seed=seed)


def run_rounds(
    state: ProtocolState,
    collect: Callable[[ProtocolState, Mapping[tuple[str, str], int]], Iterable[tuple[str, str, Sequence[str], Sequence[int]]]],
    *,
    decide: DecideMany | None = None,
    on_round: Callable[[ProtocolState], None] | None = None,
) -> ProtocolState:
    """Drive Algorithm 2 to the end: open rounds, collect, close, until finished.

    collect(state, needed) yields (first, second, items, values) for the open rounds.
    """
    while not state.finished:
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
