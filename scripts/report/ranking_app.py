"""The ranking designs through the app, on a synthetic arena with a known truth (issue 22).

    python scripts/report/ranking_app.py --systems 16 --prompts 500 --seed 0
    python scripts/report/ranking_app.py --systems 50 --prompts 2000 --seed 0 --metric
    python scripts/report/ranking_app.py --systems 50 --prompts 2000 --seed 0 --design active
    python scripts/report/ranking_app.py ... --database-url postgres://postgres@127.0.0.1:5432/postgres

Builds the arena of ``protocol.arena`` (no human lines), imports it as a study with
``pair_design: ranking`` (or ``active``, ``--design``) into a fresh database (SQLite in a temporary directory, or a
``perf_bench_<pid>`` PostgreSQL database dropped at the end), and lets crowd workers answer
every HIT the app serves with the arena's own human label of that item and pair, through the
services the web views call (``hits.hit_next_for_annotator``, ``hits.judgement_submit``; round
closes inline). When nothing is served any more it reads the ranking the dashboard shows
(``selectors.dashboard.study_ranking``) and scores it against the true order, next to the protocol-only
replay of the same arena (``protocol.arena_replay``: the ranking design and all pairs at the
same family-wise level). Prints one JSON object.

The app draws items with its own allocation, the replay in a seeded order of its own, so the
two runs see different labels of the same pairs: their label counts agree in distribution,
not exactly.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from protocol.active_ranking import ActiveSettings  # noqa: E402
from scripts.bench.hot_path import _drop, _setup  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gap", type=float, default=0.3, help="mean strength gap of neighbours (0: a null arena)")
    parser.add_argument("--metric", action="store_true", help="the study uses the arena's judge score")
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--gamma", type=float, default=0.05)
    parser.add_argument("--batch", type=int, help="the study's batch size (the replay's too; default 50 for the "
                        "sort, the active design's rounds, 25, for it)")
    parser.add_argument("--max-labels", type=int, default=0,
                        help="the study's labels per comparison (ranking_max_labels; 0 = all items), the replay's cap")
    parser.add_argument("--design", choices=("ranking", "active"), default="ranking",
                        help="the merge sort (ranking) or the active Bradley–Terry design (active)")
    parser.add_argument("--confidence", type=float, default=ActiveSettings().confidence,
                        help="active design: the study's confidence")
    parser.add_argument("--resolution", type=float, default=ActiveSettings().resolution,
                        help="active design: the study's resolution")
    parser.add_argument("--no-replay", action="store_true", help="skip the protocol-only replays")
    parser.add_argument("--database-url", help="a PostgreSQL server (postgres://...); default SQLite")
    args = parser.parse_args(argv)
    if args.batch is None:
        args.batch = ActiveSettings().batch if args.design == "active" else 50
    dropped, var_dir = _setup(args.database_url)
    try:
        print(json.dumps(_run(args, Path(var_dir)), indent=1))
        return 0
    finally:
        if dropped:
            _drop(args.database_url, dropped)


def _run(args, var_dir: Path) -> dict:
    import django

    django.setup()
    from django.core.management import call_command

    from annotation.models import PairState
    from annotation.selectors.dashboard import study_ranking
    from annotation.services import hits
    from annotation.services.studies import study_import
    from protocol.arena import ArenaSpec, make_arena, write_bundle
    from protocol.arena_replay import replay_active, replay_all_pairs, replay_ranking, score
    from protocol.ranking_design import RankingSettings

    call_command("migrate", verbosity=0)
    arena = make_arena(ArenaSpec(systems=args.systems, prompts=args.prompts, seed=args.seed, gap=args.gap))
    bundle = var_dir / "arena.jsonl.gz"
    write_bundle(arena, bundle, human=False)
    began = time.perf_counter()
    study = study_import(source=bundle, slug="arena", metric="judge_score" if args.metric else "",
                         study_settings={"pair_design": args.design, "family_control": "none", "gamma": args.gamma,
                                         "batch_size": args.batch, "budget": args.systems ** 2 * args.prompts,
                                         "ranking_max_labels": args.max_labels,
                                         **({"ranking_confidence": args.confidence,
                                             "ranking_resolution": args.resolution} if args.design == "active" else {})})
    imported = time.perf_counter() - began
    index = {name: n for n, name in enumerate(arena.names)}
    item_index = {item: t for t, item in enumerate(arena.items)}
    labels_of: dict[tuple[int, int], object] = {}
    workers = [hits.annotator_for_worker(platform="prolific", worker_id=f"arena{n}") for n in range(args.workers)]
    submits, began = 0, time.perf_counter()
    while True:
        progressed = False
        for annotator in workers:
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            comparison = hit.comparison
            pair = (index[comparison.first.name], index[comparison.second.name])
            if pair not in labels_of:
                labels_of[pair] = arena.human(*pair)
            value = int(labels_of[pair][item_index[comparison.item.external_id]])
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=-value if hit.shown_swapped else value)
            submits += 1
            progressed = True
        if not progressed:
            break
    served = time.perf_counter() - began
    study.refresh_from_db()
    ranking = study_ranking(study=study)
    if not ranking["complete"]:
        raise SystemExit(f"the design did not complete: {ranking['runs']} pairs run, {ranking['running']} running")
    order = [index[name] for name in ranking["order"]]
    above = _above(arena, ranking["decisions"], index)
    app = {"labels": ranking["labels"], "submits": submits, "pairs_run": ranking["runs"],
           "pairs_decided": ranking["decided"], "pairs_implied": ranking["implied"],
           "pairs_served": PairState.objects.filter(study=study, round__gt=0).count(),
           "tiers": len(ranking["tiers"]), "level": ranking["level"], "bound": ranking.get("bound"),
           "stated_misordered": ranking.get("expected_misordered"),
           **score(arena, order, above), "import_seconds": round(imported, 2), "serve_seconds": round(served, 1)}
    out = {"systems": args.systems, "prompts": args.prompts, "seed": args.seed, "gap": args.gap,
           "design": args.design, "metric": args.metric, "max_labels": args.max_labels,
           "database": "postgresql" if args.database_url else "sqlite",
           "planned_pairs": ranking["planned"], "all_pairs": args.systems * (args.systems - 1) // 2, "app": app}
    if not args.no_replay:
        settings = RankingSettings(gamma=args.gamma, batch=args.batch, seed=0)
        if args.design == "active":
            replay = replay_active(arena, ActiveSettings(confidence=args.confidence, resolution=args.resolution,
                                                         batch=args.batch, max_labels=args.max_labels,
                                                         gamma=args.gamma), metric=args.metric, seed=0)
        else:
            replay = replay_ranking(arena, replace(settings, max_labels=args.max_labels), metric=args.metric)
        everything = replay_all_pairs(arena, settings, metric=args.metric, family=True)
        keep = ("labels", "tau", "wrong_adjacent", "wrong_adjacent_fit", "resolved_adjacent", "false_pairs",
                "pairs_asked")
        out["replay_ranking"] = {k: getattr(replay, k) for k in keep}
        out["replay_all_pairs_fwer"] = {k: getattr(everything, k) for k in keep}
        out["app_labels_over_all_pairs_fwer"] = round(app["labels"] / everything.labels, 3)
    return out


def _above(arena, decisions, index):
    size = len(arena.names)
    above = np.zeros((size, size), dtype=bool)
    for first, second, decision in decisions:
        i, j = index[first], index[second]
        if decision > 0:
            above[i, j] = True
        elif decision < 0:
            above[j, i] = True
    return above


if __name__ == "__main__":
    sys.exit(main())
