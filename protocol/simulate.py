"""Offline replay of the budgeted protocol on a bundle with complete human labels.

"With my data and this metric, how many annotations will I need?" The replay runs
``protocol.adaptive`` with the bundle's human labels standing in for annotators: the
annotation unit is one human label (SummEval relevance: 120 pairs x 100 items = 12,000), the
metric labels of all items are known from the start, and the budget is every available
label. Each round the policy's items are drawn uniformly at random among the pair's labels
not yet used (seeded per pair). Every pair's final decision is then compared with the
human-only decision on all its human labels (docs/formulas.md §5).

``null_labels`` builds the null replay for error control: within every item the two
systems of a pair are swapped with probability 1/2 (human and metric labels flip together),
so the two systems are exchangeable and any ± decision is false.

Command line (docs/formulas.md, "Command lines")::

    python -m protocol.simulate BUNDLE --metric NAME [--batch N] [--gamma G] [--seed S]
        [--policy adaptive|paper] [--method fast|nuts] [--json]
        [--strict [--spending bonferroni|pocock]] [--rule eprocess|bayes]
        [--family ebh|bonferroni|none] [--max-bet B] [--null] [--quiet]
        [--spammers P [--quality-control] [--check-every 10] [--annotators 50]]

Without flags the replay runs ``ProtocolSettings``' defaults, the error-controlled rule
(adaptive policy, betting e-process per pair, e-BH across the pairs: ``protocol.adaptive``);
the paper's Algorithm 2 is ``--policy paper --rule bayes``.

``--null`` replays null pairs and adds ``null_false_decision_rate`` (the share of pairs
decided ±, all of them false) to the output. ``wrong_direction_near_null`` is the share of
pairs the full human evaluation leaves undecided that the replay decides against the sign of
their human margin on all labels (type S errors). ``--baselines`` adds the human-only sign test
and PPI++ (metric as predictor) at the replay's annotation fraction (``baselines``).

``--metric none`` replays the human-only protocol. Progress goes to stderr.

Spammers (``--spammers P [--quality-control]``, :class:`Crowd`): the labels are collected by
a pool of simulated annotators of whom a share P are spammers — they answer uniformly at
random in about 0.2 s instead of giving the bundle's label (honest annotators give it, in
about 20 s). A flagged annotator leaves the pool and a newcomer (a spammer with chance P)
takes their place. With ``--quality-control`` one task in ``--check-every`` (10) of every
annotator is a gold check (honest annotators pass it 95 % of the time, spammers a third),
every annotator is assessed with ``protocol.quality.annotator_quality`` (default thresholds)
after each round's judgements arrive, a flagged annotator is blocked and all their
judgements are excluded: the affected pairs' counts are rebuilt without them and the
protocol re-decides those pairs (a decided pair that lost judgements is decided again, and
collects more if it is no longer decided). Excluded judgements and checks count as spent
(``annotations_spent``); the label of an excluded judgement is not collected again. Without
quality control the spammers' random answers stay in the counts. With ``--rule eprocess`` the
pair's wealth keeps the bets on excluded judgements: a random answer's sign is a fair coin, so
the wealth stays a nonnegative martingale under the null and the error control holds.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from . import adaptive
from .adaptive import ProtocolSettings, ProtocolState
from .bundle import read_bundle
from .control_variate import features_of
from .decision import closed_form_theta, counts_from_labels, decide_many, decision_from_theta
from .preferences import human_labels, metric_labels
from .quality import annotator_quality
from .ranking import compare_decisions, sign_test

Pair = tuple[str, str]
SUMMARY_KEYS = (
    "pairs",
    "annotations_available",
    "annotations_used",
    "annotation_fraction",
    "correct",
    "inversion",
    "omission",
    "insertion",
    "wrong_direction_near_null",
    "kld",
    "seconds",
)


@dataclass(frozen=True)
class ReplayResult:
    """Outcome of one replay; rates are fractions of pairs.

    decisions / reference / categories / used: per pair (first, second); state: the final
    protocol state.
    kld: mean KLD(p_prot || p_hum) over pairs with a finite value; kld_skipped: pairs whose
    KLD is infinite (a class the human labels never use), left out of the mean.
    wrong_direction_near_null: share of pairs that the full human evaluation leaves undecided
    (near-null pairs) and the protocol decides against the sign of their human margin on all
    labels (type S errors; an inversion is the same error on a pair the full evaluation decides).
    """

    pairs: int
    annotations_available: int
    annotations_used: int
    annotation_fraction: float
    correct: float
    inversion: float
    omission: float
    insertion: float
    kld: float
    kld_skipped: int
    seconds: float
    decisions: Mapping[Pair, int]
    reference: Mapping[Pair, int]
    categories: Mapping[Pair, str]
    used: Mapping[Pair, int]
    state: ProtocolState | None = None
    crowd: Mapping | None = None  # replay with simulated annotators: CrowdReport.as_dict()
    wrong_direction_near_null: float = 0.0

    def summary(self) -> dict:
        """The command-line JSON object (keys exactly as in docs/formulas.md, plus the crowd's counts
        when the replay simulated annotators); NaN becomes None (null)."""
        out = {key: getattr(self, key) for key in SUMMARY_KEYS}
        if self.crowd is not None:
            out.update(self.crowd)
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}

    @property
    def false_decision_rate(self) -> float:
        """Fraction of pairs with a ± decision (the false-positive rate on a null replay)."""
        return float(np.mean([d != 0 for d in self.decisions.values()])) if self.decisions else math.nan


@dataclass(frozen=True)
class _Decisions:
    theta: np.ndarray
    p_mean: np.ndarray


_DECISION_CACHE: dict[tuple, tuple[float, tuple[float, float, float]]] = {}


def cached_decide(counts, *, gamma: float, method: str, seed: int) -> _Decisions:
    """protocol.decision.decide_many, remembered per (counts, gamma, method, seed).

    decide_many draws every pair from a stream seeded by (seed, its counts), so a pair's
    result does not depend on the rest of the batch and remembering it changes nothing;
    replays of the same data (another policy, the same seed) then share their early rounds.
    """
    keys = [(c.key(), float(gamma), method, int(seed)) for c in counts]
    missing = {}
    for key, c in zip(keys, counts):
        if key not in _DECISION_CACHE and key not in missing:
            missing[key] = c
    if missing:
        if len(_DECISION_CACHE) > 500_000:
            _DECISION_CACHE.clear()
        batch = decide_many(list(missing.values()), gamma=gamma, method=method, seed=seed)
        for key, theta, p_mean in zip(missing, batch.theta, batch.p_mean):
            _DECISION_CACHE[key] = (float(theta), tuple(float(x) for x in p_mean))
    return _Decisions(
        theta=np.array([_DECISION_CACHE[k][0] for k in keys]),
        p_mean=np.array([_DECISION_CACHE[k][1] for k in keys]).reshape(-1, 3),
    )


def labels_by_pair(table, what: str) -> dict[Pair, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for key, labels in table.items():
        items, values = labels if isinstance(labels, tuple) else (labels.items, labels.values)
        items = np.asarray(items).astype(str)
        values = np.asarray(values, dtype=np.int64)
        if items.shape != values.shape:
            raise ValueError(f"{what} labels of {key}: {len(items)} items but {len(values)} values")
        if values.size and not np.isin(values, (-1, 0, 1)).all():
            raise ValueError(f"{what} labels of {key} must be -1, 0 or 1")
        out[tuple(key)] = (items, values)
    return out


def stable_hash(*parts: str) -> int:
    # Python's hash() of str is salted per process; the seed must survive a restart.
    value = 0
    for part in parts:
        for byte in part.encode():
            value = (value * 131 + byte) % (2**31 - 1)
        value = (value * 131 + 7) % (2**31 - 1)
    return value


def null_tables(human, metrics: Sequence = (), *, seed: int = 0, favour: float = 0.0):
    """``null_labels`` for several metrics at once: within every pair and item the two systems
    are swapped with probability 1/2, the human labels and every metric's label together.
    favour > 0 builds the favouritism null on top: each metric label is then replaced by +1
    (the first system better) with probability ``favour``, so the metrics favour one system
    while the humans stay null. Returns (human, [metric tables]) as dicts of (items, values)."""
    human = labels_by_pair(human, "human")
    metrics = [labels_by_pair(table, "metric") for table in metrics]
    null_human = {}
    null_metrics = [{} for _ in metrics]
    for key in sorted(human):
        items, values = human[key]
        universe = np.unique(np.concatenate([items] + [table[key][0] for table in metrics if key in table]))
        rng = np.random.default_rng([seed, stable_hash(*key)])
        flip = dict(zip(universe, rng.integers(0, 2, len(universe)) * 2 - 1))
        null_human[key] = (items, values * np.array([flip[i] for i in items], dtype=np.int64))
        for k, table in enumerate(metrics):
            if key not in table:
                continue
            metric_items, metric_values = table[key]
            flipped = metric_values * np.array([flip[i] for i in metric_items], dtype=np.int64)
            if favour > 0:
                biased = np.random.default_rng([seed, stable_hash(*key), 7, k]).random(len(flipped)) < favour
                flipped = np.where(biased, 1, flipped).astype(np.int64)
            null_metrics[k][key] = (metric_items, flipped)
    return null_human, null_metrics


def metric_features(metrics: Sequence) -> dict[Pair, dict[str, tuple[float, ...]]]:
    """pair -> {item: (q,) the q metrics' labels of the item (0 where a metric has none)}: the
    features of the cross-fitted calibration (protocol.adaptive.calibrated)."""
    tables = [labels_by_pair(table, "metric") for table in metrics]
    return features_of([{key: dict(zip(items.tolist(), values.tolist())) for key, (items, values) in table.items()}
                        for table in tables])


def reference_decisions(human: Mapping[Pair, tuple[np.ndarray, np.ndarray]], gamma: float):
    """Human-only decision on all human labels per pair, and the counts n (P, 3)."""
    keys = sorted(human)
    counts = np.array([[np.sum(human[k][1] == v) for v in (1, 0, -1)] for k in keys], dtype=float).reshape(-1, 3)
    theta = closed_form_theta(counts)
    return {k: decision_from_theta(t, gamma) for k, t in zip(keys, theta)}, dict(zip(keys, counts))


def kld(p_prot: np.ndarray, p_hum: np.ndarray) -> float:
    """sum_c p_prot,c ln(p_prot,c / p_hum,c); inf when p_hum,c = 0 < p_prot,c."""
    p_prot = np.asarray(p_prot, dtype=float)
    p_hum = np.asarray(p_hum, dtype=float)
    mask = p_prot > 0
    if np.any(p_hum[mask] == 0):
        return math.inf
    return float(np.sum(p_prot[mask] * np.log(p_prot[mask] / p_hum[mask])))


def null_labels(human, metric=None, *, seed: int = 0):
    """Swap the two systems within every item with probability 1/2 (per pair and item).

    Human and metric labels of a swapped item are negated together, so the metric keeps its
    relation to the humans while the two systems become exchangeable. Returns (human, metric)
    as dicts of (items, values) arrays.
    """
    human = labels_by_pair(human, "human")
    metric = labels_by_pair(metric, "metric") if metric else {}
    null_human, null_metric = {}, {}
    for key in sorted(human):
        items, values = human[key]
        metric_items, metric_values = metric.get(key, (np.array([], dtype=str), np.array([], dtype=np.int64)))
        universe = np.unique(np.concatenate([items, metric_items]))
        rng = np.random.default_rng([seed, stable_hash(*key)])
        flip = dict(zip(universe, rng.integers(0, 2, len(universe)) * 2 - 1))
        null_human[key] = (items, values * np.array([flip[i] for i in items], dtype=np.int64))
        if key in metric:
            null_metric[key] = (metric_items, metric_values * np.array([flip[i] for i in metric_items], dtype=np.int64))
    return null_human, null_metric


# --------------------------------------------------------------------------------------------
# Baselines from the literature, at a fixed budget (one look: no repeated-looks inflation)
# --------------------------------------------------------------------------------------------
BASELINES = ("sign_test", "ppi++")


@dataclass(frozen=True)
class BaselineResult:
    """A fixed-sample baseline: every pair gets round(fraction x its labels) uniform labels.

    Rates are fractions of pairs against the human-only decision on all labels (as replay).
    """

    name: str
    annotation_fraction: float
    correct: float
    inversion: float
    omission: float
    insertion: float
    decisions: Mapping[Pair, int]

    def summary(self) -> dict:
        return {"baseline": self.name, "annotation_fraction": self.annotation_fraction,
                "correct": self.correct, "inversion": self.inversion,
                "omission": self.omission, "insertion": self.insertion}


def ppi_plus_plus(labelled_human, labelled_metric, unlabelled_metric, gamma: float) -> int:
    """PPI++ test of mean(human label) = 0 with the metric label as the predictor.

    labelled_human, labelled_metric: (n,) labels in {-1, 0, 1} of the human-labelled items;
    unlabelled_metric: (N,) metric labels of the other items. Estimate (Angelopoulos et al.
    2023, PPI++ with power tuning): theta = lam mean(f_U) + mean(h - lam f)_L, variance
    lam^2 var(f_U) / N + var(h - lam f)_L / n, lam = cov(h, f)_L / ((1 + n / N) var(f)),
    clipped to [0, 1]. Returns +1 / -1 when |z| > Phi^-1(1 - gamma/2) (normal approximation),
    else 0.
    """
    from scipy.special import ndtri

    h = np.asarray(labelled_human, dtype=float)
    f = np.asarray(labelled_metric, dtype=float)
    unlabelled = np.asarray(unlabelled_metric, dtype=float)
    n, big_n = len(h), len(unlabelled)
    if n < 2:
        return 0
    lam = 0.0
    if big_n >= 2:
        variance_f = np.var(np.concatenate([f, unlabelled]), ddof=1)
        if variance_f > 0:
            lam = float(np.clip(np.cov(h, f, ddof=1)[0, 1] / ((1 + n / big_n) * variance_f), 0, 1))
    residual = h - lam * f
    estimate = residual.mean() + (lam * unlabelled.mean() if big_n else 0.0)
    variance = residual.var(ddof=1) / n + (lam ** 2 * unlabelled.var(ddof=1) / big_n
                                           if big_n >= 2 else 0.0)
    if variance <= 0:
        return int(np.sign(estimate))
    z = estimate / math.sqrt(variance)
    critical = float(ndtri(1 - gamma / 2))
    return 1 if z > critical else (-1 if z < -critical else 0)


def baselines(human, metric=None, *, fraction: float, gamma: float = 0.05,
              seed: int = 0) -> dict[str, BaselineResult]:
    """The human-only sign test and PPI++ (metric as predictor) at a fixed budget fraction.

    human, metric: as for replay. Every pair gets round(fraction x its labels) human labels,
    drawn uniformly without replacement (seeded per pair as the replay), one look. The sign
    test is protocol.ranking.sign_test (asymptotic, ties discarded); PPI++ uses the metric
    labels of every other item of the pair (without a metric table it is the plain z-test).
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction!r}")
    human = {k: v for k, v in labels_by_pair(human, "human").items() if len(v[1])}
    metric = labels_by_pair(metric, "metric") if metric else {}
    reference, _ = reference_decisions(human, gamma)
    decided: dict[str, dict[Pair, int]] = {name: {} for name in BASELINES}
    used = available = 0
    for key in sorted(human):
        items, values = human[key]
        order = np.random.default_rng([seed, 5, stable_hash(*key)]).permutation(len(values))
        chosen = order[: max(1, int(round(fraction * len(values))))]
        used += len(chosen)
        available += len(values)
        sample = values[chosen]
        test = sign_test(np.array([np.sum(sample == 1)]), np.array([np.sum(sample == -1)]), gamma)
        decided["sign_test"][key] = int(test.decision[0])
        metric_of = dict(zip(*(x.tolist() for x in metric[key]))) if key in metric else {}
        picked = set(items[chosen].tolist())
        labelled = [(v, metric_of.get(i, 0)) for i, v in zip(items[chosen].tolist(), sample.tolist())]
        unlabelled = [v for i, v in metric_of.items() if i not in picked]
        decided["ppi++"][key] = ppi_plus_plus([h for h, _ in labelled], [f for _, f in labelled],
                                              unlabelled, gamma)
    results = {}
    for name, decisions in decided.items():
        categories = compare_decisions(reference, decisions)
        rates = {c: float(np.mean([v == c for v in categories.values()]))
                 for c in ("Correct", "Inversion", "Omission", "Insertion")}
        results[name] = BaselineResult(name, used / available, rates["Correct"], rates["Inversion"],
                                       rates["Omission"], rates["Insertion"], decisions)
    return results


# --------------------------------------------------------------------------------------------
# Simulated annotators: spammers and quality control
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Crowd:
    """The simulated annotators of a replay (module docstring, "Spammers").

    spammers            share P of the annotators who answer uniformly at random, in [0, 1)
    quality_control     gold checks plus exclusion of flagged annotators (protocol.quality)
    annotators          size of the pool working at any time
    check_every         with quality control, one task in this many is a gold check
    honest_check_accuracy  chance that an honest annotator passes a check
    spam_seconds, honest_seconds  median seconds per answer (log-normal, sigma 0.3)
    """

    spammers: float = 0.0
    quality_control: bool = False
    annotators: int = 50
    check_every: int = 10
    honest_check_accuracy: float = 0.95
    spam_seconds: float = 0.2
    honest_seconds: float = 20.0

    def __post_init__(self):
        if not (isinstance(self.spammers, (int, float)) and 0 <= self.spammers < 1):
            raise ValueError(f"spammers must be a share in [0, 1), got {self.spammers!r}")
        if not (isinstance(self.annotators, int) and self.annotators >= 1):
            raise ValueError(f"annotators must be a positive integer, got {self.annotators!r}")
        if not (isinstance(self.check_every, int) and self.check_every >= 2):
            raise ValueError(f"check_every must be an integer >= 2, got {self.check_every!r}")
        if not 0 <= self.honest_check_accuracy <= 1:
            raise ValueError(f"honest_check_accuracy must lie in [0, 1], got {self.honest_check_accuracy!r}")
        if not (self.spam_seconds > 0 and self.honest_seconds > 0):
            raise ValueError("spam_seconds and honest_seconds must be positive")


class _CrowdLog:
    """Every answer of the simulated annotators (judgements and checks), and who is blocked."""

    def __init__(self, crowd: Crowd, seed: int):
        self.crowd = crowd
        self.rng = np.random.default_rng([seed, 6])
        self.spammer: dict[int, bool] = {}
        spam_count = int(round(crowd.spammers * crowd.annotators))
        self.pool = list(range(crowd.annotators))
        for annotator in self.pool:
            self.spammer[annotator] = annotator < spam_count
        self.tasks = {annotator: 0 for annotator in self.pool}
        self.blocked: set[int] = set()
        # one row per answer: annotator, comparison, value, shown, seconds, gold, pair, item
        self.annotator: list[int] = []
        self.comparison: list[str] = []
        self.value: list[int] = []
        self.shown: list[int] = []
        self.seconds: list[float] = []
        self.gold: list[int | None] = []
        self.pair: list[Pair | None] = []
        self.item: list[str | None] = []
        self.spam_judgements = 0

    def _seconds(self, annotator: int) -> float:
        median = self.crowd.spam_seconds if self.spammer[annotator] else self.crowd.honest_seconds
        return float(median * np.exp(0.3 * self.rng.standard_normal()))

    def _log(self, annotator, comparison, value, seconds, gold, pair, item):
        self.annotator.append(annotator)
        self.comparison.append(comparison)
        self.value.append(int(value))
        self.shown.append(int(value) * (1 if self.rng.random() < 0.5 else -1))
        self.seconds.append(seconds)
        self.gold.append(gold)
        self.pair.append(pair)
        self.item.append(item)

    def answer(self, pair: Pair, item: str, label: int) -> int:
        """One judgement of (pair, item) whose honest answer is ``label``; returns the answer
        given (after the annotator's gold check, when one is due)."""
        annotator = self.pool[int(self.rng.integers(len(self.pool)))]
        crowd = self.crowd
        if crowd.quality_control and self.tasks[annotator] % crowd.check_every == crowd.check_every - 1:
            correct = int(self.rng.choice((-1, 1)))
            if self.spammer[annotator]:
                given = int(self.rng.integers(-1, 2))
            elif self.rng.random() < crowd.honest_check_accuracy:
                given = correct
            else:
                given = int(self.rng.choice([v for v in (-1, 0, 1) if v != correct]))
            self._log(annotator, f"check-{len(self.value)}", given, self._seconds(annotator), correct, None, None)
            self.tasks[annotator] += 1
        if self.spammer[annotator]:
            given = int(self.rng.integers(-1, 2))
            self.spam_judgements += 1
        else:
            given = int(label)
        self._log(annotator, f"{pair[0]}|{pair[1]}|{item}", given, self._seconds(annotator), None, pair, item)
        self.tasks[annotator] += 1
        return given

    @property
    def checks(self) -> int:
        return sum(g is not None for g in self.gold)

    def assess(self) -> set[int]:
        """Flag annotators with protocol.quality; block the newly flagged ones (a newcomer takes
        each one's place) and return them."""
        if not self.value:
            return set()
        found = annotator_quality(self.annotator, self.comparison, self.value, self.shown, self.seconds,
                                  gold=self.gold)
        newly = {q.annotator for q in found if q.flags and q.annotator not in self.blocked}
        for annotator in sorted(newly):
            self.blocked.add(annotator)
            newcomer = max(self.spammer) + 1
            self.spammer[newcomer] = bool(self.rng.random() < self.crowd.spammers)
            self.tasks[newcomer] = 0
            self.pool[self.pool.index(annotator)] = newcomer
        return newly

    def kept(self, pair: Pair) -> tuple[list[str], list[int]]:
        """The pair's judgements (items, values) by annotators who are not blocked."""
        rows = [j for j, p in enumerate(self.pair) if p == pair and self.annotator[j] not in self.blocked]
        return [self.item[j] for j in rows], [self.value[j] for j in rows]

    def report(self) -> dict:
        excluded = sum(1 for j, p in enumerate(self.pair) if p is not None and self.annotator[j] in self.blocked)
        judgements = sum(p is not None for p in self.pair)
        spammers_seen = sum(self.spammer.values())
        return {
            "spammers": self.crowd.spammers,
            "quality_control": self.crowd.quality_control,
            "judgements": judgements,
            "spam_judgements": self.spam_judgements,
            "checks": self.checks,
            "excluded_judgements": excluded,
            "annotations_spent": judgements + self.checks,
            "annotators_blocked": len(self.blocked),
            "spammers_blocked": sum(self.spammer[a] for a in self.blocked),
            "spammers_seen": spammers_seen,
        }


def _without_excluded(state: ProtocolState, log: _CrowdLog, pairs: set[Pair]) -> ProtocolState:
    """The state with the counts of ``pairs`` rebuilt from their kept judgements; a pair that
    was already closed is marked filled, so that the next close decides it again."""


    rebuilt = list(state.pairs)
    for index, pair in enumerate(state.pairs):
        if pair.key not in pairs:
            continue
        items, values = log.kept(pair.key)
        metric_items = list(pair.metric)
        counts = counts_from_labels(np.array(items, dtype=str), np.array(values, dtype=np.int64),
                                    np.array(metric_items, dtype=str),
                                    np.array([pair.metric[i] for i in metric_items], dtype=np.int64))
        votes: dict[str, int] = {}
        for item, value in zip(items, values):
            votes[item] = votes.get(item, 0) + int(value)
        status = pair.status
        if status in (adaptive.DECIDED, adaptive.EXHAUSTED, adaptive.FUTILE, adaptive.WAITING):
            status = adaptive.FILLED
        rebuilt[index] = replace(
            pair,
            paired=tuple(tuple(int(x) for x in row) for row in counts.paired),
            human_only=tuple(int(x) for x in counts.human_only),
            metric_only=tuple(int(x) for x in counts.metric_only),
            judged_items=frozenset(items),
            votes=MappingProxyType(votes),
            status=status,
        )
    return replace(state, pairs=tuple(rebuilt))


def replay(
    human,
    metric=None,
    *,
    batch: int = 10,
    gamma: float = 0.05,
    seed: int = 0,
    policy: str | None = None,
    method: str = "fast",
    strict: bool = False,
    budget: int | None = None,
    decide: Callable | None = None,  # default: cached_decide (closed form without metric)
    progress: Callable[[str], None] | None = None,
    crowd: Crowd | None = None,
    extra_metrics: Sequence = (),
    **policy_options,
) -> ReplayResult:
    """Replay the protocol with the given human labels as annotators.

    human   (first, second) -> labels with ``.items`` (k,) and ``.values`` (k,) (PairLabels)
            or an (items, values) tuple; several labels per item are allowed
    metric  same shape, one label per item, or None / {} for the human-only protocol
    budget  human labels the protocol may use; default all of them
    policy  ProtocolSettings.policy (None: the settings' default, the error-controlled rule;
            the paper's Algorithm 2 is ``policy="paper", rule="bayes"``)
    crowd   simulated annotators (spammers, quality control; see Crowd), or None: every
            label is given as the bundle has it
    extra_metrics  further metric tables (same shape as ``metric``): all of them combine into
            one prediction per item through the calibration cross-fitted on the other pairs'
            labels so far (protocol.adaptive.calibrated, before every opening), which the
            control variate uses; ``metric``'s labels stay the pairs' metric labels
    policy_options  further ProtocolSettings fields (futility, futility_min_judgements, ...)
    """
    began = time.perf_counter()
    human = labels_by_pair(human, "human")
    metric = labels_by_pair(metric, "metric") if metric else {}
    human = {k: v for k, v in human.items() if len(v[1])}
    if not human:
        raise ValueError("no pair has human labels: the replay needs complete human labels")
    extra = sorted(set(metric) - set(human))
    if extra:
        raise ValueError(f"metric labels for pairs without human labels, e.g. {extra[0]}")
    metric_maps = {}
    for key, (items, values) in metric.items():
        if len(set(items)) != len(items):
            raise ValueError(f"metric labels of {key} repeat an item; a metric gives one label per item and pair")
        metric_maps[key] = dict(zip(items.tolist(), values.tolist()))
    available = sum(len(v[1]) for v in human.values())
    if policy is not None:
        policy_options["policy"] = policy
    settings = ProtocolSettings(
        budget=available if budget is None else budget,
        batch=batch,
        gamma=gamma,
        strict=strict,
        method=method,
        seed=seed,
        **policy_options,
    )
    state = adaptive.start(settings, {k: len(v[1]) for k, v in human.items()}, metric_maps)
    # Uniform draws without replacement = walking a seeded random permutation of the labels.
    order = {
        key: np.random.default_rng([seed, 4, stable_hash(*key)]).permutation(len(values))
        for key, (_, values) in human.items()
    }

    def collect(current: ProtocolState, want):
        for (first, second), count in want.items():
            items, values = human[(first, second)]
            done = current.pair(first, second).judgements
            chosen = order[(first, second)][done : done + count]
            yield first, second, items[chosen], values[chosen]

    def report(current: ProtocolState):
        if progress is not None:
            open_pairs = sum(p.status == adaptive.WAITING for p in current.pairs)
            progress(
                f"close {current.closes}: {open_pairs} pairs undecided, "
                f"{current.spent}/{available} labels used, {time.perf_counter() - began:.1f} s"
            )

    prepare = None
    if extra_metrics:
        features = metric_features([metric, *extra_metrics])

        def prepare(current: ProtocolState) -> ProtocolState:
            return adaptive.calibrated(current, features)

    if crowd is None:
        state = adaptive.run_rounds(state, collect, decide=decide or _replay_decide, on_round=report,
                                    prepare=prepare)
        return _score(state, human, available, gamma, began)
    log = _CrowdLog(crowd, seed)
    while not state.finished:
        if prepare is not None:
            state = prepare(state)
        state = adaptive.open_rounds(state)
        for first, second, items, values in list(collect(state, adaptive.needed(state))):
            given = [log.answer((first, second), item, value) for item, value in zip(items.tolist(), values.tolist())]
            state = adaptive.record_judgements(state, first, second, items, given)
        if crowd.quality_control:
            newly = log.assess()
            if newly:
                touched = {log.pair[j] for j, a in enumerate(log.annotator) if a in newly and log.pair[j] is not None}
                state = _without_excluded(state, log, touched)
        state = adaptive.close_rounds(state, force=True, decide=decide or _replay_decide)
        report(state)
    result = _score(state, human, available, gamma, began)
    from dataclasses import replace as replace_result

    return replace_result(result, crowd=log.report())


def _replay_decide(counts, *, gamma: float, method: str, seed: int):
    if all(not np.asarray(c.metric_only).any() for c in counts):
        return adaptive.decide_closed_form(counts, gamma=gamma)
    return cached_decide(counts, gamma=gamma, method=method, seed=seed)


def _score(state: ProtocolState, human, available: int, gamma: float, began: float) -> ReplayResult:
    reference, counts = reference_decisions(human, gamma)
    decisions = state.decisions()
    categories = compare_decisions(reference, decisions)
    rates = {name: float(np.mean([c == name for c in categories.values()])) for name in
             ("Correct", "Inversion", "Omission", "Insertion")}
    divergences = []
    for pair in state.pairs:
        n = counts[pair.key]
        p_prot = np.asarray(pair.p_mean if pair.p_mean is not None else (n + 1) / (n.sum() + 3))
        divergences.append(kld(p_prot, n / n.sum()))
    finite = [d for d in divergences if math.isfinite(d)]
    wrong = [reference[k] == 0 and decisions[k] != 0 and decisions[k] == -np.sign(counts[k][0] - counts[k][2])
             for k in reference]
    used = state.spent
    return ReplayResult(
        pairs=len(state.pairs),
        annotations_available=available,
        annotations_used=used,
        annotation_fraction=used / available,
        correct=rates["Correct"],
        inversion=rates["Inversion"],
        omission=rates["Omission"],
        insertion=rates["Insertion"],
        kld=float(np.mean(finite)) if finite else math.nan,
        kld_skipped=len(divergences) - len(finite),
        seconds=round(time.perf_counter() - began, 3),
        decisions=decisions,
        reference=reference,
        categories=categories,
        used={p.key: p.judgements for p in state.pairs},
        state=state,
        wrong_direction_near_null=float(np.mean(wrong)) if wrong else 0.0,
    )


def load(bundle_path: str, metric: str):
    """(human, metric) label tables of a bundle; metric "none" gives an empty metric table."""
    human, tables = load_metrics(bundle_path, metric)
    return human, tables[0] if tables else {}


def load_metrics(bundle_path: str, metrics: str):
    """(human, [metric tables]) of a bundle; ``metrics`` one name, several joined by commas
    ("gpt35,pandalm7b"), or "none" (no table)."""
    bundle = read_bundle(bundle_path)
    human = human_labels(bundle)
    if not human:
        raise ValueError(f"{bundle_path} has no human labels: the replay needs complete human labels")
    names = [] if metrics == "none" else [name.strip() for name in metrics.split(",")]
    tables = []
    for name in names:
        table = metric_labels(bundle, name)
        if not table:
            raise ValueError(f"{bundle_path} has no labels for metric {name!r}")
        tables.append(table)
    return human, tables


def simulate(
    bundle_path: str,
    metric: str,
    *,
    null: bool = False,
    progress: Callable[[str], None] | None = None,
    favour: float = 0.0,
    **options,
) -> ReplayResult:
    """Load a bundle and replay; what the command line runs (options as for ``replay``).
    ``metric``: one name, "none", or several joined by commas (combined by the cross-fitted
    calibration, ``replay(extra_metrics=...)``). ``favour`` > 0 with ``null``: the favouritism
    null (``null_tables``)."""
    if "," in metric or favour > 0:
        human, tables = load_metrics(bundle_path, metric)
        if null:
            human, tables = null_tables(human, tables, seed=options.get("seed", 0), favour=favour)
        return replay(human, tables[0] if tables else None, progress=progress, extra_metrics=tables[1:], **options)
    human, metric_table = load(bundle_path, metric)
    if null:
        human, metric_table = null_labels(human, metric_table, seed=options.get("seed", 0))
    return replay(human, metric_table, progress=progress, **options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.simulate", description=__doc__.split("\n\n")[0])
    defaults = ProtocolSettings(budget=0)
    parser.add_argument("bundle")
    parser.add_argument("--metric", required=True,
                        help="metric name in the bundle, 'none' for human only, or several names joined by commas "
                             "(A,B: combined by a calibration cross-fitted on the other pairs' labels)")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--gamma", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", choices=adaptive.POLICIES, default=defaults.policy,
                        help=f"default {defaults.policy} (the paper's Algorithm 2: --policy paper --rule bayes)")
    parser.add_argument("--method", choices=adaptive.METHODS, default="fast")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--strict", action="store_true", help="split gamma over the looks: false ± rate <= gamma")
    parser.add_argument("--spending", choices=adaptive.SPENDING, default="bonferroni",
                        help="how --strict splits gamma (default bonferroni: gamma / looks)")
    parser.add_argument("--rule", choices=adaptive.RULES, default=defaults.rule,
                        help=f"decision rule (default {defaults.rule}): eprocess (anytime-valid: false ± <= gamma) "
                             "or bayes (the paper's theta thresholds, no error control)")
    parser.add_argument("--family", choices=adaptive.FAMILIES, default=defaults.family,
                        help=f"rule eprocess: control across the pairs (default {defaults.family}: e-BH, false "
                             "discovery rate <= gamma; bonferroni: family-wise error <= gamma; none: per pair)")
    parser.add_argument("--max-bet", type=float, default=defaults.max_bet,
                        help=f"rule eprocess: largest bet on one item (default {defaults.max_bet})")
    parser.add_argument("--null", action="store_true", help="replay null pairs (systems swapped at random within items)")
    parser.add_argument("--favour", type=float, default=0.0, metavar="P",
                        help="with --null: the favouritism null, each metric label replaced by +1 with probability P")
    parser.add_argument("--no-control-variate", action="store_true",
                        help="rule eprocess: the metric as imputed labels in the bet (the rule before issue 38)")
    parser.add_argument("--no-futility-prior", action="store_true",
                        help="rule eprocess: give a pair up by its own labels only, not also when the metric's level "
                             "on it, as a prior fitted on the other pairs, says it cannot be decided "
                             "(protocol.level_prior; the rule before it)")
    parser.add_argument("--baselines", action="store_true",
                        help="also run the human-only sign test and PPI++ at the replay's annotation fraction")
    parser.add_argument("--spammers", type=float, default=None, metavar="P",
                        help="simulate annotators, a share P of them spammers answering at random in ~0.2 s")
    parser.add_argument("--quality-control", action="store_true",
                        help="with simulated annotators: gold checks and exclusion of flagged annotators")
    parser.add_argument("--check-every", type=int, default=10, help="one task in N is a gold check (default 10)")
    parser.add_argument("--annotators", type=int, default=50, help="simulated annotators at work (default 50)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.quality_control and args.spammers is None:
        args.spammers = 0.0

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        crowd = None
        if args.spammers is not None:
            crowd = Crowd(spammers=args.spammers, quality_control=args.quality_control,
                          annotators=args.annotators, check_every=args.check_every)
        result = simulate(
            args.bundle,
            args.metric,
            null=args.null,
            favour=args.favour,
            control_variate=not args.no_control_variate,
            futility_prior=not args.no_futility_prior,
            progress=None if args.quiet else progress,
            batch=args.batch,
            gamma=args.gamma,
            seed=args.seed,
            policy=args.policy,
            method=args.method,
            strict=args.strict,
            spending=args.spending,
            rule=args.rule,
            family=args.family,
            max_bet=args.max_bet,
            crowd=crowd,
        )
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = result.summary()
    if args.null:
        summary["null_false_decision_rate"] = result.false_decision_rate
    if args.baselines:
        human, metric_table = load(args.bundle, args.metric.split(",")[0])
        if args.null:
            human, metric_table = null_labels(human, metric_table, seed=args.seed)
        found = baselines(human, metric_table, fraction=result.annotation_fraction,
                          gamma=args.gamma, seed=args.seed)
        summary["baselines"] = []
        for name, baseline in found.items():
            row = baseline.summary()
            if args.null:
                row["null_false_decision_rate"] = float(np.mean(
                    [d != 0 for d in baseline.decisions.values()]))
            summary["baselines"].append(row)
    if args.json:
        print(json.dumps(summary, allow_nan=False))
    else:
        for key, value in summary.items():
            if key == "baselines":
                for row in value:
                    print(f"{'baseline ' + row['baseline']:22s} " + "  ".join(
                        f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float)))
                continue
            print(f"{key:22s} {value:.4f}" if isinstance(value, float) else f"{key:22s} {value}")
        print(f"{'kld_skipped':22s} {result.kld_skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
