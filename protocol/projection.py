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
    rng = np.random.default_rng(seed)
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
    used = used.reshape(size, draws)
    totals = used.sum(axis=0)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(totals, [tail, 100 - tail])
    return Projection(per_pair=used.mean(axis=1), total=float(totals.mean()), low=float(low), high=float(high),
                      level=float(level))
