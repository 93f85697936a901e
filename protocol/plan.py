"""The planner: how many human annotations will a study need, before it has any?

For every grid point (budget, batch size, gamma) the planner replays the budgeted protocol
(``protocol.simulate.replay``, the same code as the offline replay and the app) on the
study's own metric labels, with simulated annotators where the study has no human labels.
It reports the expected annotations, their fraction of all comparisons, the expected share
of pairs decided correctly / omitted / inverted / inserted against the human-only decision
on all (simulated) labels, and an interval.

Simulated humans (``simulated_human_labels``) come from three explicit assumptions
(``Assumptions``), one item and pair at a time:

* ``tie_rate``      P(the human label of an item is a tie), the same for every item;
* ``spread``        how far apart the systems are for humans: the standard deviation of their
                    Bradley-Terry strengths. The S systems are put in the metric's order
                    (``metric_order``: their mean non-tie margin over their pairs) at evenly
                    spaced normal quantiles theta_s = spread x Phi^-1((rank + 1/2) / S), and a
                    pair's human non-tie margin d = P(+ | not a tie) - P(- | not a tie) is
                    tanh((theta_first - theta_second) / 2) (clipped to +-0.98). On every
                    bundle in the repository this one-parameter shape reproduces the
                    quantiles of the real human pair margins (docs/planner.md). The metric's
                    margins give the order of the systems, not their distance: BERTScore's
                    margins on SummEval relevance are a third of the humans', chrF's on WMT
                    about the same (``metric_spread`` reports what the metric's own margins
                    would imply, as a hint);
* ``metric_error``  how often the metric's label disagrees with the human's on an item, beyond
                    the pair's margins: non-tie human labels follow
                    P(+ | metric label f) = sigmoid(alpha_pair + beta f), beta =
                    logit(1 - metric_error), alpha_pair solved so that the pair's margin is d.
                    In a pair without a margin, P(human != metric | neither ties) =
                    metric_error.

Two more describe how the prompts differ (the arena generator's ``prompt_types`` and
``type_sd``, protocol/arena.py; the planner's axis "kinds of prompt"):

* ``kinds``         kinds of prompt (0 or 1: none). The study's own when its items carry a
                    ``prompt_kind`` (``plan(kinds=...)``); else the prompts are dealt to this
                    many kinds at random (a seeded permutation, as the arena does);
* ``kind_sd``       sd of a system's effect on a kind, in Bradley–Terry log-strength (the
                    unit of ``spread``): each replay draws every system's effect on every
                    kind, N(0, kind_sd^2), and a simulated label of pair (a, b) on a prompt of
                    kind k has effect_a,k - effect_b,k added to its log-odds, so a pair's
                    labels are over-dispersed as on the arena's prompt-type arenas (the
                    arena's type_sd is in its quality units, where a difference's noise has
                    sd sqrt(3): about the same number in log-odds).

The active design's replay is told the kinds only when they are the study's own (what the
app does with items that carry a kind: a pair's items take turns over them and the fit states
their uncertainty, ``active_ranking.fit_by_kind``); stated kinds of a study without them are
hidden from it, as they would be in the app.

``fit_assumptions`` estimates the first three from human labels where a study or bundle has them
(tie share; the spread matched to the median |human pair margin|; the profile maximum
likelihood beta of the model above); ``DEFAULT_ASSUMPTIONS`` are the medians over the
repository's six bundles of each bundle's median fit over its metrics, their ranges the lowest
and highest bundle (``scripts/report/planner_defaults.py``, docs/planner.md).
A pair with human labels for every item it has a metric label for is replayed on its real
labels; the others get simulated humans.

The interval: the replay is repeated ``reps`` times (fresh simulated humans and protocol
seed each time) under the stated assumptions and under each assumption moved to the low
and the high end of its range with the others as stated (1 + 2 x 3 scenarios); ``interval``
is the smallest and largest mean fraction over those scenarios (each scenario's mean over
its reps), widened by two standard errors of the reps. The expected values are the mean
over the reps of the stated assumptions.

A study of the ranking design (protocol.ranking_design, docs/ranking.md) is planned by
replaying its merge sort instead (``design="ranking"``, ``replay_ranking``): a grid point's
budget is then the most labels each comparison may take, and a pair counts as decided when
the sort's partial order orders it (docs/planner.md, "Ranking studies").
A study of the active design (protocol.active_ranking) is planned by replaying it
(``design="active"``, ``replay_active``): a grid point's budget is the study's budget, and the
plan adds what the design states about the order (``Plan.order``: neighbours resolved and
ordered, the share of replays that reached the stop, the resolved neighbours the full human
fit reverses by more than the resolution, Kendall tau; docs/planner.md, "Active studies").

Command line::

    python -m protocol.plan BUNDLE --metric M[,M2...] [--budget B ...] [--batch K ...] [--gamma G ...]
        [--futility F ...] [--no-human] [--reps R] [--policy paper|adaptive] [--rule eprocess|bayes] [--seed S]
        [--design all_pairs|ranking|active] [--kinds K] [--kind-sd SD [LOW HIGH]] [--json [--details]]

prints ``{"assumptions": {...}, "plans": [{"budget", "batch", "gamma",
"expected_annotations", "expected_fraction", "expected_correct", "interval": [lo, hi]},
...]}`` with ``--json`` (fraction = expected annotations / comparisons).
``--details`` adds per plan ``expected_omission``, ``expected_inversion``,
``expected_insertion``, ``comparisons``, ``scenarios`` (each scenario's mean fraction) and
``futility`` (the level replayed)
(and ``order`` under the active design),
and at the top ``pairs``, ``pairs_with_human_labels`` and ``metric_spread``.
``--no-human`` ignores the bundle's human labels (plans as before a launch).
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from scipy.special import expit, logit, ndtri
from scipy.stats import kendalltau

from . import adaptive
from .active_ranking import CLOSE, OPEN, ORDERED, PRIOR_TIES, ActiveSettings, active_decided, active_run
from .bundle import read_bundle
from .leaderboard import fit_scores
from .preferences import human_labels, metric_labels
from .ranking import category_rates, compare_decisions
from .ranking_design import RankingSettings, decide_pair, item_order, rank
from .simulate import labels_by_pair, reference_decisions, replay, stable_hash

Pair = tuple[str, str]
Labels = tuple[np.ndarray, np.ndarray]
ASSUMPTION_NAMES = ("metric_error", "tie_rate", "spread")
#: every assumption with a range, each moved to its ends by the interval: the fitted three and
#: the size of the kinds' effect (human labels say nothing of it: ``with_kinds``)
RANGED_NAMES = ASSUMPTION_NAMES + ("kind_sd",)
#: the most kinds of prompt a plan simulates, and the largest effect (as strong as the widest
#: spread of the systems)
MAX_KINDS = 200
MAX_KIND_SD = 5.0
#: largest |human non-tie margin| a simulated pair gets: a few labels of the other side stay
#: possible, as with real annotators
MAX_MARGIN = 0.98
_BETAS = np.linspace(0.0, 6.0, 25)  # coarse grid of the metric-error fit, refined by 0.01


@dataclass(frozen=True)
class Assumptions:
    """What the simulated annotators do (module docstring), each with its plausible range.

    metric_error in [0, 0.5]: P(human != metric | neither ties) in a pair without a margin
    tie_rate in [0, 1): P(human tie) per item
    spread in [0, 5]: standard deviation of the systems' Bradley-Terry strengths
    *_range: (low, high) containing the value; the interval moves each assumption to its ends
    source: where the values come from ("defaults", "human labels", "edited")
    kinds in [0, MAX_KINDS]: kinds of prompt (0 or 1: none; the module docstring)
    kind_sd in [0, MAX_KIND_SD]: sd of a system's effect on a kind (log-strength); its range
    is moved to its ends only when there are kinds
    """

    metric_error: float
    tie_rate: float
    spread: float
    metric_error_range: tuple[float, float]
    tie_rate_range: tuple[float, float]
    spread_range: tuple[float, float]
    source: str = "defaults"
    kinds: int = 0
    kind_sd: float = 0.0
    kind_sd_range: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        if not isinstance(self.kinds, (int, np.integer)) or isinstance(self.kinds, bool) \
                or not 0 <= self.kinds <= MAX_KINDS:
            raise ValueError(f"kinds must be a whole number in [0, {MAX_KINDS}], got {self.kinds!r}")
        bounds = {"metric_error": (0.0, 0.5), "tie_rate": (0.0, 0.99), "spread": (0.0, 5.0),
                  "kind_sd": (0.0, MAX_KIND_SD)}
        for name, (lowest, highest) in bounds.items():
            value = getattr(self, name)
            low, high = getattr(self, f"{name}_range")
            for label, number in ((name, value), (f"{name} low", low), (f"{name} high", high)):
                if not isinstance(number, (int, float)) or isinstance(number, bool) \
                        or not math.isfinite(number) or not lowest <= number <= highest:
                    raise ValueError(f"{label} must be a number in [{lowest}, {highest}], got {number!r}")
            if not low <= value <= high:
                raise ValueError(f"{name} {value} must lie in its range [{low}, {high}]")

    def to_dict(self) -> dict:
        out = asdict(self)
        for name in RANGED_NAMES:
            out[f"{name}_range"] = list(out[f"{name}_range"])
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> Assumptions:
        """The inverse of ``to_dict``; without the kinds of prompt (a plan stored before them),
        none."""
        try:
            kinds = data.get("kinds", 0)
            kind_sd = float(data.get("kind_sd", 0.0))
            return cls(**{name: float(data[name]) for name in ASSUMPTION_NAMES},
                       **{f"{name}_range": tuple(float(x) for x in data[f"{name}_range"])
                          for name in ASSUMPTION_NAMES},
                       source=str(data.get("source", "edited")),
                       # a whole number read back from JSON as 4.0 is 4; anything else is refused
                       kinds=int(kinds) if isinstance(kinds, float) and kinds.is_integer() else kinds,
                       kind_sd=kind_sd,
                       kind_sd_range=tuple(float(x) for x in data.get("kind_sd_range", (kind_sd, kind_sd))))
        except KeyError as missing:
            raise ValueError(f"assumptions lack {missing}") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"assumptions are malformed: {error}") from None

    def scenarios(self) -> list[tuple[str, Assumptions]]:
        """The stated assumptions, then each one at the low and high end of its range (the
        kinds' effect only when there are kinds)."""
        out = [("stated", self)]
        for name in RANGED_NAMES if self.kinds > 1 else ASSUMPTION_NAMES:
            for end, value in zip(("low", "high"), getattr(self, f"{name}_range")):
                if value != getattr(self, name):
                    out.append((f"{name} {end}", replace(self, **{name: value})))
        return out


#: ``fit_assumptions`` on the repository's six bundles with human labels (every metric): the
#: median over bundles of each bundle's median over its metrics, and as the range the lowest
#: and highest bundle (``python scripts/report/planner_defaults.py``, rounded; docs/planner.md).
DEFAULT_ASSUMPTIONS = Assumptions(
    metric_error=0.400,
    tie_rate=0.310,
    spread=0.818,
    metric_error_range=(0.215, 0.454),
    tie_rate_range=(0.081, 0.673),
    spread_range=(0.236, 1.434),
)


def with_kinds(fitted: Assumptions, stated: Assumptions) -> Assumptions:
    """``fitted`` (from human labels) with the kinds of prompt ``stated``: the labels do not
    say how the prompts differ, so the researcher's statement stands."""
    return replace(fitted, kinds=stated.kinds, kind_sd=stated.kind_sd, kind_sd_range=stated.kind_sd_range)


# --------------------------------------------------------------------------------------------
# the model of the annotators
# --------------------------------------------------------------------------------------------
def non_tie_margin(values: np.ndarray) -> float:
    """(n+ - n-) / (n+ + n-) of labels in {-1, 0, 1}; 0 when every label is a tie."""
    values = np.asarray(values)
    plus, minus = int(np.sum(values == 1)), int(np.sum(values == -1))
    return (plus - minus) / (plus + minus) if plus + minus else 0.0


def solve_offsets(class_counts: np.ndarray, target: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """alpha with sum_c n_c sigmoid(alpha + beta f_c) / sum_c n_c = target, per row.

    class_counts (..., 3) items by metric label in the order (+, =, -), f = (1, 0, -1);
    target (...) in (0, 1); beta broadcastable to (...). Bisection (the left side increases
    in alpha), 60 steps on [-40, 40].
    """
    counts = np.asarray(class_counts, dtype=float)
    f = np.array([1.0, 0.0, -1.0])
    beta = np.asarray(beta, dtype=float)[..., None]
    target = np.asarray(target, dtype=float)
    total = np.maximum(counts.sum(axis=-1), 1e-12)
    low = np.full(np.broadcast_shapes(target.shape, counts.shape[:-1], beta.shape[:-1]), -40.0)
    high = -low
    for _ in range(60):
        middle = (low + high) / 2
        mean = np.sum(counts * expit(middle[..., None] + beta * f), axis=-1) / total
        above = mean > target
        high = np.where(above, middle, high)
        low = np.where(above, low, middle)
    return (low + high) / 2


def systems_of(table: Mapping[Pair, object]) -> tuple[str, ...]:
    return tuple(sorted({name for key in table for name in key}))


def metric_order(metric: Mapping[Pair, Labels]) -> tuple[str, ...]:
    """Systems best first by their mean non-tie metric margin over their pairs (ties by name)."""
    totals: dict[str, list[float]] = {name: [] for name in systems_of(metric)}
    for (first, second), (_, values) in metric.items():
        margin = non_tie_margin(values)
        totals[first].append(margin)
        totals[second].append(-margin)
    return tuple(sorted(totals, key=lambda name: (-np.mean(totals[name]) if totals[name] else 0.0, name)))


def strength_gaps(systems: int) -> np.ndarray:
    """|Phi^-1((i + 1/2) / S) - Phi^-1((j + 1/2) / S)| over the S (S - 1) / 2 pairs i < j."""
    z = ndtri((np.arange(systems) + 0.5) / systems)
    return np.abs(z[:, None] - z[None, :])[np.triu_indices(systems, 1)]


def pair_margins(order: Sequence[str], spread: float) -> dict[Pair, float]:
    """Human non-tie margin of every canonical pair of the systems in ``order`` (best first)."""
    strength = dict(zip(order, spread * -ndtri((np.arange(len(order)) + 0.5) / max(len(order), 1))))
    out = {}
    for a, b in itertools.combinations(sorted(order), 2):
        out[(a, b)] = float(np.clip(np.tanh((strength[a] - strength[b]) / 2), -MAX_MARGIN, MAX_MARGIN))
    return out


def spread_from_margins(margins: np.ndarray, systems: int) -> float:
    """The spread whose median |pair margin| over S systems equals that of ``margins``."""
    target = float(np.median(np.abs(np.asarray(margins, dtype=float))))
    gaps = strength_gaps(systems)
    if systems < 2 or target <= 0:
        return 0.0
    target = min(target, MAX_MARGIN)
    low, high = 0.0, 5.0
    if np.median(np.tanh(high * gaps / 2)) <= target:
        return high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if np.median(np.tanh(middle * gaps / 2)) < target else (low, middle)
    return (low + high) / 2


def metric_spread(metric) -> float:
    """What the metric's own pair margins would make of ``spread`` (a hint, not a default)."""
    metric = labels_by_pair(metric, "metric")
    return spread_from_margins(np.array([non_tie_margin(v) for _, v in metric.values()]),
                               len(systems_of(metric)))


def simulated_human_labels(metric_values: np.ndarray, margin: float, assumptions: Assumptions,
                           rng: np.random.Generator, shift: np.ndarray | None = None) -> np.ndarray:
    """One simulated human label per item of one pair with the given human non-tie margin.

    metric_values (k,) the pair's metric labels; margin in [-1, 1]; shift None or (k,): added
    to each item's log-odds (the systems' effects on the item's kind of prompt; the margin is
    that of the items without it). Returns (k,) in {-1, 0, 1}.
    """
    f = np.asarray(metric_values, dtype=np.int64)
    beta = float(logit(1 - assumptions.metric_error)) if assumptions.metric_error > 0 else _BETAS[-1]
    counts = np.array([np.sum(f == 1), np.sum(f == 0), np.sum(f == -1)])
    alpha = float(solve_offsets(counts, np.array((1 + margin) / 2), beta))
    plus = rng.random(len(f)) < expit(alpha + beta * f + (0.0 if shift is None else shift))
    tie = rng.random(len(f)) < assumptions.tie_rate
    return np.where(tie, 0, np.where(plus, 1, -1)).astype(np.int64)


def fit_assumptions(metric, human, *, bootstrap: int = 100) -> Assumptions:
    """The assumptions estimated from a study's human labels (the module docstring's model).

    metric, human: (first, second) -> labels (PairLabels or (items, values)), one label per
    item. Only items with both labels count. tie_rate: share of human ties; spread: matched to
    the median |human non-tie pair margin| (``spread_from_margins``); metric_error:
    sigmoid(-beta) at the
    profile maximum likelihood beta (each pair's alpha solved for its observed margin).
    Ranges: 5th and 95th percentiles over ``bootstrap`` resamples of the pairs (0: the
    point estimates, a range of width 0).
    Raises ValueError when no item has both labels.
    """
    stats = _paired_statistics(metric, human)
    if stats is None:
        raise ValueError("no item has both a human and a metric label: nothing to estimate from")
    systems = len(systems_of(labels_by_pair(metric, "metric")))
    point = _fit_from_statistics(*stats, systems=systems)
    rng = np.random.default_rng(20261123)
    pairs = len(stats[0])
    resampled = np.array([point] + [
        _fit_from_statistics(*(s[choice] for s in stats), systems=systems)
        for choice in (rng.integers(0, pairs, pairs) for _ in range(bootstrap))
    ])
    low, high = np.percentile(resampled, [5, 95], axis=0) if bootstrap else (point, point)
    ranges = {name: (float(min(low[j], point[j])), float(max(high[j], point[j])))
              for j, name in enumerate(ASSUMPTION_NAMES)}
    return Assumptions(**dict(zip(ASSUMPTION_NAMES, (float(x) for x in point))),
                       **{f"{name}_range": ranges[name] for name in ASSUMPTION_NAMES},
                       source="human labels")


def _paired_statistics(metric, human):
    """Per pair with paired items: metric class counts (P, 3), non-tie human '+' per metric
    class (P, 3), non-tie human labels per metric class (P, 3), human ties (P,), items (P,),
    metric non-tie margin (P,), human non-tie margin (P,). None without paired items."""
    metric = labels_by_pair(metric, "metric")
    human = labels_by_pair(human, "human")
    rows = []
    for key in sorted(set(metric) & set(human)):
        metric_of = dict(zip(metric[key][0].tolist(), metric[key][1].tolist()))
        h_items, h_values = human[key]
        known = [(metric_of[i], v) for i, v in zip(h_items.tolist(), h_values.tolist()) if i in metric_of]
        if not known:
            continue
        f = np.array([k[0] for k in known])
        h = np.array([k[1] for k in known])
        classes = [f == 1, f == 0, f == -1]
        rows.append((
            [c.sum() for c in classes],
            [np.sum(h[c] == 1) for c in classes],
            [np.sum(h[c] != 0) for c in classes],
            np.sum(h == 0), len(h), non_tie_margin(f), non_tie_margin(h),
        ))
    if not rows:
        return None
    return tuple(np.array([r[j] for r in rows], dtype=float) for j in range(7))


def _fit_from_statistics(metric_counts, plus, decided, ties, items, metric_margin, human_margin, *, systems):
    tie_rate = ties.sum() / items.sum()
    spread = spread_from_margins(human_margin, systems)
    # profile likelihood of beta: each pair's alpha matches its observed non-tie '+' share
    # (smoothed by half a label so that a unanimous pair keeps a finite alpha)
    non_tie = decided.sum(axis=1)
    share = (plus.sum(axis=1) + 0.5) / (non_tie + 1.0)
    f = np.array([1.0, 0.0, -1.0])

    def best(betas: np.ndarray) -> float:
        alpha = solve_offsets(decided[:, None, :], share[:, None], betas[None, :])  # (P, B)
        p = np.clip(expit(alpha[..., None] + betas[None, :, None] * f), 1e-12, 1 - 1e-12)  # (P, B, 3)
        loglik = np.sum(plus[:, None, :] * np.log(p) + (decided - plus)[:, None, :] * np.log(1 - p),
                        axis=(0, 2))
        return float(betas[int(np.argmax(loglik))])

    coarse = best(_BETAS)
    beta = best(np.clip(np.linspace(coarse - 0.25, coarse + 0.25, 51), 0.0, _BETAS[-1]))
    metric_error = float(expit(-beta))
    return np.array([metric_error, min(tie_rate, 0.99), spread])


# --------------------------------------------------------------------------------------------
# the ranking design's replay
# --------------------------------------------------------------------------------------------
DESIGNS = ("all_pairs", "ranking", "active")
# The designs whose replay runs a futility level of the plan's (the study's, or several side by
# side); the active design's runs the default.
REPLAYS_FUTILITY = frozenset({"all_pairs", "ranking"})


@dataclass(frozen=True)
class RankingReplay:
    """One replay of the ranking design, scored as ``simulate.replay`` scores the protocol:
    rates are shares of all pairs; ``runs`` the pairs the sort ran."""

    annotations_used: int
    runs: int
    correct: float
    inversion: float
    omission: float
    insertion: float


def _start_positions(metric: Mapping[Pair, Labels], start: Sequence[str], what: str) -> dict[str, int]:
    """System name -> its position in ``start``, which must name each system of ``metric`` once."""
    position = {name: i for i, name in enumerate(start)}
    if set(position) != set(systems_of(metric)) or len(position) != len(start):
        raise ValueError(f"{what} must name each of the {len(systems_of(metric))} systems once")
    return position


def _oriented_labels(human: Mapping[Pair, Labels], metric: Mapping[Pair, Labels], first: str,
                     second: str) -> tuple[np.ndarray, np.ndarray]:
    """The pair's human and metric labels over the metric's items, +1 = ``first`` better
    (asked only for the pairs a design runs: a few dozen of 1,225 at 50 systems)."""
    sign = 1
    if (first, second) not in metric:
        first, second, sign = second, first, -1
    items, values = metric[first, second]
    human_items, human_values = human[first, second]
    if not np.array_equal(human_items, items):
        by_item = dict(zip(human_items.tolist(), human_values.tolist()))
        human_values = np.array([by_item[item] for item in items.tolist()], dtype=np.int64)
    return sign * np.asarray(human_values, dtype=np.int64), sign * np.asarray(values, dtype=np.int64)


def replay_ranking(human: Mapping[Pair, Labels], metric: Mapping[Pair, Labels], *, start: Sequence[str],
                   settings: RankingSettings) -> RankingReplay:
    """The merge sort of ``protocol.ranking_design`` from ``start`` (system names, the sort's
    initial order), each comparison run by ``decide_pair`` on the pair's human labels in the
    seeded item order the replays use, betting on the metric's labels of the same items.

    human, metric  (first, second) -> (items, labels) over the same items (``human_table``)
    Scored against the human-only decision on all of a pair's labels at ``settings.gamma``
    (``simulate.reference_decisions``, as the all-pairs replay): a pair the sort's partial
    order orders, decided or implied, counts with that sign, any other as undecided.
    """
    position = _start_positions(metric, start, "the sort's start")
    systems = len(start)

    def compare(i: int, j: int, stage: str):
        labels, metric_values = _oriented_labels(human, metric, start[i], start[j])
        cap = settings.capacity(stage, len(labels))
        return decide_pair(labels, settings=settings.protocol(systems, cap),
                           order=item_order(settings.seed, i, j, len(labels), cap), metric=metric_values)

    result = rank(list(start), compare, settings)
    reference, _ = reference_decisions(human, settings.gamma)
    decisions = {}
    for first, second in reference:
        i, j = position[first], position[second]
        decisions[first, second] = 1 if result.above[i, j] else -1 if result.above[j, i] else 0
    rates = category_rates(compare_decisions(reference, decisions))
    return RankingReplay(annotations_used=result.labels, runs=result.runs, correct=rates["correct"],
                         inversion=rates["inversion"], omission=rates["omission"], insertion=rates["insertion"])


# --------------------------------------------------------------------------------------------
# the active design's replay
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActiveReplay:
    """One replay of the active design (protocol.active_ranking). Its decisions are scored as
    ``RankingReplay``'s (shares of all pairs); what it states about the order is scored against
    the order a full human evaluation fits (Bradley–Terry of every label of every pair):

    runs                 pairs it sampled
    complete             it reached its stop (no neighbour open) within the budget
    neighbours           k - 1
    ordered, resolved    neighbours it reports ordered (P(reversed) <= ``settings.order_misorder``,
                         stated at the confidence); ordered or close
    expected_misordered  its own statement: the expected number of misordered neighbours
    ordered_wrong        ordered neighbours the full fit orders the other way
    resolved_wrong       resolved neighbours the full fit reverses by more than the resolution
    tau                  Kendall tau between its fitted order and the full fit's
    """

    annotations_used: int
    runs: int
    correct: float
    inversion: float
    omission: float
    insertion: float
    complete: bool
    neighbours: int
    ordered: int
    resolved: int
    expected_misordered: float
    ordered_wrong: int
    resolved_wrong: int
    tau: float


def full_fit_scores(human: Mapping[Pair, Labels], start: Sequence[str]) -> np.ndarray:
    """(S,) Bradley–Terry log-strengths, systems in ``start``'s order, of every human label of
    every pair (a tie half a win each; the active design's weak prior): the order a full
    human evaluation would fit, which the active design's fit estimates."""
    position = {name: i for i, name in enumerate(start)}
    wins = np.zeros((len(start), len(start)))
    for (first, second), (_, values) in human.items():
        values = np.asarray(values)
        i, j = position[first], position[second]
        ties = 0.5 * np.count_nonzero(values == 0)
        wins[i, j] += np.count_nonzero(values > 0) + ties
        wins[j, i] += np.count_nonzero(values < 0) + ties
    return fit_scores(wins, prior_ties=PRIOR_TIES)


def replay_active(human: Mapping[Pair, Labels], metric: Mapping[Pair, Labels], *, start: Sequence[str],
                  settings: ActiveSettings, seed: int, kinds: Mapping[object, int] | None = None) -> ActiveReplay:
    """The active design of ``protocol.active_ranking`` from ``start`` (system names, the
    study's initial order), as the app runs it with rounds closing oldest first
    (``active_ranking.active_run``: a round's labels are the next items of its pair in the
    seeded item order the replays use), then every sampled pair's labels through the per-pair
    e-process at ``settings.decision_level``, betting on the metric's labels of the same items,
    in rounds of ``settings.batch`` (``active_decided``).

    human, metric  (first, second) -> (items, labels) over the same items (``human_table``)
    kinds          item -> kind (``item_kinds``), the study's own: the design is told them (a
                   pair's items take turns over the kinds, the fit is by kind) when every pair
                   has the same items, as the app's active design uses its items' kinds
    Decisions are scored against the human-only decision on all of a pair's labels at
    ``settings.gamma`` (a pair the decisions' partial order orders counts with that sign); the
    order against ``full_fit_scores`` (``ActiveReplay``).
    """
    position = _start_positions(metric, start, "the active design's start")
    systems = len(start)
    oriented: dict[Pair, tuple[np.ndarray, np.ndarray]] = {}

    def labels(i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        if (i, j) not in oriented:
            oriented[i, j] = _oriented_labels(human, metric, start[i], start[j])
        return oriented[i, j]

    items = {}
    for first, second in metric:
        i, j = sorted((position[first], position[second]))
        items[i, j] = len(metric[first, second][0])
    # the kinds as the design takes them: one (T,) array over the items every pair shares
    shared = next(iter(metric.values()))[0]
    by_kind = None
    if kinds and all(np.array_equal(pair_items, shared) for pair_items, _ in metric.values()) \
            and all(item in kinds for item in shared.tolist()):
        by_kind = np.array([kinds[item] for item in shared.tolist()])
    step, spent = active_run(lambda i, j: labels(i, j)[0], items=items, start=range(systems), settings=settings,
                             seed=seed, kinds=by_kind)
    above = active_decided(spent, lambda i, j: labels(i, j)[0], lambda i, j: labels(i, j)[1], items=items,
                           systems=systems, settings=settings, seed=seed, batch=settings.batch, kinds=by_kind)
    reference, _ = reference_decisions(human, settings.gamma)
    decisions = {}
    for first, second in reference:
        i, j = position[first], position[second]
        decisions[first, second] = 1 if above[i, j] else -1 if above[j, i] else 0
    rates = category_rates(compare_decisions(reference, decisions))
    full = full_fit_scores(human, start)
    ordered = [n for n in step.neighbours if n.status == ORDERED]
    resolved = [n for n in step.neighbours if n.status in (ORDERED, CLOSE)]
    place = np.empty(systems, dtype=np.int64)
    place[list(step.order)] = np.arange(systems)
    tau = float(kendalltau(place, -full).statistic) if systems > 1 else 1.0
    return ActiveReplay(
        annotations_used=int(sum(spent.values())), runs=len(spent), correct=rates["correct"],
        inversion=rates["inversion"], omission=rates["omission"], insertion=rates["insertion"],
        complete=not any(n.status == OPEN for n in step.neighbours), neighbours=len(step.neighbours),
        ordered=len(ordered), resolved=len(resolved), expected_misordered=step.expected_misordered,
        ordered_wrong=sum(int(full[n.upper] <= full[n.lower]) for n in ordered),
        resolved_wrong=sum(int(full[n.upper] - full[n.lower] < -settings.resolution) for n in resolved),
        tau=tau if np.isfinite(tau) else 0.0)


# --------------------------------------------------------------------------------------------
# plans
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridPoint:
    """One protocol configuration to plan: budget None = every comparison (under the ranking
    design: the most labels each comparison of the sort may take, None = all of its items)."""

    budget: int | None
    batch: int
    gamma: float
    # the futility level of the replay (ProtocolSettings.futility); None: the plan's
    futility: float | None = None


@dataclass(frozen=True)
class Plan:
    """Expected outcome of one grid point; rates are shares of pairs, annotations in labels.

    interval: (low, high) of the annotation fraction (module docstring); scenarios: scenario
    name -> mean fraction over its reps.
    """

    budget: int
    batch: int
    gamma: float
    comparisons: int
    expected_annotations: float
    expected_fraction: float
    expected_correct: float
    expected_omission: float
    expected_inversion: float
    expected_insertion: float
    interval: tuple[float, float]
    scenarios: Mapping[str, float] = field(default_factory=dict)
    # the futility level replayed (the all-pairs protocol's; None: the design's own)
    futility: float | None = None
    # The budgets asked for that this plan stands for when they were above what the study can
    # spend and were capped to ``budget`` (one plan per budget actually replayed).
    asked: tuple[int, ...] = ()
    # What an ordering design states about the order (the active design's, ``_order_summary``):
    # empty for the designs that state decisions only.
    order: Mapping[str, float] = field(default_factory=dict)

    def summary(self, *, details: bool = False) -> dict:
        """The command-line object (exactly the keys of its contract); ``details`` adds the
        omission, inversion and insertion rates, the comparisons and every scenario's mean."""
        out = {
            "budget": self.budget, "batch": self.batch, "gamma": self.gamma,
            "expected_annotations": self.expected_annotations,
            "expected_fraction": self.expected_fraction,
            "expected_correct": self.expected_correct,
            "interval": [self.interval[0], self.interval[1]],
        }
        if details:
            out.update(expected_omission=self.expected_omission, expected_inversion=self.expected_inversion,
                       expected_insertion=self.expected_insertion, comparisons=self.comparisons,
                       scenarios=dict(self.scenarios), asked=list(self.asked), futility=self.futility)
            if self.order:
                out.update(order=dict(self.order))
        return out


@dataclass(frozen=True)
class PlanResult:
    """Plans of every grid point; pairs: pairs planned, of which pairs_with_human_labels are
    replayed on their real labels; metric_spread: ``metric_spread`` of the metric labels."""

    assumptions: Assumptions
    plans: tuple[Plan, ...]
    pairs: int
    pairs_with_human_labels: int
    metric_spread: float

    def summary(self, *, details: bool = False) -> dict:
        """{"assumptions", "plans"}; ``details`` adds per-plan details, the pair counts and
        ``metric_spread`` (the spread the metric's own margins would imply)."""
        out = {"assumptions": self.assumptions.to_dict(), "plans": [p.summary(details=details) for p in self.plans]}
        if details:
            out.update(pairs=self.pairs, pairs_with_human_labels=self.pairs_with_human_labels,
                       metric_spread=self.metric_spread)
        return out


def has_paired_labels(metric, human) -> bool:
    """Does some item have both a metric and a human label (so the assumptions can be fitted)?"""
    return bool(human) and _paired_statistics(metric, human) is not None


def complete_human_pairs(metric, human) -> dict[Pair, Labels]:
    """The pairs whose human labels cover every item the metric labels (replayed as they are)."""
    metric = labels_by_pair(metric, "metric")
    human = labels_by_pair(human or {}, "human")
    return {key: human[key] for key in metric
            if key in human and set(metric[key][0].tolist()) <= set(human[key][0].tolist())}


def item_kinds(metric: Mapping[Pair, Labels], assumptions: Assumptions,
               kinds: Mapping[object, str] | None = None) -> dict[object, int]:
    """Item -> its kind of prompt (0 .. K - 1): the study's own ``kinds`` (item -> name) when
    given, else the items dealt to ``assumptions.kinds`` kinds by a seeded permutation (the
    arena's way); {} without kinds."""
    items = sorted({item for pair_items, _ in metric.values() for item in pair_items.tolist()}, key=str)
    if kinds:
        names = sorted({kinds[item] for item in items if item in kinds})
        code = {name: k for k, name in enumerate(names)}
        return {item: code[kinds[item]] for item in items if item in kinds}
    if assumptions.kinds < 2:
        return {}
    dealt = np.random.default_rng([20261127, 17]).permutation(np.arange(len(items)) % assumptions.kinds)
    return dict(zip(items, dealt.tolist()))


def human_table(metric: Mapping[Pair, Labels], real: Mapping[Pair, Labels], assumptions: Assumptions,
                *, seed: int, kinds: Mapping[object, int] | None = None) -> dict[Pair, Labels]:
    """The annotators of one rep: real labels where complete, simulated humans elsewhere.

    kinds  item -> kind (``item_kinds``): a simulated label moves by the two systems' effects
           on its item's kind, drawn afresh each rep (sd ``assumptions.kind_sd``)"""
    order = metric_order(metric)
    margins = pair_margins(order, assumptions.spread)
    effect = None
    if kinds and assumptions.kind_sd > 0:
        size = max(kinds.values()) + 1
        drawn = assumptions.kind_sd * np.random.default_rng([seed, 13]).standard_normal((len(order), size))
        effect = dict(zip(sorted(order), drawn))
    table = {}
    for key in sorted(metric):
        if key in real:
            table[key] = real[key]
            continue
        items, values = metric[key]
        rng = np.random.default_rng([seed, 11, stable_hash(*key)])
        shift = None
        if effect is not None:
            kind = np.array([kinds.get(item, -1) for item in items.tolist()])
            shift = np.where(kind >= 0, effect[key[0]][kind] - effect[key[1]][kind], 0.0)
        table[key] = (items, simulated_human_labels(values, margins[key], assumptions, rng, shift))
    return table


def plan(
    metric,
    human=None,
    *,
    grid: Sequence[GridPoint],
    assumptions: Assumptions | None = None,
    reps: int = 2,
    policy: str | None = None,
    rule: str | None = None,
    futility_prior: bool | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    design: str = "all_pairs",
    start: Sequence[str] | None = None,
    active: ActiveSettings | None = None,
    futility: float | None = None,
    extra_metrics: Sequence = (),
    kinds: Mapping[object, str] | None = None,
    kinds_axis: Assumptions | None = None,
) -> PlanResult:
    """Plan every grid point (module docstring).

    metric  (first, second) -> labels, one per item: the study's metric labels (required)
    human   same shape or None: the study's human labels so far, one per item (pairs with a
            label on every metric item are replayed on them)
    assumptions  None: fitted from ``human`` when it has paired items, else the defaults
    reps    replays per scenario and grid point (>= 1)
    policy, rule  the protocol's (None: ProtocolSettings' defaults, the error-controlled rule
            the replay and the app use by default, so the plan predicts what they do)
    progress(done, total) is called before the first replay and after every replay.
    design  "all_pairs" (the budgeted protocol over every pair) or "ranking": the merge sort of
            protocol.ranking_design (``replay_ranking``; it has the adaptive policy and the
            e-process rule, so ``policy`` and ``rule`` must be None or those), a grid point's
            budget is then the most labels each comparison may take (None: all of its items)
    start   the ranking's initial order, system names (default: ``metric_order``)
            design "active": the active design of protocol.active_ranking (``replay_active``; the
            adaptive policy and the e-process rule, as the ranking), a grid point's budget the
            study's budget, the most labels in all (None: no limit, the design runs to its stop);
            its batch the design's rounds, its gamma the decisions' family-wise level; the plan
            adds what the design states about the order (``Plan.order``)
    active  the active design's confidence, resolution and labels per pair (``max_labels``;
            default ``ActiveSettings()``, a study's defaults); its batch, gamma and budget are
            the grid point's
    futility_prior  the all-pairs protocol's ``ProtocolSettings.futility_prior`` (a study's
            setting; None: the settings' default). The ranking's replay decides each pair run
            alone (``decide_pair``), so the prior, fitted on the other pairs, does not act there
    futility  the all-pairs protocol's and the ranking's pair runs' futility level
            (ProtocolSettings.futility) for grid points that name none (None: the settings'
            default); a grid point's own ``futility`` puts several levels side by side: labels
            against correctness
    extra_metrics  further metric tables (same shape as ``metric``) the all-pairs protocol
            combines with ``metric`` through the cross-fitted calibration, as a study's
            ``combined_metrics`` (``simulate.replay(extra_metrics=...)``); simulated humans
            follow ``metric`` alone, so the combination shows its worth on real human labels
    kinds   item -> its kind of prompt, the study's own (items without one: none): the
            simulated humans' kinds (``assumptions.kinds`` is then their number) and, under the
            active design, the kinds its replay is told (``replay_active``); None: the
            assumptions' kinds, dealt at random and hidden from the design
    kinds_axis  the kinds of prompt stated (its ``kinds``, ``kind_sd`` and range), put on the
            assumptions used, fitted ones too (``with_kinds``); None: the assumptions' own
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if design in ("ranking", "active") and (policy not in (None, "adaptive") or rule not in (None, "eprocess")):
        raise ValueError(f"the {design} design runs the adaptive policy with the e-process rule; "
                         f"got policy {policy!r}, rule {rule!r}")
    if design != "all_pairs" and extra_metrics:
        raise ValueError(f"the {design} design's replay runs one metric; plan combined metrics with the all-pairs "
                         "design")
    if design not in REPLAYS_FUTILITY and (futility is not None or any(p.futility is not None for p in grid)):
        raise ValueError(f"the {design} design's replay runs its own futility level; plan futility levels with the "
                         "all-pairs or the ranking design")
    metric = labels_by_pair(metric, "metric")
    metric = {k: v for k, v in metric.items() if len(v[1])}
    if not metric:
        raise ValueError("no pair has metric labels: the planner needs the study's metric labels")
    if not grid:
        raise ValueError("the grid is empty: give at least one (budget, batch, gamma)")
    if not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    human = labels_by_pair(human, "human") if human else {}
    if assumptions is None:
        assumptions = fit_assumptions(metric, human) if has_paired_labels(metric, human) else DEFAULT_ASSUMPTIONS
    if kinds_axis is not None:
        assumptions = with_kinds(assumptions, kinds_axis)
    kinds = {item: kind for item, kind in (kinds or {}).items() if kind}
    if kinds:
        assumptions = replace(assumptions, kinds=len(set(kinds.values())))
    kind_of = item_kinds(metric, assumptions, kinds)
    real = complete_human_pairs(metric, human)
    rule_options = {name: value for name, value in (("policy", policy), ("rule", rule),
                                                    ("futility_prior", futility_prior)) if value is not None}
    comparisons = sum(len(real[k][1]) if k in real else len(metric[k][1]) for k in metric)
    for point in grid:
        if point.budget is not None and point.budget < 1:
            raise ValueError(f"budget must be a positive number of annotations, got {point.budget}")
    scenarios = assumptions.scenarios() if len(real) < len(metric) else [("stated", assumptions)]
    total = len(grid) * len(scenarios) * reps
    done = 0
    if progress is not None:
        progress(done, total)
    plans: list[Plan] = []
    items = max(len(v[1]) for v in metric.values())
    start = tuple(metric_order(metric) if start is None else start)
    ceiling = items if design == "ranking" else comparisons
    replayed: dict[tuple, int] = {}
    extra_metrics = [labels_by_pair(table, "metric") for table in extra_metrics]
    for point in grid:
        budget = ceiling if point.budget is None else min(point.budget, ceiling)
        level = point.futility if point.futility is not None else futility
        if design in REPLAYS_FUTILITY and level is None:
            level = adaptive.ProtocolSettings.futility
        key = (budget, point.batch, point.gamma, level)
        asked = (point.budget,) if point.budget is not None and point.budget > ceiling else ()
        if key in replayed:
            # A budget above the ceiling replays as the ceiling: one plan, saying what was asked.
            at = replayed[key]
            plans[at] = dataclasses.replace(plans[at], asked=plans[at].asked + asked)
            done += len(scenarios) * reps
            if progress is not None:
                progress(done, total)
            continue
        runs: dict[str, list] = {}
        for name, scenario in scenarios:
            for rep in range(reps):
                rep_seed = seed * 1000 + rep
                table = human_table(metric, real, scenario, seed=rep_seed, kinds=kind_of)
                if design == "ranking":
                    result = replay_ranking(table, metric, start=start, settings=RankingSettings(
                        gamma=point.gamma, batch=point.batch, max_labels=budget, seed=rep_seed,
                        futility=level))  # the study's futility level, as the app's sort gives pairs up
                elif design == "active":
                    result = replay_active(table, metric, start=start, seed=rep_seed, settings=replace(
                        active or ActiveSettings(), gamma=point.gamma, batch=point.batch, budget=budget),
                        kinds=kind_of if kinds else None)
                else:
                    result = replay(table, metric, batch=point.batch, gamma=point.gamma, seed=rep_seed,
                                    budget=budget, futility=level, extra_metrics=extra_metrics, **rule_options)
                runs.setdefault(name, []).append(result)
                done += 1
                if progress is not None:
                    progress(done, total)
        replayed[key] = len(plans)
        plans.append(dataclasses.replace(_summarise(point, budget, comparisons, runs), asked=asked, futility=level))
    return PlanResult(assumptions, tuple(plans), len(metric), len(real), metric_spread(metric))


def _summarise(point: GridPoint, budget: int, comparisons: int, runs: Mapping[str, list]) -> Plan:
    stated = runs["stated"]
    fractions = {name: [r.annotations_used / comparisons for r in results] for name, results in runs.items()}
    means = {name: float(np.mean(values)) for name, values in fractions.items()}
    spread = [np.std(values, ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
              for values in fractions.values()]
    widen = 2 * float(max(spread))
    low = max(0.0, min(means.values()) - widen)
    high = min(1.0, max(means.values()) + widen)
    return Plan(
        budget=budget, batch=point.batch, gamma=point.gamma, comparisons=comparisons,
        expected_annotations=float(np.mean([r.annotations_used for r in stated])),
        expected_fraction=means["stated"],
        expected_correct=float(np.mean([r.correct for r in stated])),
        expected_omission=float(np.mean([r.omission for r in stated])),
        expected_inversion=float(np.mean([r.inversion for r in stated])),
        expected_insertion=float(np.mean([r.insertion for r in stated])),
        interval=(low, high),
        scenarios=means,
        order=_order_summary(stated),
    )


def _order_summary(stated: Sequence) -> dict[str, float]:
    """The means over the stated assumptions' reps of what the active design states about the
    order (``ActiveReplay``): ``complete`` the share of reps that reached the stop within the
    budget, the counts of neighbours per replay, and their shares of the resolved (ordered)
    neighbours that the full human fit reverses (beyond the resolution; at all). Empty for a
    design that states decisions only."""
    if not all(isinstance(r, ActiveReplay) for r in stated):
        return {}
    resolved = sum(r.resolved for r in stated)
    ordered = sum(r.ordered for r in stated)
    return {
        "neighbours": float(np.mean([r.neighbours for r in stated])),
        "complete": float(np.mean([r.complete for r in stated])),
        "ordered": float(np.mean([r.ordered for r in stated])),
        "resolved": float(np.mean([r.resolved for r in stated])),
        "expected_misordered": float(np.mean([r.expected_misordered for r in stated])),
        "ordered_wrong": float(np.mean([r.ordered_wrong for r in stated])),
        "resolved_wrong": float(np.mean([r.resolved_wrong for r in stated])),
        "resolved_wrong_share": sum(r.resolved_wrong for r in stated) / resolved if resolved else 0.0,
        "ordered_wrong_share": sum(r.ordered_wrong for r in stated) / ordered if ordered else 0.0,
        "tau": float(np.mean([r.tau for r in stated])),
        "runs": float(np.mean([r.runs for r in stated])),
    }


def hours_to_finish(annotations: float, per_hour: float) -> float:
    """Hours the annotations take at ``per_hour`` judgements per hour (> 0)."""
    if not per_hour > 0:
        raise ValueError(f"throughput must be positive, got {per_hour!r}")
    return annotations / per_hour


def grid_of(budgets: Iterable[int | None], batches: Iterable[int], gammas: Iterable[float],
            futilities: Iterable[float | None] = (None,)) -> list[GridPoint]:
    """Every combination, budgets outermost, futility levels innermost."""
    return [GridPoint(b, k, g, f) for b, k, g, f in itertools.product(budgets, batches, gammas, futilities)]


def bundle_kinds(bundle) -> dict[str, str] | None:
    """Item id -> its kind of prompt, for a bundle whose items carry one (``plan``'s ``kinds``);
    None for one without."""
    return {item.id: item.prompt_kind for item in bundle.items if item.prompt_kind} or None


def plan_bundle(bundle_path: str, metric: str, *, use_human: bool = True, **options) -> PlanResult:
    """Read a bundle and plan (options as for ``plan``); ``metric`` one name, or several joined
    by commas: the first the study's metric, the others combined with it (``extra_metrics``)."""
    bundle = read_bundle(bundle_path)
    names = [name.strip() for name in metric.split(",") if name.strip()]
    for name in names or [metric]:
        if name not in bundle.metrics:
            raise ValueError(f"{bundle_path} has no metric {name!r}; it has {', '.join(bundle.metrics) or 'none'}")
    human = human_labels(bundle) if use_human else {}
    extra = [metric_labels(bundle, name) for name in names[1:]]
    return plan(metric_labels(bundle, names[0]), human, extra_metrics=extra, kinds=bundle_kinds(bundle), **options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle")
    parser.add_argument("--metric", required=True,
                        help="the study's metric; A,B: B combined with A (a study's combined_metrics)")
    parser.add_argument("--budget", type=int, nargs="+", default=[None],
                        help="annotations the study may spend (default: every comparison)")
    parser.add_argument("--batch", type=int, nargs="+", default=[10])
    parser.add_argument("--gamma", type=float, nargs="+", default=[0.05])
    parser.add_argument("--futility", type=float, nargs="+", default=[None],
                        help="futility levels (a study's futility; default 0.05): higher gives hard pairs up "
                             "sooner, fewer labels and fewer pairs decided")
    defaults = adaptive.ProtocolSettings(budget=0)
    parser.add_argument("--policy", choices=adaptive.POLICIES, default=defaults.policy)
    parser.add_argument("--rule", choices=adaptive.RULES, default=defaults.rule,
                        help=f"decision rule (default {defaults.rule}, as protocol.simulate and the app)")
    parser.add_argument("--design", choices=DESIGNS, default="all_pairs",
                        help="ranking: replay the merge sort of protocol.ranking_design from the metric's order "
                             "(--budget is then the most labels per comparison); active: the active design of "
                             "protocol.active_ranking from the metric's order, at a study's default confidence and "
                             "resolution (--budget the most labels in all)")
    parser.add_argument("--kinds", type=int, default=0,
                        help="kinds of prompt the simulated annotators' prompts fall into (0: none; a bundle whose "
                             "items carry a prompt_kind has its own, and the active design is told them)")
    parser.add_argument("--kind-sd", type=float, nargs="+", default=[0.0], metavar="SD",
                        help="SD [LOW HIGH]: sd of a system's effect on a kind of prompt, in Bradley-Terry "
                             "log-strength (as protocol.arena's type_sd), and its range (default: SD alone)")
    parser.add_argument("--reps", type=int, default=2, help="replays per scenario (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-human", action="store_true", help="ignore the bundle's human labels")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--details", action="store_true",
                        help="with --json: add omission, inversion, insertion, comparisons and scenarios")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    def progress(done: int, total: int) -> None:
        print(f"replay {done}/{total}", file=sys.stderr, flush=True)

    try:
        if len(args.kind_sd) not in (1, 3):
            raise ValueError(f"--kind-sd takes SD or SD LOW HIGH, got {len(args.kind_sd)} numbers")
        sd = args.kind_sd
        kinds_axis = replace(DEFAULT_ASSUMPTIONS, kinds=args.kinds, kind_sd=sd[0],
                             kind_sd_range=(sd[1], sd[2]) if len(sd) == 3 else (sd[0], sd[0]))
        result = plan_bundle(args.bundle, args.metric, use_human=not args.no_human, kinds_axis=kinds_axis,
                             grid=grid_of(args.budget, args.batch, args.gamma, args.futility), reps=args.reps,
                             policy=args.policy, rule=args.rule, seed=args.seed, design=args.design,
                             progress=None if args.quiet else progress)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = result.summary(details=args.details)
    if args.json:
        print(json.dumps(summary, allow_nan=False))
    else:
        a = result.assumptions
        print(f"assumptions ({a.source}): metric error {a.metric_error:.3f}, tie rate {a.tie_rate:.3f}, "
              f"spread {a.spread:.3f}; {result.pairs_with_human_labels}/{result.pairs} pairs with human labels"
              + (f"; {a.kinds} kinds of prompt, effect sd {a.kind_sd:.3f}" if a.kinds > 1 else ""))
        for p in result.plans:
            level = "" if p.futility is None else f" futility {p.futility:g}"
            print(f"budget {p.budget} batch {p.batch} gamma {p.gamma}{level}: {p.expected_annotations:.0f} annotations "
                  f"({p.expected_fraction:.3f} [{p.interval[0]:.3f}, {p.interval[1]:.3f}]), correct "
                  f"{p.expected_correct:.3f}, omitted {p.expected_omission:.3f}, inverted {p.expected_inversion:.3f}")
            if p.order:
                o = p.order
                print(f"  order: {o['resolved']:.1f} of {o['neighbours']:.0f} neighbours resolved "
                      f"({o['ordered']:.1f} ordered), reached its stop in {o['complete']:.0%} of the replays, "
                      f"stated misordered {o['expected_misordered']:.2f}, resolved but reversed beyond the "
                      f"resolution {o['resolved_wrong']:.2f}, tau {o['tau']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
