"""A round close's CPU and the pair rows it decodes, on an imported bundle (issue 41, part 2).

    python scripts/bench/close_cost.py --bundle var/a200x100_rubric.jsonl.gz --metric judge_score --submits 600
    python scripts/bench/close_cost.py --bundle var/a60x100.jsonl.gz --submits 150 --combine-noise 1

Imports the bundle (e.g. ``python -m protocol.arena make --systems 200 --prompts 100 --seed 0
--no-human --study-setting 'criteria=[{"name": "quality"}, {"name": "style"}]' --out ...``) into
a SQLite database in a temporary directory, then serves ``--submits`` HITs through the services
(``--workers`` crowd workers in turn; a rubric's every criterion answered, the first system
preferred on 70 % of them), closing the filled rounds after each submit as the close job
does (``runtime.rounds_close``), timed apart. Prints one JSON object: closes run, a close's
CPU (mean, median, least, ms), and the pair rows a close decoded (``protocol_state._lanes_of``
calls: mean and most) out of the study's pairs, and the CPU of the ordering designs'
Bradley–Terry solver in a close (``solver_cpu_ms_per_close_mean``). Runs on any revision of the app (services
only), so the same command compares two checkouts side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--metric", default="judge_score")
    parser.add_argument("--submits", type=int, default=600)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--combine-noise", type=float, default=None, metavar="SD",
                        help="add a second metric, --metric's scores plus normal noise of this sd (seeded), "
                             "and combine it with --metric (Study.combined_metrics)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    var = tempfile.mkdtemp(prefix="evalapp-close-cost-")
    os.environ.update(DJANGO_SETTINGS_MODULE="evalapp.settings.dev", EVALAPP_VAR_DIR=var)
    os.environ.pop("DATABASE_URL", None)
    try:
        return _run(args)
    finally:
        shutil.rmtree(var, ignore_errors=True)


def _run(args) -> int:
    import django

    django.setup()
    from django.core.management import call_command

    from annotation import jobs
    from annotation.models import PairState
    from annotation.rubrics import study_rubric
    from annotation.services import hits, runtime
    from annotation.services.studies import study_import
    from annotation.serving import protocol_state

    call_command("migrate", verbosity=0)
    bundle = args.bundle if args.combine_noise is None else _combined_bundle(args)
    started = time.perf_counter()
    study = study_import(source=bundle, slug="close-cost", metric=args.metric)
    imported_s = time.perf_counter() - started
    criteria = [c.name for c in study_rubric(study)]
    pending: set[int] = set()
    jobs.rounds_close = lambda study_id: pending.add(study_id)  # closed below, timed apart
    decoded = [0]
    real = protocol_state._lanes_of

    def counted(*arguments):
        decoded[0] += 1
        return real(*arguments)

    protocol_state._lanes_of = counted
    # the CPU of the ordering designs' Bradley-Terry solver inside the closes (its warm start)
    import protocol.active_ranking as active_ranking

    solver_ms = [0.0]
    solve = active_ranking.fit_scores

    def solver_timed(*arguments, **options):
        cpu = time.process_time()
        try:
            return solve(*arguments, **options)
        finally:
            solver_ms[0] += (time.process_time() - cpu) * 1000

    active_ranking.fit_scores = solver_timed
    workers = [hits.annotator_for_worker(platform="prolific", worker_id=f"cc{n}") for n in range(args.workers)]
    rng = random.Random(args.seed)
    close_cpu, close_decoded, close_solver, submitted = [], [], [], 0
    for n in range(args.submits):
        annotator = workers[n % len(workers)]
        hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
        if hit is None:
            continue
        values = {name: rng.choice([1, 1, 1, 1, 1, 1, 1, -1, -1, 0]) for name in criteria}
        sign = -1 if hit.shown_swapped else 1
        if len(criteria) > 1:
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=0, answers={name: {"value": sign * v} for name, v in values.items()})
        else:
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=sign * values[criteria[0]])
        submitted += 1
        if pending:
            pending.clear()
            decoded[0], solver_ms[0] = 0, 0.0
            cpu = time.process_time()
            runtime.rounds_close(study_id=study.pk)
            close_cpu.append((time.process_time() - cpu) * 1000)
            close_decoded.append(decoded[0])
            close_solver.append(solver_ms[0])
    print(json.dumps({
        "bundle": args.bundle, "criteria": criteria, "design": study.pair_design,
        "pairs": PairState.objects.filter(study=study).count(), "import_s": round(imported_s, 1),
        "submits": submitted, "closes": len(close_cpu),
        # the first close of a process parses every pair it reads for the first time: apart
        "first_close_cpu_ms": round(close_cpu[0], 1) if close_cpu else None,
        "close_cpu_ms_mean": round(statistics.mean(close_cpu[1:]), 1) if len(close_cpu) > 1 else None,
        "close_cpu_ms_median": round(statistics.median(close_cpu[1:]), 1) if len(close_cpu) > 1 else None,
        "close_cpu_ms_min": round(min(close_cpu[1:]), 1) if len(close_cpu) > 1 else None,
        "solver_cpu_ms_per_close_mean": round(statistics.mean(close_solver[1:]), 2) if len(close_solver) > 1 else None,
        "decoded_per_close_mean": round(statistics.mean(close_decoded), 1) if close_decoded else None,
        "decoded_per_close_max": max(close_decoded, default=None),
    }))
    return 0


def _combined_bundle(args) -> str:
    """The bundle with a second metric ``<metric>_noisy`` (the metric's scores plus seeded normal
    noise of sd ``--combine-noise``) combined with ``--metric``; written beside the database."""
    import gzip

    import numpy as np

    opener = gzip.open if args.bundle.endswith(".gz") else open
    with opener(args.bundle, "rt") as source:
        rows = [json.loads(line) for line in source if line.strip()]
    noisy = f"{args.metric}_noisy"
    rng = np.random.default_rng(args.seed)
    extra = [{**row, "metric": noisy, "score": round(row["score"] + args.combine_noise * float(rng.standard_normal()), 4)}
             for row in rows if row.get("kind") == "metric_score" and row.get("metric") == args.metric]
    rows[0]["combined_metrics"] = noisy
    path = os.path.join(os.environ["EVALAPP_VAR_DIR"], "combined.jsonl")
    with open(path, "w") as out:
        for row in rows + extra:
            out.write(json.dumps(row) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
