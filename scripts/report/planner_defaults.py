"""Fit the planner's assumptions on every bundle and metric in data/bundles/ (docs/planner.md).

For each bundle with human labels and each of its metrics, ``protocol.plan.fit_assumptions``
estimates the metric error, the human tie rate and the spread (human / metric pair margins).
The defaults of ``protocol.plan.DEFAULT_ASSUMPTIONS`` are the medians over bundles of each
bundle's median over its metrics (so that the 56 SummEval fits do not outvote WMT and
PandaLM), their ranges the smallest and largest of those per-bundle medians. A judge is fitted
once: ``SAME_VERDICTS`` lists the metrics that repeat another metric's verdicts in another form
(SummEval's ``llm_gpt35_h2h_orders``: GPT-3.5's head-to-head verdicts per presentation order,
the same verdicts as ``llm_gpt35_h2h``), which are left out.

    python scripts/report/planner_defaults.py [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.bundle import read_bundle  # noqa: E402
from protocol.plan import ASSUMPTION_NAMES, fit_assumptions, non_tie_margin, pair_margins, spread_from_margins  # noqa: E402
from protocol.preferences import human_labels, metric_labels  # noqa: E402

BUNDLES = ("summeval_relevance", "summeval_coherence", "summeval_consistency", "summeval_fluency",
           "wmt21_ende", "pandalm")
# metric -> the metric whose verdicts it repeats (fitted instead).
SAME_VERDICTS = {"llm_gpt35_h2h_orders": "llm_gpt35_h2h"}


def fits(bundles=BUNDLES) -> dict[str, dict[str, dict]]:
    """bundle -> metric -> fitted assumption values."""
    out = {}
    for name in bundles:
        bundle = read_bundle(ROOT / "data" / "bundles" / f"{name}.jsonl.gz")
        human = human_labels(bundle)
        out[name] = {}
        for metric in bundle.metrics:
            if SAME_VERDICTS.get(metric) in bundle.metrics:
                continue
            fitted = fit_assumptions(metric_labels(bundle, metric), human, bootstrap=0)
            out[name][metric] = {k: getattr(fitted, k) for k in ASSUMPTION_NAMES}
    return out


def defaults(table: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """value (median of per-bundle medians) and range (min, max of the per-bundle medians)."""
    out = {}
    for key in ASSUMPTION_NAMES:
        per_bundle = [float(np.median([m[key] for m in metrics.values()])) for metrics in table.values()]
        out[key] = {"value": float(np.median(per_bundle)), "range": [min(per_bundle), max(per_bundle)],
                    "per_bundle": dict(zip(table, per_bundle))}
    return out


def shape(bundles=BUNDLES, quantiles=(0.1, 0.25, 0.5, 0.75, 0.9)) -> dict[str, dict]:
    """Quantiles of |human non-tie pair margin| against the planner's one-parameter shape
    (systems at evenly spaced normal quantiles, spread matched to the median)."""
    out = {}
    for name in bundles:
        human = human_labels(read_bundle(ROOT / "data" / "bundles" / f"{name}.jsonl.gz"))
        margins = np.array([non_tie_margin(labels.values) for labels in human.values()])
        systems = sorted({s for key in human for s in key})
        spread = spread_from_margins(margins, len(systems))
        model = np.abs(np.array(list(pair_margins(tuple(systems), spread).values())))
        out[name] = {"systems": len(systems), "spread": spread,
                     "human": np.quantile(np.abs(margins), quantiles).round(3).tolist(),
                     "model": np.quantile(model, quantiles).round(3).tolist()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = fits()
    summary = defaults(table)
    shapes = shape()
    if args.json:
        print(json.dumps({"fits": table, "defaults": summary, "shape": shapes}))
        return 0
    for name, metrics in table.items():
        for metric, values in metrics.items():
            print(f"{name:22s} {metric:26s} " + "  ".join(f"{k} {v:.3f}" for k, v in values.items()))
    for key, row in summary.items():
        print(f"default {key}: {row['value']:.3f} range [{row['range'][0]:.3f}, {row['range'][1]:.3f}] "
              + " ".join(f"{b}={v:.3f}" for b, v in row["per_bundle"].items()))
    for name, row in shapes.items():
        print(f"shape {name}: {row['systems']} systems, spread {row['spread']:.3f}; |human margin| quantiles "
              f"10/25/50/75/90 % {row['human']} vs model {row['model']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
