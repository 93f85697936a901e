"""The active design's close: the plan and CPU of its read of the labelled pairs' heads on SQLite.

    python scripts/bench/active_close_reads.py --bundle var/a200x100_active.jsonl.gz --metric judge_score

Imports the bundle (an active-design arena: ``python -m protocol.arena make ... --study-setting
pair_design=active --study-setting family_control=none``) into a SQLite database in a temporary
directory, then prints SQLite's plan of the pairs with a HIT or not parked read as one filter
(the two conditions OR-ed) and as the two statements ``protocol_state._labelled_close_snapshot``
makes, and the CPU of 20 reads of each (right after the import: the start's neighbours).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--metric", default="judge_score")
    parser.add_argument("--reads", type=int, default=20)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    var = tempfile.mkdtemp(prefix="evalapp-close-reads-")
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
    from django.db import connection
    from django.db.models import Q

    from annotation.models import PairState
    from annotation.services.studies import study_import
    from annotation.serving import protocol_state
    from protocol import adaptive

    call_command("migrate", verbosity=0)
    study = study_import(source=args.bundle, slug="close-reads", metric=args.metric)
    pairs = PairState.objects.filter(study=study)

    def one_filter() -> dict:
        return dict(pairs.filter(Q(hits__gt=0) | ~Q(status=adaptive.PARKED)).values_list("pk", "version"))

    def two_statements() -> dict:
        heads = dict(pairs.filter(hits__gt=0).values_list("pk", "version"))
        heads.update(pairs.filter(status__in=protocol_state._NOT_PARKED).values_list("pk", "version"))
        return heads

    for name, query in (("one filter", pairs.filter(Q(hits__gt=0) | ~Q(status=adaptive.PARKED))),
                        ("statement 1", pairs.filter(hits__gt=0)),
                        ("statement 2", pairs.filter(status__in=protocol_state._NOT_PARKED))):
        sql, params = query.values_list("pk", "version").query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            print(f"{name}: {[row[-1] for row in cursor.fetchall()]}")
    for name, read in (("one filter", one_filter), ("two statements", two_statements)):
        started = time.process_time()
        for _ in range(args.reads):
            heads = read()
        print(f"{name}: {len(heads)} rows of {pairs.count()}, "
              f"{1000 * (time.process_time() - started) / args.reads:.2f} ms of CPU a read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
