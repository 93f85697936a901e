"""Time the SPA p-value matrix (shared signs) against scipy.stats.permutation_test per pair.

Random scores of shape (systems, segments); the product's route computes all
systems*(systems-1)/2 p-values with one shared sign matrix; the scipy route runs
``permutation_test`` (paired, ``permutation_type="samples"``) on a few pairs and the time
per pair is extrapolated to all pairs.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from .spa import pairwise_p_values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--systems", type=int, default=15, help="number of systems S (default 15)")
    parser.add_argument("--segments", type=int, default=1300, help="segments per system L (default 1300)")
    parser.add_argument("--permutations", type=int, default=1000, help="sign flips per test (default 1000)")
    parser.add_argument("--scipy-pairs", type=int, default=3, help="pairs timed with scipy (default 3)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of the fast route (median reported)")
    parser.add_argument("--seed", type=int, default=0)


def _sum_of_differences(first, second, axis):
    return np.sum(first - second, axis=axis)


def run(args: argparse.Namespace) -> dict:
    if args.systems < 2 or args.segments < 1 or args.permutations < 1 or args.scipy_pairs < 1:
        raise SystemExit("need --systems >= 2, --segments >= 1, --permutations >= 1, --scipy-pairs >= 1")
    rng = np.random.default_rng(args.seed)
    scores = rng.normal(size=(args.systems, args.segments))
    n_pairs = args.systems * (args.systems - 1) // 2

    pairwise_p_values(scores[:2, :10], permutations=10, seed=args.seed)  # warm caches
    timings = []
    for _ in range(max(args.repeats, 1)):
        start = time.perf_counter()
        p_values = pairwise_p_values(scores, permutations=args.permutations, seed=args.seed)
        timings.append(time.perf_counter() - start)
    # The median, not the best run: the machine is shared and the speed-up should be honest.
    fast_seconds = float(np.median(timings))

    pairs = [(i, j) for i in range(args.systems) for j in range(i + 1, args.systems)]
    chosen = [pairs[k] for k in rng.choice(n_pairs, size=min(args.scipy_pairs, n_pairs), replace=False)]
    scipy_p = []
    start = time.perf_counter()
    for i, j in chosen:
        result = stats.permutation_test(
            (scores[i], scores[j]),
            _sum_of_differences,
            permutation_type="samples",
            alternative="greater",
            n_resamples=args.permutations,
            vectorized=True,
            random_state=args.seed,
        )
        scipy_p.append(result.pvalue)
    scipy_per_pair = (time.perf_counter() - start) / len(chosen)
    scipy_all = scipy_per_pair * n_pairs
    ours = np.array([p_values[i, j] for i, j in chosen])
    return {
        "systems": args.systems,
        "segments": args.segments,
        "permutations": args.permutations,
        "pairs": n_pairs,
        "fast_seconds_all_pairs": round(fast_seconds, 5),  # median of repeats
        "fast_seconds_repeats": [round(t, 5) for t in timings],
        "scipy_pairs_timed": len(chosen),
        "scipy_seconds_per_pair": round(scipy_per_pair, 5),
        "scipy_seconds_all_pairs_extrapolated": round(scipy_all, 3),
        "speedup": round(scipy_all / fast_seconds, 1),
        # Different random flips: the two routes agree only within Monte-Carlo error.
        "max_abs_p_difference_on_timed_pairs": round(float(np.max(np.abs(ours - np.array(scipy_p)))), 4),
    }
