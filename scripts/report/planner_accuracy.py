"""Planner accuracy: plan without human labels, then replay on the real ones (docs/results.md).

For each (bundle, metric) the planner (``protocol.plan``) sees only the metric labels and
the default assumptions; ``protocol.simulate`` then replays the same protocol (the default
error-controlled rule, batch 10, gamma 0.05) on the bundle's real human labels. Prints a markdown section, or JSON.

    python scripts/report/planner_accuracy.py [--reps 2] [--seeds 2] [--json] [BUNDLE:METRIC ...]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.bundle import read_bundle  # noqa: E402
from protocol.plan import GridPoint, fit_assumptions, plan_bundle  # noqa: E402
from protocol.preferences import human_labels, metric_labels  # noqa: E402
from protocol.simulate import simulate  # noqa: E402

CASES = ("summeval_relevance:bert_score_f", "summeval_coherence:bert_score_f", "pandalm:gpt35",
         "wmt21_ende:sentence_chrf", "summeval_consistency:bert_score_f", "summeval_fluency:bert_score_f")
BATCH, GAMMA = 10, 0.05


def measure(case: str, *, reps: int, seeds: int, fitted: bool = False) -> dict:
    """fitted: simulate the annotators from the assumptions fitted on the real labels (what the
    planner would do with the right assumptions) instead of the defaults."""
    bundle, metric = case.split(":")
    path = str(ROOT / "data" / "bundles" / f"{bundle}.jsonl.gz")
    began = time.perf_counter()
    assumptions = None
    if fitted:
        data = read_bundle(path)
        assumptions = fit_assumptions(metric_labels(data, metric), human_labels(data))
    planned = plan_bundle(path, metric, use_human=False, grid=[GridPoint(None, BATCH, GAMMA)], reps=reps,
                          assumptions=assumptions)
    plan_seconds = time.perf_counter() - began
    real = [simulate(path, metric, batch=BATCH, gamma=GAMMA, seed=seed) for seed in range(seeds)]
    row = planned.plans[0]
    real_fraction = float(np.mean([r.annotation_fraction for r in real]))
    return {
        "bundle": bundle, "metric": metric, "assumptions": "fitted" if fitted else "defaults",
        "planned_fraction": row.expected_fraction, "interval": list(row.interval),
        "planned_correct": row.expected_correct,
        "real_fraction": real_fraction, "real_fractions": [r.annotation_fraction for r in real],
        "real_correct": float(np.mean([r.correct for r in real])),
        "relative_error": row.expected_fraction / real_fraction - 1,
        "inside": row.interval[0] <= real_fraction <= row.interval[1],
        "plan_seconds": round(plan_seconds, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", default=list(CASES))
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--fitted", action="store_true",
                        help="simulate from the assumptions fitted on the real labels, not the defaults")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for case in args.cases:
        rows.append(measure(case, reps=args.reps, seeds=args.seeds, fitted=args.fitted))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("| bundle | metric | assumptions | planned fraction (no human labels) | interval | real fraction (replay) | "
          "relative error | real inside | planned / real correct |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['bundle']} | {r['metric']} | {r['assumptions']} | {r['planned_fraction']:.3f} | "
              f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] | {r['real_fraction']:.3f} "
              f"({', '.join(f'{x:.3f}' for x in r['real_fractions'])}) | {r['relative_error']:+.1%} | "
              f"{'yes' if r['inside'] else 'no'} | {r['planned_correct']:.3f} / {r['real_correct']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
