"""Generate the section "Ordering at matched labels" of docs/ranking.md (issue 22): human labels
against ordering quality for every design, each at several resolutions, on the known-truth
arena of protocol.arena, so that designs are compared where they order the true neighbours
equally well.

    nice -n 10 .venv/bin/python scripts/report/ranking_matched.py [--seeds 3] [--metric] [--dry-run]

Arena: k = 50 systems, 2,000 prompts, mean neighbour gap 0.3, seeds 0..S-1 (one process per
seed), gamma = 0.05; human labels only, or with ``--metric`` the arena's judge score too (the
sort starts from the metric's order and every pair's e-process bets on the metric's labels;
written to its own section). Designs (protocol.arena_replay):
  * all pairs at level gamma and at gamma / pairs (FWER), every pair's run capped at
    30 / 60 / 100 / 200 labels or uncapped (``max_labels``);
  * the ranking design (one-stage merge sort, FWER), every comparison capped at
    200 / 300 / 400 / 600 labels or uncapped (its resolution, ``max_labels``);
  * uniform random pairs and items at 20,000 / 30,000 / 45,000 / 60,000 labels;
  * a reference no design can run: 200 to 2,000 labels on each pair of neighbours
    in the true order and nothing else.
Every design is scored by the Bradley–Terry fit of the labels it spent
(``arena_replay.fitted_order``, what a leaderboard shows), and the decision designs also by
their own order and their decisions.
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.arena import ArenaSpec, make_arena  # noqa: E402
from protocol.arena_replay import (  # noqa: E402
    replay_all_pairs,
    replay_neighbours_oracle,
    replay_ranking,
    replay_uniform,
)
from protocol.ranking_design import RankingSettings  # noqa: E402
from scripts.report.results_md import replace_section  # noqa: E402

SECTION = "ranking_matched"
METRIC_SECTION = "ranking_matched_metric"
RANKING_DOC = ROOT / "docs" / "ranking.md"
SYSTEMS, PROMPTS, GAP, GAMMA = 50, 2000, 0.3, 0.05
ALL_PAIRS_CAPS = (30, 60, 100, 200, 0)
RANKING_CAPS = (200, 300, 400, 600, 0)
UNIFORM_LABELS = (20_000, 30_000, 45_000, 60_000)
ORACLE_LABELS = (200, 400, 500, 600, 700, 800, 1200, 2000)
TARGET = 0.25
DESIGNS = {
    "all_pairs": "all pairs, level γ",
    "all_pairs_fwer": "all pairs, level γ / pairs (FWER)",
    "ranking": "ranking design (merge sort, FWER)",
    "uniform": "uniform random pairs",
    "oracle": "true neighbours only (reference: knows the order)",
}


def run_seed(seed: int, metric: bool = False) -> list[dict]:
    """Every design point on the arena of ``seed`` (rows of DesignResult fields plus ``cap``);
    ``metric``: the decision designs use the judge score (uniform pairs and the reference are
    the same either way: they fit human labels only)."""
    arena = make_arena(ArenaSpec(systems=SYSTEMS, prompts=PROMPTS, seed=seed, gap=GAP))
    settings = RankingSettings(gamma=GAMMA, seed=seed)
    rows = []
    for cap in ALL_PAIRS_CAPS:
        for family in (False, True):
            result = replay_all_pairs(arena, replace(settings, max_labels=cap), family=family, metric=metric)
            rows.append({**asdict(result), "cap": cap})
    for cap in RANKING_CAPS:
        rows.append({**asdict(replay_ranking(arena, replace(settings, max_labels=cap), metric=metric)), "cap": cap})
    for labels in UNIFORM_LABELS:
        rows.append({**asdict(replay_uniform(arena, labels, seed=seed)), "cap": 0})
    for per_pair in ORACLE_LABELS:
        rows.append({**asdict(replay_neighbours_oracle(arena, per_pair, seed=seed)), "cap": per_pair})
    print(f"seed {seed}: {len(rows)} design points", file=sys.stderr, flush=True)
    return rows


def points(rows: list[dict]) -> list[dict]:
    """One point per (design, cap, label target): means over seeds."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["design"], r["cap"], r["labels"] if r["design"] == "uniform" else 0)
        groups.setdefault(key, []).append(r)
    out = []
    for (design, cap, _), group in groups.items():
        def mean(field):
            return float(np.mean([r[field] for r in group]))

        def sd(field):
            return float(np.std([r[field] for r in group]))

        out.append(dict(design=design, cap=cap, seeds=len(group), labels=mean("labels"), labels_sd=sd("labels"),
                        wrong_fit=mean("wrong_adjacent_fit"), wrong_fit_sd=sd("wrong_adjacent_fit"),
                        tau_fit=mean("tau_fit"), wrong_own=mean("wrong_adjacent"),
                        decided_neighbours=mean("resolved_adjacent"), decided=mean("ordered_pairs"),
                        false_pairs=int(sum(r["false_pairs"] for r in group)), level=group[0]["level"]))
    order = list(DESIGNS)
    return sorted(out, key=lambda p: (order.index(p["design"]), p["labels"]))


def matched(points_: list[dict], design: str, quality: float) -> dict | None:
    """The cheapest point of ``design`` ordering the true neighbours at least as well (mean
    wrong neighbours of the fitted order <= ``quality``), or None."""
    good = [p for p in points_ if p["design"] == design and p["wrong_fit"] <= quality + 1e-9]
    return min(good, key=lambda p: p["labels"]) if good else None


def render(points_: list[dict], seeds: int, metric: bool = False) -> str:
    labels = ("with the judge score: the sort starts from the metric's order and every decision design's "
              "e-process bets on the metric's labels (uniform pairs and the reference fit human labels only)"
              if metric else "human labels only")
    lines = [
        f"k = {SYSTEMS} systems × {PROMPTS:,} prompts, mean neighbour gap {GAP}, {labels}, {seeds} seeds, "
        f"γ = {GAMMA}. *cap*: most labels a pair's run may take (the design's resolution; — = all prompts). "
        "*wrong neighbours (fit)*: neighbours of the true order that the Bradley–Terry fit of the design's "
        "labels reverses (`arena_replay.fitted_order`, the estimator a leaderboard uses, the same for every "
        "design); *(own)*: those the design's own order reverses (all pairs: decided wins, then won labels; "
        "the ranking: its sort). Mean (± sd) over seeds. Generated by `scripts/report/ranking_matched.py`.",
        "",
        "| design | cap | human labels | wrong neighbours (fit) | Kendall τ (fit) | wrong neighbours (own) | "
        "neighbours decided | pairs decided | false pairs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points_:
        decides = p["design"] not in ("uniform", "oracle")
        lines.append(
            f"| {DESIGNS[p['design']]} | {p['cap'] or '—'} | {p['labels']:,.0f} ± {p['labels_sd']:,.0f} | "
            f"{p['wrong_fit']:.1f} ± {p['wrong_fit_sd']:.1f} / {SYSTEMS - 1} | {p['tau_fit']:.3f} | "
            f"{p['wrong_own']:.1f} | {p['decided_neighbours']:.1f} | "
            f"{p['decided']:,.0f} | {p['false_pairs']} |" if decides else
            f"| {DESIGNS[p['design']]} | {p['cap'] or '—'} | {p['labels']:,.0f} | {p['wrong_fit']:.1f} ± {p['wrong_fit_sd']:.1f} / "
            f"{SYSTEMS - 1} | {p['tau_fit']:.3f} | — | — | — | — |")
    lines += ["", "For the same correctly ordered neighbours: each all-pairs point against the cheapest point of the "
              "ranking design, and of the reference that knows the true order, whose fitted order reverses at most "
              "as many true neighbours (means over seeds):", "",
              "| all pairs | cap | labels | wrong neighbours (fit) | ranking design: labels, cap | × | "
              "true neighbours only: labels | × |", "|---|---|---|---|---|---|---|---|"]
    ratios = {"ranking": [], "oracle": []}
    for p in (q for q in points_ if q["design"] in ("all_pairs", "all_pairs_fwer")):
        cells = []
        for design in ("ranking", "oracle"):
            other = matched(points_, design, p["wrong_fit"])
            if other is None:
                cells += ["none orders as well", "—"]
                continue
            ratio = other["labels"] / p["labels"]
            ratios[design].append(ratio)
            where = f", {other['cap'] or '—'}" if design == "ranking" else ""
            cells += [f"{other['labels']:,.0f}{where}", f"{ratio:.2f}"]
        level = "γ / pairs" if p["design"] == "all_pairs_fwer" else "γ"
        lines.append(f"| level {level} | {p['cap'] or '—'} | {p['labels']:,.0f} | {p['wrong_fit']:.1f} | "
                     + " | ".join(cells) + " |")
    best = min(ratios["ranking"], default=float("nan"))
    oracle = min(ratios["oracle"], default=float("nan"))
    lines += ["", f"Smallest ratio of the ranking design at matched ordering: **{best:.2f}×** (the issue's target: "
              f"≤ {TARGET}×: **{'met' if best <= TARGET else 'not met'}**); of the reference that knows the true "
              f"order and spends only on its neighbours: {oracle:.2f}×."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--metric", action="store_true", help="the decision designs use the judge score")
    parser.add_argument("--dry-run", action="store_true", help="print instead of writing docs/ranking.md")
    args = parser.parse_args(argv)
    with ProcessPoolExecutor(max_workers=min(args.seeds, 3)) as pool:
        rows = [row for rows in pool.map(run_seed, range(args.seeds), [args.metric] * args.seeds) for row in rows]
    section = render(points(rows), args.seeds, args.metric)
    if args.dry_run:
        print(section)
    else:
        replace_section(METRIC_SECTION if args.metric else SECTION, section, path=RANKING_DOC)
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
