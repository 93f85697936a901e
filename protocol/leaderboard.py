"""A leaderboard of systems from pairwise human judgements: Bradley–Terry with bootstrap
intervals, and the natural order of system names.

Bradley–Terry: P(i beats j) = 1 / (1 + exp(s_j - s_i)); the scores s (log-strengths, mean 0
over the fitted systems) are the maximum-likelihood fit by choix's iterative Luce spectral
ranking (``choix.ilsr_pairwise_dense``). A tie counts as half a win for each side. A prior of
``prior_ties`` tied pseudo-comparisons between every two systems keeps the scores finite when a
system wins all its comparisons and links systems never compared directly; unlike choix's
own ``alpha`` it treats both sides alike, so reversing every judgement exactly negates the
scores. With ``prior_ties=0`` the fit is the plain MLE, which exists only when the
comparison graph is strongly connected.

Intervals: nonparametric bootstrap over judgements (each replicate redraws the n judgements
with replacement, i.e. a multinomial over the distinct (first, second, value) outcomes),
percentile intervals of the score and of the rank (1 = best).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from natsort import natsort_keygen

DEFAULT_PRIOR_TIES = 0.5
DEFAULT_REPLICATES = 200


_NATURAL = natsort_keygen()


def natural_key(name: str):
    """Sort key of a system name in natural order (digits compare as numbers)."""
    return _NATURAL(name)


def natural_sorted(names: Sequence[str]) -> tuple[str, ...]:
    """System names in natural order: M0, M1, M2, ..., M10 (digits compare as numbers).

    >>> natural_sorted(["M10", "M2", "M1"])
    ('M1', 'M2', 'M10')
    """
    return tuple(sorted(names, key=_NATURAL))


@dataclass(frozen=True)
class Leaderboard:
    """Bradley–Terry fit of S systems (arrays are in the order of ``systems`` as given).

    score         (S,) log-strength, mean 0 over systems with judgements; NaN without any
    score_low/high (S,) bootstrap percentile interval of the score (NaN without judgements)
    rank          (S,) 1 = best by score; systems without judgements rank last (tied)
    rank_low/high (S,) bootstrap percentile interval of the rank
    wins, ties, losses (S,) judgements won, tied and lost by each system
    order         (S,) indices of ``systems`` best first (unjudged last, in given order)
    """

    systems: tuple[str, ...]
    score: np.ndarray
    score_low: np.ndarray
    score_high: np.ndarray
    rank: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    wins: np.ndarray
    ties: np.ndarray
    losses: np.ndarray
    order: np.ndarray
    replicates: int
    level: float


def win_matrix(size: int, first, second, values, weights=None) -> np.ndarray:
    """(size, size) W[i, j] = times i beat j, a tie adding 1/2 to both W[i, j] and W[j, i].

    first, second: (n,) system indices; values: (n,) in {+1 (first better), 0, -1};
    weights: (n,) multiplicity of each judgement (default 1).

    >>> win_matrix(3, first=[0, 0, 1], second=[1, 2, 2], values=[1, 1, 0]).tolist()
    [[0.0, 1.0, 1.0], [0.0, 0.0, 0.5], [0.0, 0.5, 0.0]]
    """
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    values = np.asarray(values)
    weights = np.ones(len(values)) if weights is None else np.asarray(weights, dtype=float)
    win = np.where(values > 0, 1.0, np.where(values == 0, 0.5, 0.0)) * weights
    loss = np.where(values < 0, 1.0, np.where(values == 0, 0.5, 0.0)) * weights
    matrix = np.zeros((size, size))
    np.add.at(matrix, (first, second), win)
    np.add.at(matrix, (second, first), loss)
    return matrix


def fit_scores(wins: np.ndarray, *, prior_ties: float = DEFAULT_PRIOR_TIES,
               start: np.ndarray | None = None) -> np.ndarray:
    """(S,) Bradley–Terry log-strengths (mean 0) from a (S, S) win matrix (see ``win_matrix``)
    plus ``prior_ties`` tied pseudo-comparisons between every two systems.

    ``start``: (S,) log-strengths to start choix's iterations from (None: its own start), e.g.
    the fit of the same systems before the last labels came in: the solution is the same (the
    likelihood has one maximum; to the iterations' tolerance), reached in fewer iterations.

    System 0 beat both others once, 1 and 2 tied: 0 first, 1 and 2 level.

    >>> fit_scores(win_matrix(3, [0, 0, 1], [1, 2, 2], [1, 1, 0])).round(2).tolist()
    [1.07, -0.54, -0.54]
    """
    import choix

    wins = np.asarray(wins, dtype=float)
    if wins.ndim != 2 or wins.shape[0] != wins.shape[1]:
        raise ValueError(f"the win matrix must be square, got shape {wins.shape}")
    if prior_ties < 0:
        raise ValueError(f"prior_ties must not be negative, got {prior_ties}")
    if len(wins) == 1:
        return np.zeros(1)
    wins = wins + (prior_ties / 2) * (1 - np.eye(len(wins)))
    if start is not None and np.shape(start) != (len(wins),):
        raise ValueError(f"start must be ({len(wins)},) log-strengths, got shape {np.shape(start)}")
    scores = choix.ilsr_pairwise_dense(wins, alpha=0.0, initial_params=None if start is None else np.asarray(start, dtype=float),
                                       max_iter=1000, tol=1e-10)
    return scores - scores.mean()


def _ranks(scores: np.ndarray) -> np.ndarray:
    """(..., S) -> (..., S) rank of every system, 1 = best; equal scores share the best rank."""
    return (scores[..., None, :] > scores[..., :, None]).sum(axis=-1) + 1


def bradley_terry(
    systems: Sequence[str],
    first,
    second,
    values,
    *,
    replicates: int = DEFAULT_REPLICATES,
    level: float = 0.95,
    prior_ties: float = DEFAULT_PRIOR_TIES,
    seed: int = 0,
) -> Leaderboard:
    """Leaderboard of ``systems`` from n judgements.

    first, second: (n,) indices into ``systems``; values: (n,) in {+1, 0, -1} (+1 = first
    better). Systems without any judgement get NaN scores and share the last rank.
    """
    systems = tuple(systems)
    size = len(systems)
    first = np.asarray(first, dtype=np.int64).reshape(-1)
    second = np.asarray(second, dtype=np.int64).reshape(-1)
    values = np.asarray(values).reshape(-1)
    if not (len(first) == len(second) == len(values)):
        raise ValueError(f"first, second and values differ in length: {len(first)}, {len(second)}, {len(values)}")
    if len(values) and (first.min() < 0 or second.min() < 0 or max(first.max(), second.max()) >= size):
        raise ValueError(f"system indices must lie in [0, {size})")
    if np.any(first == second):
        raise ValueError("a judgement compares a system with itself")
    if not np.all(np.isin(values, (-1, 0, 1))):
        raise ValueError("judgement values must be -1, 0 or 1")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if replicates < 1:
        raise ValueError(f"replicates must be at least 1, got {replicates}")

    wins_total = win_matrix(size, first, second, values)
    win_count = np.zeros(size, dtype=np.int64)
    tie_count = np.zeros(size, dtype=np.int64)
    loss_count = np.zeros(size, dtype=np.int64)
    np.add.at(win_count, first[values > 0], 1)
    np.add.at(win_count, second[values < 0], 1)
    np.add.at(loss_count, first[values < 0], 1)
    np.add.at(loss_count, second[values > 0], 1)
    np.add.at(tie_count, first[values == 0], 1)
    np.add.at(tie_count, second[values == 0], 1)
    judged = np.flatnonzero(win_count + tie_count + loss_count)

    score = np.full(size, np.nan)
    low = np.full(size, np.nan)
    high = np.full(size, np.nan)
    rank = np.full(size, len(judged) + 1, dtype=np.int64)
    rank_low = rank.copy()
    rank_high = rank.copy()
    if len(judged):
        sub = np.ix_(judged, judged)
        score[judged] = fit_scores(wins_total[sub], prior_ties=prior_ties)
        rank[judged] = _ranks(score[judged])
        # Bootstrap: a multinomial over the distinct outcomes is the same as redrawing the
        # judgements one by one, and costs O(outcomes) instead of O(n) per replicate.
        outcomes, counts = np.unique(np.stack([first, second, values.astype(np.int64)]), axis=1, return_counts=True)
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(len(values), counts / counts.sum(), size=replicates)
        boot = np.empty((replicates, len(judged)))
        for r in range(replicates):
            boot[r] = fit_scores(win_matrix(size, *outcomes, weights=draws[r])[sub], prior_ties=prior_ties)
        tail = 100 * (1 - level) / 2
        low[judged], high[judged] = np.percentile(boot, [tail, 100 - tail], axis=0)
        boot_ranks = _ranks(boot)
        rank_low[judged] = np.floor(np.percentile(boot_ranks, tail, axis=0)).astype(np.int64)
        rank_high[judged] = np.ceil(np.percentile(boot_ranks, 100 - tail, axis=0)).astype(np.int64)
    order = np.array(sorted(range(size), key=lambda i: (np.isnan(score[i]), -np.nan_to_num(score[i]), i)),
                     dtype=np.int64)
    return Leaderboard(systems=systems, score=score, score_low=low, score_high=high, rank=rank,
                       rank_low=rank_low, rank_high=rank_high, wins=win_count, ties=tie_count,
                       losses=loss_count, order=order, replicates=int(replicates), level=float(level))
