"""Fit the planner's assumptions on every bundle and metric in data/bundles/ (docs/planner.md).

For each bundle with human labels and each of its metrics, ``protocol.plan.fit_assumptions``
estimates the metric error, the human tie rate and the spread (human / metric pair margins).
The defaults of ``protocol.plan.DEFAULT_ASSUMPTIONS`` are the medians over bundles of each
bundle's median over its metrics (so that the 56 SummEval fits do not outvote WMT and
PandaLM), their ranges the smallest and largest of those per-bundle medians.

    python scripts/planner_defaults.py [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol.bundle import read_bundle  # noqa: E402
from protocol.plan import ASSUMPTION_NAMES, fit_assumptions  # noqa: E402
from protocol.preferences import human_labels, metric_labels  # noqa: E402

BUNDLES = ("summeval_relevance", "summeval_coherence", "summeval_consistency", "summeval_fluency",
           "wmt21_ende", "pandalm")


def fits(bundles=BUNDLES) -> dict[str, dict[str, dict]]:
    """bundle -> metric -> fitted assumption values."""
    out = {}
    for name in bundles:
        bundle = read_bundle(ROOT / "data" / "bundles" / f"{name}.jsonl.gz")
        human = human_labels(bundle)
        out[name] = {}
        for metric in bundle.metrics:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = fits()
    summary = defaults(table)
    if args.json:
        print(json.dumps({"fits": table, "defaults": summary}))
        return 0
    for name, metrics in table.items():
        for metric, values in metrics.items():
            print(f"{name:22s} {metric:26s} " + "  ".join(f"{k} {v:.3f}" for k, v in values.items()))
    for key, row in summary.items():
        print(f"default {key}: {row['value']:.3f} range [{row['range'][0]:.3f}, {row['range'][1]:.3f}] "
              + " ".join(f"{b}={v:.3f}" for b, v in row["per_bundle"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
