"""How many more human judgements a study is expected to need before every pair stops.

The projection uses the protocol's own predictive (as ``adaptive.final_decision_probabilities``):
for each pair still running, p = (p+, p=, p-) ~ Dir(n + 1) from its human counts, future
labels ~ Multinomial(p), and theta in closed form after every round of ``batch`` labels; the
pair stops at the first round whose theta leaves [gamma/2, 1 - gamma/2] or when its labels
run out. The metric is left out (it only shortens the way to a decision) and so is the
adaptive policy's futility stop, so the projection errs towards more judgements.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .decision import closed_form_theta as theta_closed_form


# Predictive draws of all running pairs together: 300 per pair up to 200 pairs, fewer beyond
# (at least 60; the interval is of the total, a sum over pairs, which many pairs steady).
# Uncapped, 1,225 pairs took seconds of every dashboard (docs/benchmarks.md).
PROJECTION_DRAWS = 300
PROJECTION_ENTRIES = 60_000
PROJECTION_LEAST_DRAWS = 60
# Draws of a group of pairs that share counts and labels left (``judgements_to_finish``), within
# PROJECTION_ENTRIES over the groups: its mean stands for every member's.
SHARED_DRAWS = 20_000


def projection_draws(pairs: int) -> int:
    """The predictive draws per pair for projecting ``pairs`` (>= 1) running pairs together
    (``PROJECTION_DRAWS``, fewer when pairs x draws would pass ``PROJECTION_ENTRIES``, never
    fewer than ``PROJECTION_LEAST_DRAWS``)."""
    return max(PROJECTION_LEAST_DRAWS, min(PROJECTION_DRAWS, PROJECTION_ENTRIES // pairs))


@dataclass(frozen=True)
class Projection:
    """per_pair (P,) expected judgements; total expected and its (low, high) interval."""

    per_pair: np.ndarray
    total: float
    low: float
    high: float
    level: float


def judgements_to_finish(
    human_counts,
    remaining,
    *,
    batch: int,
    gamma: float,
    draws: int = 400,
    level: float = 0.8,
    seed: int = 0,
) -> Projection:
    """Predictive number of judgements each running pair still takes, and their total.

    human_counts (P, 3) counts (+, =, -) so far; remaining (P,) labels the pair can still
    receive (>= 0). Every pair is assumed undecided now. Returns expected judgements per
    pair and the ``level`` central interval of the total over ``draws`` predictive draws.
    """
    counts = np.asarray(human_counts, dtype=np.int64).reshape(-1, 3)
    remaining = np.asarray(remaining, dtype=np.int64).reshape(-1)
    if len(counts) != len(remaining):
        raise ValueError(f"{len(counts)} count rows but {len(remaining)} remaining values")
    if np.any(counts < 0) or np.any(remaining < 0):
        raise ValueError("counts and remaining labels must not be negative")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must lie in (0, 1), got {gamma}")
    size = len(counts)
    if size == 0:
        return Projection(per_pair=np.zeros(0), total=0.0, low=0.0, high=0.0, level=level)
    # Pairs with the same counts and labels left have the same predictive: each such group is
    # simulated once (at 200 systems before any human label all 19,900 pairs are one group, and
    # simulating each took 28 s of every dashboard). A pair alone in its group is simulated as
    # before, with the same draws in the same order (a study whose pairs all differ projects
    # exactly what it did pair by pair); a shared group, with more draws (its mean is every
    # member's), is resampled: n members add the sum of n independent draws to a draw's total.
    keys = np.concatenate([counts, remaining[:, None]], axis=1)
    unique, first, group_of, members = np.unique(keys, axis=0, return_index=True, return_inverse=True,
                                                 return_counts=True)
    group_of = group_of.reshape(-1)
    alone = np.sort(first[members == 1])            # pairs, in their order
    shared = np.flatnonzero(members > 1)            # groups
    per_pair = np.zeros(size)
    totals = np.zeros(draws)
    if alone.size:
        used = _simulated_judgements(counts[alone], remaining[alone], batch=batch, gamma=gamma, draws=draws,
                                     rng=np.random.default_rng(seed))
        per_pair[alone] = used.mean(axis=1)
        totals += used.sum(axis=0)
    if shared.size:
        group_draws = max(draws, min(PROJECTION_ENTRIES // shared.size, SHARED_DRAWS))
        rng = np.random.default_rng([seed, 1])
        used = _simulated_judgements(unique[shared, :3], unique[shared, 3], batch=batch, gamma=gamma,
                                     draws=group_draws, rng=rng)
        means = np.zeros(len(unique))
        means[shared] = used.mean(axis=1)
        in_shared = members[group_of] > 1
        per_pair[in_shared] = means[group_of[in_shared]]
        uniform = np.full(group_draws, 1.0 / group_draws)
        for row, g in enumerate(shared):
            totals += rng.multinomial(members[g], uniform, size=draws) @ used[row]
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(totals, [tail, 100 - tail])
    return Projection(per_pair=per_pair, total=float(totals.mean()), low=float(low), high=float(high),
                      level=float(level))


def _simulated_judgements(counts: np.ndarray, remaining: np.ndarray, *, batch: int, gamma: float, draws: int,
                          rng: np.random.Generator) -> np.ndarray:
    """(P, draws) judgements each pair takes in each predictive draw (``judgements_to_finish``'s
    simulation; counts (P, 3), remaining (P,))."""
    size = len(counts)
    g = rng.standard_gamma(np.broadcast_to(counts[:, None, :] + 1.0, (size, draws, 3)))
    p = (g / g.sum(axis=-1, keepdims=True)).reshape(-1, 3)
    # Every (pair, draw) as one flat entry; each round works on the entries still running only
    # (at 1,225 pairs most draws stop within a few rounds: computing theta for all of them every
    # round took tens of seconds; docs/benchmarks.md).
    state = np.repeat(counts, draws, axis=0)
    left = np.repeat(remaining, draws)
    used = np.zeros(size * draws, dtype=np.int64)
    running = np.flatnonzero(left > 0)
    while running.size:
        step = np.minimum(batch, left[running])
        state[running] += rng.multinomial(step, p[running])
        used[running] += step
        left[running] -= step
        theta = theta_closed_form(state[running])
        decided = (theta > 1 - gamma / 2) | (theta < gamma / 2)
        running = running[~decided & (left[running] > 0)]
    return used.reshape(size, draws)
