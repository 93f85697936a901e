"""Generate the section "Ordering at matched labels" of docs/ranking-results.md (issue 22): human labels
against ordering quality for every design, each at several resolutions, on the known-truth
arena of protocol.arena, so that designs are compared where they order the true neighbours
equally well.

    nice -n 10 .venv/bin/python scripts/report/ranking_matched.py [--seeds 3] [--metric] [--dry-run]
        [--first-seed F] [--save-rows rows.jsonl | --load-rows rows.jsonl [--rerun active all_pairs_ebh]]

Arena: k = 50 systems, 2,000 prompts, mean neighbour gap 0.3, seeds 0..S-1 (one process per
seed), gamma = 0.05; human labels only, or with ``--metric`` the arena's judge score too (the
sort starts from the metric's order and every pair's e-process bets on the metric's labels;
written to its own section). Designs (protocol.arena_replay):
  * all pairs at level gamma and at gamma / pairs (FWER), every pair's run capped at
    30 / 60 / 100 / 200 labels or uncapped (``max_labels``);
  * the ranking design (one-stage merge sort, FWER), every comparison capped at
    200 / 300 / 400 / 600 labels or uncapped (its resolution, ``max_labels``);
  * the active Bradley–Terry design (protocol.active_ranking) at confidence 0.8 / 0.85 / 0.9 /
    0.925 / 0.95 / 0.975 / 0.99 and its default resolution (0.05), rounds and width, with what
    it states against what it got;
  * uniform random pairs and items at 20,000 / 30,000 / 45,000 / 60,000 labels;
  * a reference no design can run: 200 to 2,000 labels on each pair of neighbours
    in the true order and nothing else.
Every design is scored by the Bradley–Terry fit of the labels it spent
(``arena_replay.fitted_order``, what a leaderboard shows), and the decision designs also by
their own order and their decisions.
"""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.arena import ArenaSpec, make_arena  # noqa: E402
from protocol.active_ranking import ActiveSettings  # noqa: E402
from protocol.arena_replay import (  # noqa: E402
    replay_active,
    replay_all_pairs,
    replay_all_pairs_ebh,
    replay_neighbours_oracle,
    replay_ranking,
    replay_uniform,
)
from protocol.ranking_design import RankingSettings  # noqa: E402
from scripts.report.results_md import replace_section  # noqa: E402

SECTION = "ranking_matched"
METRIC_SECTION = "ranking_matched_metric"
RANKING_DOC = ROOT / "docs" / "ranking-results.md"
SYSTEMS, PROMPTS, GAP, GAMMA = 50, 2000, 0.3, 0.05
ALL_PAIRS_CAPS = (30, 60, 100, 200, 0)
RANKING_CAPS = (200, 300, 400, 600, 0)
ACTIVE_CONFIDENCE = (0.8, 0.85, 0.9, 0.925, 0.95, 0.975, 0.99)
ACTIVE = ActiveSettings(gamma=GAMMA)
UNIFORM_LABELS = (20_000, 30_000, 45_000, 60_000)
ORACLE_LABELS = (200, 400, 500, 600, 700, 800, 1200, 2000)
TARGET = 0.25
DESIGNS = {
    "all_pairs": "all pairs, level γ",
    "all_pairs_fwer": "all pairs, level γ / pairs (FWER)",
    "all_pairs_ebh": "all pairs, e-BH at γ (the app's default)",
    "ranking": "ranking design (merge sort, FWER)",
    "active": "active Bradley–Terry design",
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
    rows += ebh_points(seed, metric, arena)
    rows += active_points(seed, metric, arena)
    for labels in UNIFORM_LABELS:
        rows.append({**asdict(replay_uniform(arena, labels, seed=seed)), "cap": 0})
    for per_pair in ORACLE_LABELS:
        rows.append({**asdict(replay_neighbours_oracle(arena, per_pair, seed=seed)), "cap": per_pair})
    print(f"seed {seed}: {len(rows)} design points", file=sys.stderr, flush=True)
    return rows


def ebh_points(seed: int, metric: bool, arena=None) -> list[dict]:
    """All pairs with the app's default family control (e-BH over the pairs at γ) at every cap
    of ``ALL_PAIRS_CAPS`` on the arena of ``seed``."""
    arena = arena or make_arena(ArenaSpec(systems=SYSTEMS, prompts=PROMPTS, seed=seed, gap=GAP))
    settings = RankingSettings(gamma=GAMMA, seed=seed)
    return [{**asdict(replay_all_pairs_ebh(arena, replace(settings, max_labels=cap), metric=metric)), "cap": cap}
            for cap in ALL_PAIRS_CAPS]


def active_points(seed: int, metric: bool, arena=None) -> list[dict]:
    """The active design at every confidence of ``ACTIVE_CONFIDENCE`` on the arena of ``seed``."""
    arena = arena or make_arena(ArenaSpec(systems=SYSTEMS, prompts=PROMPTS, seed=seed, gap=GAP))
    rows = []
    for confidence in ACTIVE_CONFIDENCE:
        active = replace(ACTIVE, confidence=confidence)
        rows.append({**asdict(replay_active(arena, active, metric=metric, seed=seed)), "cap": confidence})
    return rows


NULL_SYSTEMS, NULL_PROMPTS, NULL_SEEDS = 16, 500, 20


def null_table(metric: bool) -> str:
    """The active design on null arenas (all systems equal, so every decision and every
    confident neighbour is false), at each confidence of ``ACTIVE_CONFIDENCE``."""
    lines = [f"Null arenas ({NULL_SYSTEMS} equal systems × {NULL_PROMPTS} prompts, {NULL_SEEDS} seeds; "
             f"{'starting from the metric’s order' if metric else 'starting from a shuffle'}): every decision and "
             "every confident neighbour is false; a resolved neighbour is wrong beyond the resolution when the "
             "Bradley–Terry fit of every label reverses it by more than the resolution, *(direct)* when the pair's own "
             f"log-odds on its {NULL_PROMPTS} prompts do (equal systems still differ on a finite set of prompts, and "
             "not transitively).", "",
             "| confidence | human labels | studies with a decided pair | confident neighbours per study | "
             f"stated misordered (of {NULL_SYSTEMS - 1}) | resolved per study | of them wrong beyond the resolution | "
             "(direct) |", "|---|---|---|---|---|---|---|---|"]
    for confidence in ACTIVE_CONFIDENCE:
        active = replace(ACTIVE, confidence=confidence)
        results = [replay_active(make_arena(ArenaSpec(systems=NULL_SYSTEMS, prompts=NULL_PROMPTS, seed=seed, gap=0.0)),
                                 active, metric=metric, seed=seed) for seed in range(NULL_SEEDS)]
        lines.append(f"| {confidence} | {np.mean([r.labels for r in results]):,.0f} | "
                     f"{sum(r.ordered_pairs > 0 for r in results)} of {NULL_SEEDS} | "
                     f"{np.mean([r.confident_neighbours for r in results]):.2f} | "
                     f"{np.mean([r.stated_misordered for r in results]):.1f} | "
                     f"{np.mean([r.resolved_neighbours for r in results]):.2f} | "
                     f"{sum(r.resolved_wrong for r in results)} of {sum(r.resolved_neighbours for r in results)} | "
                     f"{sum(r.resolved_wrong_direct for r in results)} |")
    return "\n".join(lines)


# Designs --load-rows can run again instead of reading (cheap ones, or ones added since).
RERUN = {"active": active_points, "all_pairs_ebh": ebh_points}


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
                        false_pairs=int(sum(r["false_pairs"] for r in group)), level=group[0]["level"],
                        stated=mean("stated_misordered") if design == "active" else float("nan"),
                        confident=mean("confident_neighbours") if design == "active" else float("nan"),
                        confident_wrong=int(sum(r["confident_wrong"] for r in group)) if design == "active" else 0,
                        confident_total=int(sum(r["confident_neighbours"] for r in group)) if design == "active" else 0,
                        resolved_wrong=int(sum(r["resolved_wrong"] for r in group)) if design == "active" else 0,
                        resolved_wrong_direct=int(sum(r["resolved_wrong_direct"] for r in group))
                        if design == "active" else 0,
                        resolved_total=int(sum(r["resolved_neighbours"] for r in group)) if design == "active" else 0))
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
        f"γ = {GAMMA}. *cap*: most labels a pair's run may take (the design's resolution; — = all prompts); "
        f"for the active design its confidence (resolution {ACTIVE.resolution} in log-strength, rounds of "
        f"{ACTIVE.batch} labels on {ACTIVE.width} neighbours). "
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
            f"| {DESIGNS[p['design']]} | {_resolution(p)} | {p['labels']:,.0f} ± {p['labels_sd']:,.0f} | "
            f"{p['wrong_fit']:.1f} ± {p['wrong_fit_sd']:.1f} / {SYSTEMS - 1} | {p['tau_fit']:.3f} | "
            f"{p['wrong_own']:.1f} | {p['decided_neighbours']:.1f} | "
            f"{p['decided']:,.0f} | {p['false_pairs']} |" if decides else
            f"| {DESIGNS[p['design']]} | {_resolution(p)} | {p['labels']:,.0f} | {p['wrong_fit']:.1f} ± {p['wrong_fit_sd']:.1f} / "
            f"{SYSTEMS - 1} | {p['tau_fit']:.3f} | — | — | — | — |")
    lines += ["", "For the same correctly ordered neighbours: each all-pairs point against the cheapest point of the "
              "ranking design, of the active design, and of the reference that knows the true order, whose fitted "
              "order reverses at most as many true neighbours (means over seeds):", "",
              "| all pairs | cap | labels | wrong neighbours (fit) | ranking design: labels, cap | × | "
              "active design: labels, confidence | × | true neighbours only: labels | × |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    ratios = {"ranking": {}, "active": {}, "oracle": {}}
    for p in (q for q in points_ if q["design"] in ("all_pairs", "all_pairs_fwer", "all_pairs_ebh")):
        cells = []
        for design in ("ranking", "active", "oracle"):
            other = matched(points_, design, p["wrong_fit"])
            if other is None:
                cells += ["none orders as well", "—"]
                continue
            ratio = other["labels"] / p["labels"]
            ratios[design].setdefault(p["design"], []).append(ratio)
            where = f", {_resolution(other)}" if design != "oracle" else ""
            cells += [f"{other['labels']:,.0f}{where}", f"{ratio:.2f}"]
        level = {"all_pairs_fwer": "level γ / pairs", "all_pairs_ebh": "e-BH at γ"}.get(p["design"], "level γ")
        lines.append(f"| {level} | {p['cap'] or '—'} | {p['labels']:,.0f} | {p['wrong_fit']:.1f} | "
                     + " | ".join(cells) + " |")

    def best(design, against=None):
        found = [r for key, values in ratios[design].items() if against in (None, key) for r in values]
        return min(found, default=float("nan"))

    def verdict(ratio):
        return "met" if ratio <= TARGET else "not met"

    def three(design):
        return " / ".join(f"{best(design, against):.2f}×" for against in ("all_pairs_fwer", "all_pairs_ebh", "all_pairs"))

    active = [best("active", against) for against in ("all_pairs_fwer", "all_pairs_ebh", "all_pairs")]
    lines += ["", f"Smallest ratio at matched ordering, against all pairs at the family-wise level γ / pairs (the "
              f"level the sort's and the active design's decisions are made at) / with e-BH at γ (the app's "
              f"default for an all-pairs study) / at per-pair level γ: the ranking design {three('ranking')}; the "
              f"active design **{three('active')}** (the issue's target, ≤ {TARGET}×: **{verdict(active[0])}** "
              f"against the family-wise run, **{verdict(active[1])}** against e-BH, {verdict(active[2])} against "
              f"per-pair γ); the reference that knows the true order and spends only on its neighbours: "
              f"{three('oracle')}."]
    lines += ["", "What the active design states, and how it held: *stated* is the expected number of misordered "
              "neighbours under its fit's posterior when it stopped (the sum of Φ(−z) over the k − 1 neighbours), "
              "*measured* the neighbours its order reverses; *confident* the neighbours it reported ordered at the "
              "confidence (z ≥ Φ⁻¹(confidence)), *of them wrong* those the truth orders the other way; *resolved* "
              "the neighbours it reported ordered or close (a reversal by more than the resolution has posterior "
              "probability ≤ 1 − confidence), *wrong beyond the resolution* those that the Bradley–Terry fit of every "
              "label of every pair (`arena_replay.population_scores`, what the design estimates) reverses by more "
              "than the resolution, and *(direct)* those that the pair's own log-odds on all its prompts "
              "(`Arena.log_odds`) reverse by more (totals over seeds); "
              "*decided*: pairs its e-processes decided at γ / (k (k − 1) / 2), direct and implied.", "",
              "| confidence | human labels | stated misordered | measured (wrong neighbours) | confident neighbours | "
              "of them wrong | resolved | of them wrong beyond the resolution | (direct) | neighbours decided | "
              "pairs decided | false pairs |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in (q for q in points_ if q["design"] == "active"):
        lines.append(f"| {p['cap']} | {p['labels']:,.0f} | {p['stated']:.1f} | {p['wrong_fit']:.1f} | "
                     f"{p['confident']:.1f} / {SYSTEMS - 1} | {p['confident_wrong']} of {p['confident_total']} | "
                     f"{p['resolved_total']} | {p['resolved_wrong']} | {p['resolved_wrong_direct']} | "
                     f"{p['decided_neighbours']:.1f} | {p['decided']:,.0f} | {p['false_pairs']} |")
    return "\n".join(lines)


def _resolution(point: dict) -> str:
    """The design's resolution as the tables show it: the active design's confidence, else
    the cap (— = all prompts)."""
    if point["design"] == "active":
        return f"conf. {point['cap']}"
    return f"{point['cap'] or '—'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="arenas FIRST_SEED .. FIRST_SEED + SEEDS - 1 (seeds no setting was chosen on)")
    parser.add_argument("--metric", action="store_true", help="the decision designs use the judge score")
    parser.add_argument("--dry-run", action="store_true", help="print instead of writing docs/ranking-results.md")
    parser.add_argument("--workers", type=int, default=3, help="processes (one seed each)")
    parser.add_argument("--save-rows", type=Path, help="also write every design point as JSON lines here")
    parser.add_argument("--load-rows", type=Path, help="render from the JSON lines of an earlier --save-rows")
    parser.add_argument("--rerun", nargs="+", choices=sorted(RERUN),
                        help="with --load-rows: run these designs' points again instead of reading them")
    args = parser.parse_args(argv)
    if args.load_rows:
        stored = [json.loads(line) for line in args.load_rows.read_text().splitlines() if line.strip()]
        seeds = sorted({r["seed"] for r in stored})
        args.seeds = len(seeds)
        rerun = set(args.rerun or ())
        rows = [r for r in stored if r["design"] not in rerun]
        for design in sorted(rerun):
            with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
                rows += [row for rows_ in pool.map(RERUN[design], seeds, [args.metric] * len(seeds)) for row in rows_]
    else:
        with ProcessPoolExecutor(max_workers=max(1, min(args.seeds, args.workers))) as pool:
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            rows = [row for rows in pool.map(run_seed, seeds, [args.metric] * args.seeds) for row in rows]
    if args.save_rows:
        args.save_rows.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in rows))
    section = render(points(rows), args.seeds, args.metric) + "\n\n" + null_table(args.metric)
    if args.dry_run:
        print(section)
    else:
        replace_section(METRIC_SECTION if args.metric else SECTION, section, path=RANKING_DOC)
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
