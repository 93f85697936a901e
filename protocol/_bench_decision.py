"""Time the paper's NUTS decision function against the fast exact sampler on P count sets.

Draws P realistic count sets (seeded): 10-100 paired items, 0-1000 metric-only items, a
spread of true win rates and metric accuracies. The reference (NUTS, the paper's settings by
default) runs on a small sample of them (``--reference-pairs``); the fast method runs on all
P in one call, timed after one warm-up call on different count sets. Reports the reference
time per pair, the fast all-pairs time, their ratio scaled to P pairs (also without the
reference's fixed per-run set-up time, measured on a 10 + 10 draw run), the largest
|theta_fast - theta_ref| on the sample and the decision agreement on sampled pairs whose
reference theta is more than 0.01 from a threshold.
"""
from __future__ import annotations

import time

import numpy as np

from protocol.decision import PairCounts, decide_many


def add_arguments(parser) -> None:
    parser.add_argument("--pairs", type=int, default=120, help="count sets to decide")
    parser.add_argument("--reference-pairs", type=int, default=6,
                        help="how many of them the NUTS reference also decides")
    parser.add_argument("--num-chains", type=int, default=5)
    parser.add_argument("--num-warmup", type=int, default=2000)
    parser.add_argument("--num-samples", type=int, default=10000)
    parser.add_argument("--gamma", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)


def realistic_counts(pairs: int, seed: int) -> list[PairCounts]:
    """P count sets like a live study's: (paired 10-100, metric-only 0-1000, no human-only)."""
    rng = np.random.default_rng(seed)
    result = []
    for _ in range(pairs):
        tie = rng.uniform(0.05, 0.4)
        first_share = rng.beta(2, 2)                      # spread of true win rates
        p = np.array([(1 - tie) * first_share, tie, (1 - tie) * (1 - first_share)])
        accuracy = rng.uniform(0.4, 0.9)
        mu = np.empty((3, 3))                             # mu[c, c'] = P(metric c | oracle c')
        for c_prime in range(3):
            column = rng.dirichlet(np.ones(2)) * (1 - accuracy)
            mu[:, c_prime] = np.insert(column, c_prime, accuracy)
        paired_items = int(rng.integers(10, 101))
        metric_items = 0 if rng.random() < 0.1 else int(rng.integers(1, 1001))
        oracle = rng.choice(3, size=paired_items, p=p)
        paired = np.zeros((3, 3), np.int64)
        for c_prime in oracle:
            paired[rng.choice(3, p=mu[:, c_prime]), c_prime] += 1
        metric_only = rng.multinomial(metric_items, mu @ p)
        result.append(PairCounts(paired, np.zeros(3, np.int64), metric_only))
    return result


def run(args) -> dict:
    if args.pairs < 1 or args.reference_pairs < 1:
        raise ValueError(f"--pairs and --reference-pairs must be at least 1, got "
                         f"{args.pairs} and {args.reference_pairs}")
    counts = realistic_counts(args.pairs, args.seed)
    decide_many(realistic_counts(8, args.seed + 1), gamma=args.gamma)   # warm-up
    start = time.perf_counter()
    fast = decide_many(counts, gamma=args.gamma, seed=args.seed)
    fast_seconds = time.perf_counter() - start

    sample = np.random.default_rng(args.seed).choice(
        args.pairs, size=min(args.reference_pairs, args.pairs), replace=False)
    options = dict(num_chains=args.num_chains, num_warmup=args.num_warmup,
                   num_samples=args.num_samples)
    decide_many(counts[:1], gamma=args.gamma, method="nuts", seed=args.seed, **options)  # compile
    start = time.perf_counter()
    reference = decide_many([counts[i] for i in sample], gamma=args.gamma, method="nuts",
                            seed=args.seed, **options)
    reference_per_pair = (time.perf_counter() - start) / len(sample)

    # numpyro re-initialises (traces, compiles parts of) NUTS on every run, as the paper's code
    # does per pair; measure that fixed part with a 10 + 10 draw run to report it separately
    tiny = dict(options, num_warmup=10, num_samples=10)
    decide_many(counts[:1], gamma=args.gamma, method="nuts", seed=args.seed, **tiny)
    start = time.perf_counter()
    decide_many([counts[sample[0]]], gamma=args.gamma, method="nuts", seed=args.seed, **tiny)
    overhead = time.perf_counter() - start

    error = np.abs(fast.theta[sample] - reference.theta)
    thresholds = np.array([args.gamma / 2, 1 - args.gamma / 2])
    clear = np.abs(reference.theta[:, None] - thresholds[None]).min(1) > 0.01
    agree = fast.decision[sample] == reference.decision
    return {
        "pairs": args.pairs,
        "reference_pairs": int(len(sample)),
        "reference_settings": options,
        "reference_seconds_per_pair": round(reference_per_pair, 3),
        "fast_seconds_all_pairs": round(fast_seconds, 4),
        "speedup": round(reference_per_pair * args.pairs / fast_seconds, 1),
        "reference_fixed_seconds_per_run": round(overhead, 3),
        "speedup_sampling_only": round(
            max(reference_per_pair - overhead, 0.0) * args.pairs / fast_seconds, 1),
        "max_abs_theta_error": round(float(error.max()), 5),
        "max_error_in_combined_se": round(float(
            (error / np.sqrt(fast.theta_se[sample] ** 2 + reference.theta_se ** 2
                             + 1e-12)).max()), 2),
        "decision_agreement": round(float(agree[clear].mean()) if clear.any() else 1.0, 4),
        "decision_agreement_all": round(float(agree.mean()), 4),
        "fast_unresolved_pairs": int((~fast.resolved).sum()),
        "fast_closed_form_pairs": int((fast.draws == 0).sum()),
        "fast_draws_total": int(fast.draws.sum()),
        "fast_max_theta_se": round(float(fast.theta_se.max()), 5),
    }
