"""The protocol's data: settings, one state per system pair, the whole state, and their codecs.

Everything here is plain data (frozen dataclasses) with JSON-able dicts (``to_dict`` /
``from_dict``), validated on the way in; the decision rules are in ``protocol.rules`` and
the state machine that advances the data in ``protocol.machine`` (overview:
``protocol.adaptive``).
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from types import MappingProxyType

import numpy as np

PAPER = "paper"
ADAPTIVE = "adaptive"
POLICIES = (PAPER, ADAPTIVE)

WAITING = "waiting"      # undecided, no round open (start, or not funded yet)
OPEN = "open"            # round open, judgements still missing
FILLED = "filled"        # round complete, waiting for close_rounds
DECIDED = "decided"      # ±1 decision, stops
EXHAUSTED = "exhausted"  # undecided and no human label left to collect
FUTILE = "futile"        # adaptive policy: stopped, a ± decision is unlikely
# The ranking designs run only the pairs they ask for: the others are parked, never funded by
# open_rounds, until asked for (then waiting). The merge sort (protocol.ranking_design) parks
# pairs before any judgement; the active design (protocol.active_ranking) also parks a pair
# between the rounds it funds, judgements and all.
PARKED = "parked"
STATUSES = (WAITING, OPEN, FILLED, DECIDED, EXHAUSTED, FUTILE, PARKED)
STOPPED = (DECIDED, EXHAUSTED, FUTILE)

METHODS = ("fast", "nuts")
BAYES = "bayes"
EPROCESS = "eprocess"
#: an exact binomial boundary per pair: constant on the sign statistic's scale (O'Brien-Fleming
#: shape), valid at any looks up to the pair's capacity (protocol.rules.boundary_critical)
BOUNDARY = "boundary"
RULES = (BAYES, EPROCESS, BOUNDARY)
#: largest |bet| of the e-process: a wrong bet then keeps 1 - 0.6 of the wealth
MAX_BET = 0.6
#: control across the pairs of a study (rule "eprocess"): e-BH (false discovery rate <= gamma
#: over the study's pairs), Bonferroni over the pairs' e-values (family-wise error <= gamma),
#: or none (each pair on its own at gamma)
EBH = "ebh"
BONFERRONI = "bonferroni"
FAMILIES = (EBH, BONFERRONI, "none")
#: the metric's confusion P(human | metric) behind the e-process bets: pooled over the
#: study's pairs, or each pair's own paired counts
POOLED = "pooled"
PAIR = "pair"
CONFUSIONS = (PAIR, POOLED)
SPENDING = ("bonferroni", "pocock")
LABEL_INDEX = {1: 0, 0: 1, -1: 2}  # class order (+, =, -)


@dataclass(frozen=True)
class ProtocolSettings:
    """Parameters of one protocol run (stored with the state).

    budget                  human judgements the protocol may spend in total
    batch                   judgements per pair and round (the paper's N)
    gamma                   decision level: ±1 when theta > 1 - gamma/2 or < gamma/2
    policy                  "paper" or "adaptive" (see module docstring); default adaptive
    strict                  split gamma over the looks (false ± rate <= gamma, see module doc)
    rule                    "eprocess" (default: anytime-valid betting e-process; false ± rate
                            <= gamma at any looks, module doc) or "bayes" (theta thresholds,
                            docs/formulas.md §4; the paper's rule, which has no error control) or
                            "boundary" (exact binomial constant boundary per pair, a candidate;
                            uniform draws only)
    family                  rule "eprocess": control across the study's pairs, "ebh" (default:
                            false discovery rate <= gamma), "bonferroni" (family-wise error
                            <= gamma) or "none" (each pair at gamma on its own)
    max_bet                 rule "eprocess": largest |bet| on one item (a wrong bet keeps
                            1 - max_bet of the wealth)
    confusion               rule "eprocess": the metric's confusion behind the bets, "pooled"
                            over the study's pairs or each "pair"'s own (default)
    metric_weight           rule "eprocess": the metric's imputed labels count as this many
                            labels in a bet (None: as many as the pair's unjudged items)
    mixture                 rule "eprocess": None (bets made at the time, plug-in Kelly) or
                            a > 0: the uniform draws' evidence is the Beta(a, a) mixture of
                            constant bets (protocol.rules.steps_log_evidence)
    control_variate         rule "eprocess": the metric enters the bets as a control variate,
                            s - lam (m - c) with the reliance lam tuned online (default True;
                            protocol.control_variate), or (False) as imputed labels in the
                            Kelly bet (protocol.rules.bet), the rule before issue 38
    final_share             rule "eprocess": share w of the pair's e-value given to an exact
                            sign test on all its labels when they run out (0: none;
                            protocol.rules.pair_log_e_value)
    boundary_share          rule "boundary" under e-BH: each pair's boundary is at level
                            gamma x this, its e-value 1 / (gamma x this) once crossed
    spending                under strict: "bonferroni" (gamma / K per look) or "pocock"
    futility                adaptive: stop when P(± on all labels) is below this ...
    futility_labels_per_error  ... and below remaining labels / this (0 = no such term)
    futility_prior          rule "eprocess": also give a pair up when the metric's level on it,
                            as a prior of its margin fitted on the other pairs, says it cannot
                            be decided (default True; protocol.level_prior; no effect without a
                            metric)
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
    policy: str = ADAPTIVE
    strict: bool = False
    spending: str = "bonferroni"
    rule: str = EPROCESS
    family: str = EBH
    max_bet: float = MAX_BET
    confusion: str = PAIR
    metric_weight: float | None = None
    mixture: float | None = None
    control_variate: bool = True
    final_share: float = 0.0
    boundary_share: float = 0.5
    futility: float = 0.05
    futility_labels_per_error: float = 500.0
    futility_prior: bool = True
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
        if not isinstance(self.futility_prior, bool):
            raise ValueError(f"futility_prior must be True or False, got {self.futility_prior!r}")
        if not isinstance(self.control_variate, bool):
            raise ValueError(f"control_variate must be True or False, got {self.control_variate!r}")
        if not isinstance(self.strict, bool):
            raise ValueError(f"strict must be True or False, got {self.strict!r}")
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {self.rule!r}")
        if not (isinstance(self.max_bet, (int, float)) and 0 < self.max_bet < 1):
            raise ValueError(f"max_bet must lie strictly between 0 and 1, got {self.max_bet!r}")
        if self.metric_weight is not None and not (
                isinstance(self.metric_weight, (int, float)) and self.metric_weight >= 0):
            raise ValueError(f"metric_weight must be None or >= 0, got {self.metric_weight!r}")
        if self.mixture is not None and not (isinstance(self.mixture, (int, float)) and self.mixture > 0):
            raise ValueError(f"mixture must be None or > 0, got {self.mixture!r}")
        if not (isinstance(self.final_share, (int, float)) and 0 <= self.final_share < 1):
            raise ValueError(f"final_share must lie in [0, 1), got {self.final_share!r}")
        if self.confusion not in CONFUSIONS:
            raise ValueError(f"confusion must be one of {CONFUSIONS}, got {self.confusion!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if not (isinstance(self.boundary_share, (int, float)) and 0 < self.boundary_share <= 1):
            raise ValueError(f"boundary_share must lie in (0, 1], got {self.boundary_share!r}")

    @classmethod
    def paper(cls, budget: int, **options) -> ProtocolSettings:
        """The paper's Algorithm 2: policy "paper", Bayesian theta thresholds at every look."""
        return cls(budget=budget, **{"policy": PAPER, "rule": BAYES, **options})


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
    round_basis   the 15 counts (paired, human_only, metric_only) when the open round opened,
                  then the study's pooled paired counts (9) under confusion "pooled":
                  every bet of a round is made from them, so the order of a round's
                  judgements does not matter
    diagnostics   how the last close computed theta, or None: {"method": one of
                  protocol.decision.METHODS, "ess": effective sample size (None when exact),
                  "draws": posterior draws, "theta_se": Monte-Carlo standard error}
    steps         the e-process's steps, one per item's first judgement, sorted by item (the
                  wealth is their product): (item, value in {-1, 0, 1}, bet, rho, lam, m, c); the
                  step multiplies the wealth by 1 + rho x bet x (value - lam (m - c)) (rho = 1 for
                  uniform draws, the smallest chance among the open candidates over the item's
                  chance for unequal draws; lam the reliance on the metric, m the item's metric
                  value, c the metric's mean over the unjudged items when the round opened:
                  protocol.control_variate; lam = 0 without it; module doc).
                  Kept through rebuilds (``rebuild_pairs``): a step whose item has no kept
                  judgement is inactive (counts nothing) until a judgement of it comes back.
    draws         (item, selection probability) of every judged item's first judgement, in
                  the order they arrived, when items are chosen with unequal probabilities
                  (separability-weighted or stratified choice; protocol.allocation). When
                  every judged item has one, the decision counts each item with its design
                  weight (protocol.allocation.design_weights), so it decides for all the
                  pair's items rather than for the over-sampled ones (pair_counts).
    prediction    item -> calibrated prediction of the human label in [-1, 1] from several
                  metrics (protocol.control_variate.cross_fitted_predictions), or empty: the
                  control variate then uses the metric's label
    cv_basis      (lam, c, bet) of the control-variate e-process, fixed when the open round
                  opened (protocol.control_variate), or () (lam = 0)
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
    steps: tuple[tuple[str, int, float, float, float, float, float], ...] = ()
    prediction: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    cv_basis: tuple[float, ...] = ()

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

    def to_dict(self, *, with_metric: bool = True) -> dict:
        """JSON-able dict. ``with_metric=False`` leaves the metric's labels out: the app stores
        the rest (PairState) and gives the labels back to ``from_dict``, computed from the
        metric's scores (2,000 labels per pair at 2,000 items were most of each stored state)."""
        data = {
            "first": self.first,
            "second": self.second,
            "capacity": int(self.capacity),
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
            "steps": [[item, int(value), float(wager), float(rho), float(lam), float(m), float(c)]
                      for item, value, wager, rho, lam, m, c in self.steps],
            "prediction": dict(sorted(self.prediction.items())),
            "cv_basis": [float(x) for x in self.cv_basis],
        }
        if with_metric:  # (not read at all otherwise: a LazyLabels stays uncomputed)
            data = {**{k: data[k] for k in ("first", "second", "capacity")},
                    "metric": dict(sorted(self.metric.items())), **data}
        return data

    @classmethod
    def from_dict(cls, data: Mapping, *, metric: Mapping[str, int] | None = None) -> PairState:
        """The state ``to_dict`` wrote; ``metric``: the pair's metric labels when ``data`` was
        written without them (they are taken as given, e.g. a ``LazyLabels``)."""
        try:
            state = cls(
                first=str(data["first"]),
                second=str(data["second"]),
                capacity=int(data["capacity"]),
                metric=metric if metric is not None else MappingProxyType(
                    {str(k): int(v) for k, v in data["metric"].items()}),
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
                diagnostics=frozen_diagnostics(data.get("diagnostics")),
                log_evidence=float(data.get("log_evidence", 0.0)),
                round_basis=tuple(int(x) for x in data.get("round_basis", ())),
                # states stored before draws were recorded have none (unweighted counts)
                draws=tuple((str(item), float(chance)) for item, chance in data.get("draws", ())),
                # states stored before steps were recorded have none (log_evidence as stored)
                # steps stored before the control variate have 4 fields (lam = m = c = 0)
                steps=tuple(full_step(step) for step in data.get("steps", ())),
                prediction=MappingProxyType({str(k): float(v) for k, v in data.get("prediction", {}).items()}),
                cv_basis=tuple(float(x) for x in data.get("cv_basis", ())),
            )
        except KeyError as missing:
            raise ValueError(f"pair state is missing the field {missing}") from None
        _check_pair_state(state)
        return state


class LazyLabels(Mapping):
    """item -> metric label in {-1, 0, 1}, computed by ``compute`` (a function returning a dict)
    on first use: a round close loads every pair of a study but reads the labels of the pairs
    whose round it closes only. Immutable once computed.

    ``one``: the label of one item (None: the pair has none for it), by the formula ``compute``
    uses, for a reader of single items while the whole is not computed: a submit records one
    item and needs its label alone (all 2,000 of a pair at 2,000 items were a twentieth of a
    submit's CPU; docs/benchmarks.md)."""

    __slots__ = ("_compute", "_labels", "_one")

    def __init__(self, compute: Callable[[], Mapping[str, int]], one: Callable[[str], int | None] | None = None):
        self._compute = compute
        self._labels: Mapping[str, int] | None = None
        self._one = one

    def _all(self) -> Mapping[str, int]:
        if self._labels is None:
            self._labels = MappingProxyType(dict(self._compute()))
        return self._labels

    def __getitem__(self, item: str) -> int:
        if self._labels is None and self._one is not None:
            label = self._one(item)
            if label is None:
                raise KeyError(item)
            return label
        return self._all()[item]

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"LazyLabels({'not computed' if self._labels is None else len(self._labels)})"


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
    stepped = [item for item, *_ in state.steps]
    if len(set(stepped)) != len(stepped) or not all(
            value in LABEL_INDEX and abs(wager) < 1 and 0 <= rho <= 1 for _, value, wager, rho, *_ in state.steps):
        raise ValueError(f"{name}: steps must name items once each, with values in -1/0/1, |bet| < 1 "
                         "and rho in [0, 1]")


@dataclass(frozen=True)
class Outside:
    """What the study-wide rules need of the pairs a partial state leaves out (a round close
    that reads only the pairs it closes or opens: issue 41), as totals over those pairs.

    pairs         how many pairs of the study are left out
    log_e_values  (k,) the log e-values (``rules.pair_log_e_value``) of those left-out pairs
                  whose e-value is at least 1 / gamma; every other left-out pair counts as
                  e = 0 in the family rule, which decides the same pairs (e-BH's bar m / (gamma
                  k) is never below 1 / gamma, so such a pair can neither pass nor move k*)
    used          their judgements recorded (HITs in a rubric study) plus their open rounds'
                  quotas: what they take of the budget (one sum, as a submit moves a judgement
                  from reserved to spent and leaves it unchanged)
    moments       (6,) their control-variate moments (``machine.pair_moments``: n, s, m, ss,
                  mm, sm), summed; each a float, or floats whose exact sum it is (a sum of
                  float moments, the calibrated predictions', rounds; ``machine.study_moments``
                  adds the parts and the pairs' moments exactly, so a partial state's sum is
                  the whole state's)
    calibration   each lane's x'x (q x q, row by row) then x'y (q,) of the cross-fitted
                  calibration (``control_variate.calibration_sums``) summed over those pairs,
                  for a study that combines q metrics (``machine.calibrated``); None: not kept
    levels        (5,) their parts of the futility check's level prior (``level_prior.LevelSums``:
                  k, x^2, x m, m^2, v), summed; each a float, or floats whose exact sum it is
    """

    pairs: int
    log_e_values: tuple[float, ...] = ()
    used: int = 0
    moments: tuple[float | tuple[float, ...], ...] = (0.0,) * 6
    calibration: tuple[float, ...] | None = None
    levels: tuple[float | tuple[float, ...], ...] = (0.0,) * 5

    def __post_init__(self) -> None:
        if self.pairs < len(self.log_e_values) or min(self.pairs, self.used) < 0:
            raise ValueError(f"outside: {self.pairs} pairs with {len(self.log_e_values)} e-values, "
                             f"{self.used} judgements used")
        if len(self.moments) != 6:
            raise ValueError(f"outside: moments must be 6 sums, got {len(self.moments)}")
        if len(self.levels) != 5:
            raise ValueError(f"outside: levels must be 5 sums, got {len(self.levels)}")


@dataclass(frozen=True)
class ProtocolState:
    """The whole protocol: settings, one PairState per pair (sorted), closes done so far.

    ``outside``: None for the whole study; for a partial state (some of the study's pairs),
    the totals of the pairs left out, which every study-wide quantity adds (budget left,
    family rule, the control variate's moments)."""

    settings: ProtocolSettings
    pairs: tuple[PairState, ...]
    closes: int = 0
    outside: Outside | None = None

    @property
    def spent(self) -> int:
        """Human judgements recorded over the state's pairs."""
        return sum(p.judgements for p in self.pairs)

    @property
    def reserved(self) -> int:
        """Judgements promised to the state's open rounds but not yet recorded."""
        return sum(p.quota for p in self.pairs)

    @property
    def budget_left(self) -> int:
        """Budget neither spent nor reserved by an open round (of any pair of the study: those
        a partial state leaves out take ``outside.used``)."""
        return self.settings.budget - self.spent - self.reserved - (self.outside.used if self.outside else 0)

    @property
    def finished(self) -> bool:
        """No round open or filled, and no waiting pair can be funded any more."""
        require_whole(self, "finished")
        if any(p.status in (OPEN, FILLED) for p in self.pairs):
            return False
        return self.budget_left == 0 or not any(p.status == WAITING for p in self.pairs)

    def pair(self, first: str, second: str) -> PairState:
        index = pair_position(self, (first, second))
        if index is None:
            raise ValueError(f"unknown pair ({first!r}, {second!r}); pairs are in canonical order first < second")
        return self.pairs[index]

    def decisions(self) -> dict[tuple[str, str], int]:
        return {p.key: p.decision for p in self.pairs}

    def to_dict(self) -> dict:
        return {"settings": asdict(self.settings), "closes": self.closes, "pairs": [p.to_dict() for p in self.pairs]}

    @classmethod
    def from_pairs(cls, settings: ProtocolSettings, pairs: Sequence[PairState], closes: int = 0,
                   outside: Outside | None = None) -> ProtocolState:
        """The state of ``pairs`` (each valid, e.g. from PairState.from_dict; any order), validated
        as a whole like ``from_dict`` (unique pairs, budget not overspent); ``outside``: the
        totals of the study's other pairs when ``pairs`` are some of them (a partial state)."""
        state = cls(settings, tuple(sorted(pairs, key=lambda p: p.key)), int(closes), outside)
        check_state(state)
        return state

    @classmethod
    def from_dict(cls, data: Mapping) -> ProtocolState:
        try:
            # a state stored before the level prior keeps the rule it ran with
            settings = ProtocolSettings(**{"futility_prior": False, **data["settings"]})
            pairs = tuple(PairState.from_dict(p) for p in data["pairs"])
            closes = int(data["closes"])
        except KeyError as missing:
            raise ValueError(f"protocol state is missing the field {missing}") from None
        except TypeError as error:
            raise ValueError(f"protocol settings are malformed: {error}") from None
        state = cls(settings, pairs, closes)
        check_state(state)
        return state


def pair_index(state: ProtocolState) -> dict[tuple[str, str], int]:
    return {p.key: i for i, p in enumerate(state.pairs)}


def pair_position(state: ProtocolState, key: tuple[str, str]) -> int | None:
    """The index of pair ``key`` in ``state.pairs``, or None: a binary search, since the pairs are
    sorted by key (check_state). A dict of every pair per lookup made a replay of 1,225 pairs
    spend a sixth of its time building dicts (one lookup per pair and round)."""
    pairs = state.pairs
    index = bisect.bisect_left(pairs, key, key=attrgetter("key"))
    return index if index < len(pairs) and pairs[index].key == key else None


def require_whole(state: ProtocolState, what: str) -> None:
    """ValueError when ``state`` is partial (``ProtocolState.outside``): ``what`` needs every
    pair of the study, not totals of the pairs left out."""
    if state.outside is not None:
        raise ValueError(f"{what} needs every pair of the study; this state holds {len(state.pairs)} of "
                         f"{len(state.pairs) + state.outside.pairs}")


def check_state(state: ProtocolState) -> None:
    keys = [p.key for p in state.pairs]
    if keys != sorted(set(keys)):
        raise ValueError("pairs must be unique and sorted by (first, second)")
    if state.budget_left < 0:
        raise ValueError(
            f"state overspends its budget: {state.spent} spent + {state.reserved} reserved > {state.settings.budget}"
        )


def frozen_diagnostics(data: Mapping | None) -> MappingProxyType | None:
    if data is None:
        return None
    ess = data.get("ess")
    return MappingProxyType({
        "method": str(data["method"]),
        "ess": None if ess is None or not math.isfinite(float(ess)) else float(ess),
        "draws": int(data["draws"]),
        "theta_se": float(data["theta_se"]),
    })



def full_step(step) -> tuple[str, int, float, float, float, float, float]:
    """A step as (item, value, bet, rho, lam, m, c); a step of 4 fields (stored before the
    control variate, or made without it) has lam = m = c = 0."""
    if len(step) == 7:  # as stored since the control variate: no padding (every submit decodes them)
        item, value, wager, rho, lam, m, c = step
        return (str(item), int(value), float(wager), float(rho), float(lam), float(m), float(c))
    item, value, wager, rho, *rest = step
    lam, m, c = (tuple(float(x) for x in rest) + (0.0, 0.0, 0.0))[:3]
    return (str(item), int(value), float(wager), float(rho), lam, m, c)


def sign_of(total: int) -> int:
    return (total > 0) - (total < 0)

