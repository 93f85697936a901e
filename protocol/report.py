"""How a metric compares with the human labels of a bundle: Favi-Score, sign accuracy, DAGs, SPA.

``python -m protocol.report BUNDLE --metric NAME [--json]`` (docs/formulas.md, "Command lines")
prints ``{"systems", "pairs": [{"first", "second", "confusion", "favi", "human_decision",
"metric_decision", "category"}], "sample_accuracy", "system_accuracy", "mean_abs_favi",
"spa", "pa"}``.

Definitions used here:
- Human labels come from human_preference rows or from human_score rows averaged per
  (item, system) before a preference is derived; several labels of one item and pair are
  merged into the sign of their mean, so the item is the unit (protocol.preferences).
  Metric labels come from metric_score or metric_preference rows alike.
- Every pair is judged on its *evaluation setting* (Favi-Score paper Def. 3): the human
  label of every item the metric also rated, paired with that item's metric label (one row
  of the confusion matrix per item, however many annotators judged it).
- human_decision / metric_decision: the default sign test (asymptotic, ties discarded,
  alpha 0.05) on that pair's human outcome d (row sums) and metric outcome d_hat (column
  sums); category: the metric decision judged against the human one (docs/formulas.md §5).
- SPA / PA: when both the humans and the metric give scalar scores, the (systems, items)
  score matrices on the items every kept system has in both (systems the metric never
  scored are left out). Otherwise per pair the per-item preference labels on the items both
  rated (protocol.spa module docstring).
  ``null`` when no pair can be compared.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .bundle import Bundle, BundleError, read_bundle
from .favi import FaviIntervals, bootstrap_intervals, favi_by_pair, per_system_favi, summarize
from .preferences import human_labels, metric_labels, score_matrix
from .ranking import (
    ASYMPTOTIC,
    RankingGraph,
    compare_decisions,
    significance_graph,
    sign_test,
)
from .spa import DEFAULT_PERMUTATIONS, SpaResult, compare_differences, compare_scores


@dataclass(frozen=True)
class PairReport:
    """One system pair: confusion (3, 3) human rows x metric columns, order (+, =, -)."""

    first: str
    second: str
    confusion: np.ndarray
    favi: float
    human_decision: int
    metric_decision: int
    category: str


@dataclass(frozen=True)
class MetricReport:
    metric: str
    systems: tuple[str, ...]
    pairs: tuple[PairReport, ...]
    sample_accuracy: float
    system_accuracy: float
    mean_abs_favi: float
    std_abs_favi: float
    per_system_favi: dict  # system -> (<= S-1,) float array
    human_graph: RankingGraph
    metric_graph: RankingGraph
    spa: SpaResult | None
    spa_route: str  # "scores", "preferences" or "none"
    spa_items: int  # items (score route) or largest per-pair item count (preference route)
    intervals: FaviIntervals | None = None  # item-clustered bootstrap, None when not asked

    @property
    def category_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for pair in self.pairs:
            counts[pair.category] += 1
        return dict(counts)


def _score_route(bundle: Bundle, metric: str, permutations: int, seed: int):
    systems, human_items, human = score_matrix(bundle, "human")
    metric_systems, metric_items, scores = score_matrix(bundle, metric)
    if metric_systems != systems:
        raise ValueError("human and metric score matrices list different systems")
    common = sorted(set(human_items) & set(metric_items))
    h = human[:, [human_items.index(i) for i in common]] if common else human[:, :0]
    m = scores[:, [metric_items.index(i) for i in common]] if common else scores[:, :0]
    rated = ~np.all(np.isnan(m), axis=1) & ~np.all(np.isnan(h), axis=1)
    h, m = h[rated], m[rated]
    complete = np.all(np.isfinite(h), axis=0) & np.all(np.isfinite(m), axis=0)
    if rated.sum() < 2 or not complete.any():
        return None, 0
    kept = tuple(s for s, keep in zip(systems, rated) if keep)
    result = compare_scores(h[:, complete], m[:, complete], permutations, seed, systems=kept)
    return result, int(complete.sum())


def _mean_by_item(labels) -> dict[str, float]:
    sums: dict[str, list[int]] = defaultdict(list)
    for item, value in zip(labels.items, labels.values):
        sums[item].append(int(value))
    return {item: float(np.mean(values)) for item, values in sums.items()}


def _preference_route(human, metric, permutations: int, seed: int):
    pairs, human_rows, metric_rows = [], [], []
    for pair in sorted(set(human) & set(metric)):
        h = _mean_by_item(human[pair])
        m = _mean_by_item(metric[pair])
        items = sorted(set(h) & set(m))
        if not items:
            continue
        pairs.append(pair)
        human_rows.append(np.array([h[i] for i in items]))
        metric_rows.append(np.array([m[i] for i in items]))
    if not pairs:
        return None, 0
    result = compare_differences(pairs, human_rows, metric_rows, permutations, seed)
    return result, max(len(r) for r in human_rows)


def _judged_metric_labels(bundle: Bundle, metric: str, human: dict, eps: float):
    """The metric's labels of the (pair, item)s ``human`` labels, or None when the metric
    labels some human pair on none of its items.

    They are all compare_metric reads of the metric's labels: a pair's confusion pairs each
    human-labelled item with its metric label (protocol.favi.paired_items drops the metric's
    other items), so do the item-clustered bootstrap and the preference SPA (the items both
    rated); the score SPA reads the score matrices, on the items both have. The metric's
    other labels decide only which pairs are listed: a human pair is listed when the metric
    labels it on any item. When each human pair has a label here, every human pair is listed
    either way, and no number changes; otherwise (None) the caller needs every label.
    """
    labels = metric_labels(bundle, metric, eps, on=human)
    return labels if set(human) <= set(labels) else None


class HumanItemsInsufficient(ValueError):
    """``compare_metric(..., labels=JUDGED_ONLY)`` of a bundle cut down to the items with human
    labels would not be the whole bundle's report: the metric labels some human pair on none
    of the items the humans label it on (or none of those items at all)."""


#: compare_metric's ``labels``: which of the metric's labels it computes
JUDGED, EVERY, JUDGED_ONLY = "judged", "every", "judged only"


def compare_metric(
    bundle: Bundle,
    metric: str,
    eps: float = 0.0,
    alpha: float = 0.05,
    method: str = ASYMPTOTIC,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    with_spa: bool = True,
    bootstrap: int = 0,
    *,
    labels: str = JUDGED,
) -> MetricReport:
    """Compare ``metric`` with the bundle's human labels (module docstring for definitions).

    labels: JUDGED, the metric's labels of the judged (pair, item)s where they give the report
    of every label (``_judged_metric_labels``), else every label; EVERY, every (pair, item)'s
    (the same report: at 200 systems x 2,000 items the metric labels 40 M (pair, item)s where a
    few thousand are judged); JUDGED_ONLY, the judged ones or ``HumanItemsInsufficient``: for a
    bundle of the items with human labels alone, whose report is then that of any bundle adding
    items without human labels to it (their outputs and metric rows; the same systems).
    """
    if labels == JUDGED_ONLY and metric not in bundle.metrics:
        raise HumanItemsInsufficient(f"the metric {metric!r} labels none of the items with human labels")
    bundle.metric_kind(metric)  # ValueError naming the known metrics when unknown
    if not bundle.human_scores and not bundle.human_preferences:
        raise ValueError("the bundle has no human_score or human_preference rows to compare with")
    human = human_labels(bundle, eps)
    metric_labelled = None if labels == EVERY else _judged_metric_labels(bundle, metric, human, eps)
    if metric_labelled is None:
        if labels == JUDGED_ONLY:
            raise HumanItemsInsufficient(f"the metric {metric!r} labels a human pair on none of its judged items")
        metric_labelled = metric_labels(bundle, metric, eps)
    return _compared(bundle, metric, human, metric_labelled, alpha, method, permutations, seed, with_spa, bootstrap)


def _compared(bundle: Bundle, metric: str, human: dict, labels: dict, alpha: float, method: str,
              permutations: int, seed: int, with_spa: bool, bootstrap: int) -> MetricReport:
    results = favi_by_pair(human, labels)
    if not results:
        raise ValueError(f"no system pair has both human and {metric!r} labels")
    confusions = np.stack([r.confusion for r in results.values()])
    human_outcome, metric_outcome = confusions.sum(axis=2), confusions.sum(axis=1)
    human_test = sign_test(human_outcome[:, 0], human_outcome[:, 2], alpha, method)
    metric_test = sign_test(metric_outcome[:, 0], metric_outcome[:, 2], alpha, method)
    pairs = list(results)
    human_decisions = {p: int(d) for p, d in zip(pairs, human_test.decision)}
    metric_decisions = {p: int(d) for p, d in zip(pairs, metric_test.decision)}
    categories = compare_decisions(human_decisions, metric_decisions)
    summary = summarize(results)
    intervals = bootstrap_intervals(human, labels, draws=bootstrap, seed=seed) if bootstrap else None

    spa, route, spa_items = None, "none", 0
    if with_spa:
        if bundle.human_scores and bundle.metric_kind(metric) == "score":
            spa, spa_items = _score_route(bundle, metric, permutations, seed)
            route = "scores" if spa is not None else "none"
        if spa is None:
            spa, spa_items = _preference_route(human, labels, permutations, seed)
            route = "preferences" if spa is not None else "none"

    return MetricReport(
        metric=metric,
        systems=bundle.systems,
        pairs=tuple(
            PairReport(
                first=p[0],
                second=p[1],
                confusion=results[p].confusion,
                favi=results[p].favi,
                human_decision=human_decisions[p],
                metric_decision=metric_decisions[p],
                category=categories[p],
            )
            for p in pairs
        ),
        sample_accuracy=summary.sample_accuracy,
        system_accuracy=summary.system_accuracy,
        mean_abs_favi=summary.mean_abs_favi,
        std_abs_favi=summary.std_abs_favi,
        per_system_favi=per_system_favi({p: results[p].favi for p in pairs}),
        human_graph=significance_graph(bundle.systems, human_decisions),
        metric_graph=significance_graph(bundle.systems, metric_decisions),
        spa=spa,
        spa_route=route,
        spa_items=spa_items,
        intervals=intervals,
    )


def _number(value: float | None):
    """JSON has no NaN: undefined values (e.g. a Favi-Score without errors) become null."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _interval(values) -> list | None:
    return None if values is None or np.isnan(values).any() else [float(v) for v in values]


def report_json(report: MetricReport) -> dict:
    """The ``protocol.report`` object of docs/formulas.md ("Command lines") (plus "intervals" when bootstrapped)."""
    result = {
        "systems": list(report.systems),
        "pairs": [
            {
                "first": p.first,
                "second": p.second,
                "confusion": p.confusion.astype(int).tolist(),
                "favi": _number(p.favi),
                "human_decision": p.human_decision,
                "metric_decision": p.metric_decision,
                "category": p.category,
            }
            for p in report.pairs
        ],
        "sample_accuracy": _number(report.sample_accuracy),
        "system_accuracy": _number(report.system_accuracy),
        "mean_abs_favi": _number(report.mean_abs_favi),
        "spa": _number(report.spa.spa) if report.spa else None,
        "pa": _number(report.spa.pa) if report.spa else None,
    }
    if report.intervals is not None:
        found = report.intervals
        result["intervals"] = {
            "level": found.level,
            "draws": found.draws,
            "method": "item-clustered percentile bootstrap",
            "sample_accuracy": _interval(found.sample_accuracy),
            "system_accuracy": _interval(found.system_accuracy),
            "mean_abs_favi": _interval(found.mean_abs_favi),
            "favi": {f"{a}|{b}": _interval(v) for (a, b), v in zip(found.pairs, found.favi)},
        }
    return result


def _format_text(report: MetricReport) -> str:
    def fmt(value):
        return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"

    lines = [
        f"metric {report.metric}: {len(report.systems)} systems, {len(report.pairs)} pairs",
        f"sample accuracy {fmt(report.sample_accuracy)}  system accuracy {fmt(report.system_accuracy)}  "
        f"mean |Favi| {fmt(report.mean_abs_favi)}",
        *([f"95% intervals (item-clustered bootstrap): sample accuracy "
           f"{fmt(report.intervals.sample_accuracy[0])}-{fmt(report.intervals.sample_accuracy[1])}, "
           f"system accuracy {fmt(report.intervals.system_accuracy[0])}-"
           f"{fmt(report.intervals.system_accuracy[1])}, mean |Favi| "
           f"{fmt(report.intervals.mean_abs_favi[0])}-{fmt(report.intervals.mean_abs_favi[1])}"]
          if report.intervals is not None else []),
        f"SPA {fmt(report.spa.spa if report.spa else None)}  PA {fmt(report.spa.pa if report.spa else None)}"
        f"  ({report.spa_route} route)",
        "categories " + ", ".join(f"{k} {v}" for k, v in sorted(report.category_counts.items())),
        "",
        f"{'first':<20} {'second':<20} {'favi':>7} {'human':>5} {'metric':>6}  category  confusion (+,=,-)",
    ]
    for p in report.pairs:
        lines.append(
            f"{p.first:<20} {p.second:<20} {fmt(p.favi):>7} {p.human_decision:>5} {p.metric_decision:>6}  "
            f"{p.category:<9} {p.confusion.astype(int).tolist()}"
        )
    if report.human_graph.cycles or report.metric_graph.cycles:
        lines.append(f"cycles: human {report.human_graph.cycles}, metric {report.metric_graph.cycles}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.report", description=__doc__.splitlines()[0])
    parser.add_argument("bundle", help="study bundle (.jsonl or .jsonl.gz)")
    parser.add_argument("--metric", required=True, help="metric name in the bundle")
    parser.add_argument("--eps", type=float, default=0.0, help="tie margin for scalar scores (default 0)")
    parser.add_argument("--exact", action="store_true", help="exact binomial sign test instead of asymptotic")
    parser.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=0,
                        help="item-clustered bootstrap draws for 95%% intervals of the Favi-Scores "
                             "and accuracies, adds \"intervals\" to the JSON (default 0 = none)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        bundle = read_bundle(args.bundle)
        report = compare_metric(
            bundle,
            args.metric,
            eps=args.eps,
            method="exact" if args.exact else ASYMPTOTIC,
            permutations=args.permutations,
            seed=args.seed,
            bootstrap=args.bootstrap,
        )
    except BundleError as error:
        print(f"error: invalid bundle {args.bundle}:\n{error}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report_json(report)) if args.json else _format_text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
