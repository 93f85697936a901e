"""CPU of the active design's fit (``protocol.active_ranking.fit``) at many systems.

    python scripts/bench/active_fit.py --systems 200            # numpy's BLAS threads as the environment says
    OPENBLAS_NUM_THREADS=1 python scripts/bench/active_fit.py   # one thread, as the app's processes run it

The win matrix is a running study's: ``--batch`` labels on every neighbour of the start order
and on ``--pairs`` other pairs drawn at random (seeded). Prints one JSON object: the CPU (this
process's, every thread counted) per fit, the least and the median of ``--repeat`` fits, and
the BLAS threads numpy was loaded with (the environment's ``OPENBLAS_NUM_THREADS``); and what a
warm start would give: choix's ILSR (``leaderboard.fit_scores``) on the labels with one more
round of one pair, started cold and from the scores before it (iterations and CPU).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from protocol.active_ranking import PRIOR_TIES, fit, smoothed  # noqa: E402
from protocol.leaderboard import fit_scores  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    size, batch = args.systems, args.batch
    wins = np.zeros((size, size))
    pairs = [(i, i + 1) for i in range(size - 1)]
    pairs += [tuple(pair) for pair in rng.integers(0, size, (args.pairs, 2)) if pair[0] != pair[1]]
    for i, j in pairs:
        won = rng.integers(0, batch + 1)
        wins[i, j] += won
        wins[j, i] += batch - won
    fit(wins)  # the first call loads what it loads
    times = []
    for _ in range(args.repeat):
        started = time.process_time()
        fit(wins)
        times.append(1000 * (time.process_time() - started))
    before = fit(wins).scores
    wins[pairs[0]] += batch // 2  # one more round of the first pair
    wins[pairs[0][::-1]] += batch - batch // 2
    warm = {name: _ilsr(wins, start) for name, start in (("cold", None), ("warm", before))}
    print(json.dumps({"systems": size, "labelled_pairs": len(pairs), "fits": args.repeat,
                      "cpu_ms_per_fit_min": round(min(times), 2), "cpu_ms_per_fit_median": round(statistics.median(times), 2),
                      "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
                      **{f"ilsr_{name}_{what}": value for name, result in warm.items() for what, value in result.items()}}))
    return 0


def _ilsr(wins: np.ndarray, start: np.ndarray | None) -> dict:
    """``leaderboard.fit_scores`` of the fit's smoothed wins, from ``start`` (None: choix's own
    start, as ``fit(wins, start=...)`` passes it): choix's iterations and the CPU."""
    from choix import lsr

    calls = []
    step = lsr.lsr_pairwise_dense

    def counted(*args, **kwargs):
        calls.append(1)
        return step(*args, **kwargs)

    lsr.lsr_pairwise_dense = counted
    try:
        started = time.process_time()
        fit_scores(smoothed(wins), prior_ties=PRIOR_TIES, start=start)
        cpu = 1000 * (time.process_time() - started)
    finally:
        lsr.lsr_pairwise_dense = step
    return {"iterations": len(calls), "cpu_ms": round(cpu, 2)}


if __name__ == "__main__":
    sys.exit(main())
