"""A PostgreSQL database's backend CPU per stored judgement, in time slices, during a load.

    python scripts/bench/pg_cpu_slices.py postgres://postgres@127.0.0.1:5432/DBNAME --seconds 150 --slice 5

Polls the server every ``--slice`` seconds until ``--seconds`` have passed: the CPU (user +
system, from /proc: the server must run on this machine) of every backend connected to the
database (``pg_stat_activity``; this script's own connection left out) and the number of
judgements stored. Prints one line per slice with judgements stored in it, then one JSON object:
per slice, the seconds since the first judgement, judgements, and backend CPU per judgement
(``ms_per_judgement``). A backend that exits between two polls loses up to a slice of its CPU:
give the server's connections a long CONN_MAX_AGE (``DATABASE_CONN_MAX_AGE=3600``) for the run.
It waits for the database to exist and for its judgement table (an import runs meanwhile).
What it answers: does the database's CPU per submit stay flat as a study's serving tables fill
(docs/serving.md, "Query plans and statements")?
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import psycopg

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_ms(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1000.0 / TICKS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("database_url")
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--slice", type=float, default=5)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.seconds
    connection = None
    while connection is None and time.monotonic() < deadline:
        try:
            connection = psycopg.connect(args.database_url, autocommit=True)
        except psycopg.OperationalError:
            time.sleep(1)
    if connection is None:
        return 1
    database = connection.info.dbname
    last_cpu: dict[int, float] = {}   # every backend seen: its CPU at its last poll
    slices, previous, started = [], None, None
    while time.monotonic() < deadline:
        try:
            judged = connection.execute('SELECT COUNT(*) FROM "annotation_judgement"').fetchone()[0]
        except psycopg.errors.UndefinedTable:
            judged = 0
        pids = [pid for pid, in connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [database])]
        for pid in pids:
            cpu = _cpu_ms(pid)
            if cpu is not None:
                last_cpu[pid] = cpu
        now = (time.monotonic(), judged, sum(last_cpu.values()))
        if previous is not None and judged > previous[1]:
            if started is None:
                started = previous[0]
            row = {"at_s": round(now[0] - started, 1), "judgements": judged - previous[1],
                   "ms_per_judgement": round((now[2] - previous[2]) / (judged - previous[1]), 2)}
            slices.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        previous = now
        time.sleep(args.slice)
    print(json.dumps({"database": database, "slice_seconds": args.slice, "slices": slices}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
