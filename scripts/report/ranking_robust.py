"""Generate the section "When the model does not hold" of docs/ranking-results.md (issue 39):
the active ranking design on known-truth arenas that depart from its Bradley–Terry model
(prompt types, ties and near-equal tiers, a 3-cycle, a logistic judge), with what it states
against the truth, and the labels uniform random pairs need for the same Kendall tau.

    nice -n 10 .venv/bin/python scripts/report/ranking_robust.py [--seeds 10] [--systems 20]
        [--prompts 1000] [--workers 2] [--dry-run] [--save-rows rows.jsonl | --load-rows rows.jsonl]

Every arena is ``protocol.arena`` at 20 systems x 1,000 prompts (mean neighbour gap 0.3), seeds
0..S-1, with one departure each (``VARIANTS``). The active design (protocol.active_ranking) runs
at its defaults (confidence 0.95, resolution 0.05, rounds of 25, 10 in flight), human labels
only, starting from a shuffle; on arenas with kinds of prompt also with the kinds known
(``replay_active(by_kind=True)``: each pair's items take turns over the kinds and the fit
states the kinds' uncertainty). Uniform random pairs and items, fitted by Bradley–Terry, at
``MULTIPLES`` times the design's labels on the same arena, each the mean tau of ``UNIFORM_DRAWS``
draws of pairs and items (near the tau the study's prompts cap, one draw's tau varies between
draws by more than it moves with the labels): *uniform for the same tau* is the smallest
multiple whose mean tau over the seeds reaches the design's mean tau.
"""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.active_ranking import ActiveSettings  # noqa: E402
from protocol.arena import ArenaSpec, make_arena  # noqa: E402
from protocol.arena_replay import replay_active, replay_uniform  # noqa: E402
from scripts.report.results_md import replace_section  # noqa: E402

SECTION = "ranking_robust"
RANKING_DOC = ROOT / "docs" / "ranking-results.md"
SYSTEMS, PROMPTS, GAP = 20, 1000, 0.3
MULTIPLES = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16)
UNIFORM_DRAWS = 5
# name -> (what the arena is, ArenaSpec fields, whether the design also runs with the kinds known)
VARIANTS = {
    "thurstone": ("Thurstone (the default arena)", {}, False),
    "logistic": ("logistic judge (Bradley–Terry given the qualities)", {"link": "logistic"}, False),
    "tiers": ("tiers of 3 equal systems", {"tier_size": 3}, False),
    "cycle": ("a 3-cycle in the middle (term 1.0)", {"cycle": 1.0}, False),
    "kinds_null": ("4 kinds of prompt, no effect", {"prompt_types": 4, "type_sd": 0.0}, True),
    "kinds4": ("4 kinds of prompt, effect sd 0.5", {"prompt_types": 4, "type_sd": 0.5}, True),
    "kinds10": ("10 kinds of prompt, effect sd 0.5", {"prompt_types": 10, "type_sd": 0.5}, True),
}


def run_one(task: tuple[str, int, int, int]) -> list[dict]:
    """Rows of one arena: the design (and with the kinds known) and uniform pairs at the
    multiples of each design's labels."""
    variant, seed, systems, prompts = task
    _, fields, by_kind = VARIANTS[variant]
    arena = make_arena(ArenaSpec(systems=systems, prompts=prompts, seed=seed, gap=GAP, **fields))
    rows = []
    for method in (False, True) if by_kind else (False,):
        result = replay_active(arena, ActiveSettings(), seed=seed, by_kind=method)
        row = {**asdict(result), "variant": variant, "method": "by kind" if method else "today"}
        row["uniform_tau"] = {
            str(m): float(np.mean([replay_uniform(arena, max(1, int(round(result.labels * m))),
                                                  seed=seed * 100 + draw).tau for draw in range(UNIFORM_DRAWS)]))
            for m in MULTIPLES}
        rows.append(row)
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    out = []
    for variant in VARIANTS:
        for method in ("today", "by kind"):
            group = [r for r in rows if r["variant"] == variant and r["method"] == method]
            if not group:
                continue
            tau = float(np.mean([r["tau"] for r in group]))
            uniform = {m: float(np.mean([r["uniform_tau"][str(m)] for r in group])) for m in MULTIPLES}
            reach = next((m for m in MULTIPLES if uniform[m] >= tau), None)
            per_seed = []
            for r in group:
                hit = next((m for m in MULTIPLES if r["uniform_tau"][str(m)] >= r["tau"]), None)
                per_seed.append(1 / hit if hit else 1 / MULTIPLES[-1])
            resolved = sum(r["resolved_neighbours"] for r in group)
            confident = sum(r["confident_neighbours"] for r in group)
            out.append(dict(
                variant=variant, method=method, seeds=len(group),
                labels=float(np.mean([r["labels"] for r in group])),
                labels_sd=float(np.std([r["labels"] for r in group])),
                tau=tau, uniform=uniform, reach=reach, ratio_median=float(np.median(per_seed)),
                resolved=resolved, resolved_wrong=sum(r["resolved_wrong"] for r in group),
                resolved_wrong_population=sum(r["resolved_wrong_population"] for r in group),
                confident=confident, confident_wrong=sum(r["confident_wrong"] for r in group),
                stated=float(np.mean([r["stated_misordered"] for r in group])),
                wrong_adjacent=float(np.mean([r["wrong_adjacent"] for r in group])),
                seconds=float(np.mean([r["seconds"] for r in group]))))
    return out


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.1f} %)" if whole else "0 of 0"


def render(summary: list[dict], seeds: int, systems: int, prompts: int) -> str:
    lines = [
        f"k = {systems} systems × {prompts:,} prompts, mean neighbour gap 0.3, {seeds} seeds, the active design at "
        "its defaults (confidence 0.95, resolution r = 0.05, rounds of 25, 10 in flight), human labels only. "
        "*today*: the design as the app runs it; *by kind*: the design told every prompt's kind "
        "(`replay_active(by_kind=True)`: a pair's items take turns over the kinds, the fit states the kinds' "
        "uncertainty, `active_ranking.fit_by_kind`). *resolved*: neighbours reported ordered or close (totals "
        "over seeds); *wrong beyond r*: of them, those the Bradley–Terry fit of every label of every pair on the "
        "study's prompts reverses by more than r (`population_scores`) / those the population's scores reverse "
        "by more than r (`true_scores`: the prompts the study's are a sample of, the claim's subject); "
        "*ordered at 0.95*: neighbours reported ordered (the claim made at posterior 0.995, "
        "`ActiveSettings.order_bar`), *wrong*: those whose true strengths are reversed or equal. *uniform for the same τ*: the smallest multiple of the design's labels at which uniform random "
        "pairs + Bradley–Terry reach the design's mean Kendall τ (mean over seeds of the mean of "
        f"{UNIFORM_DRAWS} draws; — none up to {MULTIPLES[-1]}×; *at 2×*: their τ at twice the design's labels, "
        "which the design's τ must reach for its labels to be at most half theirs), and the design's labels as a share of theirs (per seed, median). Generated by "
        "`scripts/report/ranking_robust.py`.",
        "",
        "| arena | design | human labels | Kendall τ | wrong neighbours | stated misordered | resolved "
        "| wrong beyond r (study's prompts / population) | ordered at 0.95 | of them wrong "
        "| uniform for the same τ | uniform's τ at 2× | × uniform (median per seed) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        label = VARIANTS[s["variant"]][0]
        reach = f"{s['reach']:g}× ({s['labels'] * s['reach']:,.0f})" if s["reach"] else "—"
        ratio = f"{1 / s['reach']:.2f}" if s["reach"] else f"< {1 / MULTIPLES[-1]:.2f}"
        lines.append(
            f"| {label} | {s['method']} | {s['labels']:,.0f} ± {s['labels_sd']:,.0f} | {s['tau']:.3f} "
            f"| {s['wrong_adjacent']:.1f} / {systems - 1} | {s['stated']:.1f} | {s['resolved']} "
            f"| {s['resolved_wrong']} / {s['resolved_wrong_population']} "
            f"({100 * s['resolved_wrong_population'] / max(s['resolved'], 1):.1f} %) "
            f"| {s['confident']} | {_share(s['confident_wrong'], s['confident'])} | {reach} | {s['uniform'][2]:.3f} "
            f"| {ratio} ({s['ratio_median']:.2f}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--systems", type=int, default=SYSTEMS)
    parser.add_argument("--prompts", type=int, default=PROMPTS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--dry-run", action="store_true", help="print the section, do not write the doc")
    parser.add_argument("--save-rows")
    parser.add_argument("--load-rows")
    args = parser.parse_args(argv)
    if args.load_rows:
        rows = [json.loads(line) for line in Path(args.load_rows).read_text().splitlines() if line]
    else:
        tasks = [(v, seed, args.systems, args.prompts) for v in args.variants for seed in range(args.seeds)]
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            rows = [row for chunk in pool.map(run_one, tasks) for row in chunk]
        if args.save_rows:
            Path(args.save_rows).write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = render(summarise(rows), args.seeds, args.systems, args.prompts)
    print(text)
    if not args.dry_run:
        replace_section(SECTION, text, RANKING_DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main())
