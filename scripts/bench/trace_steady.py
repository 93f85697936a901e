"""The steady part of a load run, from the harness's ``--trace FILE``.

    python scripts/bench/trace_steady.py TRACE [TRACE ...] [--ramp-seconds 2] [--floor 0.6]

A run whose study runs out of work (workers that find none leave) ends in a tail of fewer and
fewer workers, and its whole-run submits/s counts that tail and the ramp-up. This prints, per
trace, the submits per second and the submit + next HIT p50 / p95 / p99 from the end of the
ramp-up to the first whole second whose submits fall below ``floor`` × the median per-second
count (after the ramp), next to the whole run's. Trace lines: seconds since the start,
milliseconds taken, kind (first, submit, next), HTTP status (tab-separated;
scripts/bench/load_annotators.py).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def steady(path: Path, ramp: float, floor: float) -> dict:
    submits = []
    for line in path.read_text().splitlines():
        at, taken, kind, _status = line.split("\t")
        if kind == "submit":
            submits.append((float(at), float(taken)))
    per_second: dict[int, int] = {}
    for at, _ in submits:
        per_second[int(at)] = per_second.get(int(at), 0) + 1
    start = int(ramp)
    last = max(per_second, default=start)
    median = statistics.median([per_second.get(s, 0) for s in range(start, last + 1)] or [0])
    end = start
    while end <= last and per_second.get(end, 0) >= floor * median:
        end += 1
    window = [taken for at, taken in submits if start <= at < end]
    return {"trace": str(path), "steady_from_s": start, "steady_to_s": end,
            "steady_submits_per_second": round(len(window) / (end - start), 1) if end > start else None,
            "steady_ms_p50": _percentile(window, 0.5), "steady_ms_p95": _percentile(window, 0.95),
            "steady_ms_p99": _percentile(window, 0.99), "submits": len(submits),
            "ms_p95": _percentile([taken for _, taken in submits], 0.95)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--ramp-seconds", type=float, default=2.0, help="the run's ramp-up (scenario embedded: 2)")
    ap.add_argument("--floor", type=float, default=0.6)
    args = ap.parse_args(argv)
    for path in args.traces:
        print(json.dumps(steady(path, args.ramp_seconds, args.floor)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
