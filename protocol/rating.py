"""Rating consistency, preference strength and (separability-weighted) Elo (docs/formulas.md §7).

A *rating set* is one rater's k preference labels on k sample pairs of one input,
r_i ∈ {+1 (first system better), 0 (tie), −1 (second better)}:

- consistency          0 if both +1 and −1 occur, else |mean(r)|      (Separability paper Eq. 4)
- preference strength  mean(r)                                         (App. D)

Elo (Separability paper §4): R' = R + K (S − E), E = 1 / (1 + 10^((R_B − R_A)/400)),
S ∈ {1, ½, 0}. The separability-weighted K (Eq. 6 was lost in extraction; docs/formulas.md §7 form):
K_δ = K (1 + α tanh(β (δ − τ))). Comparisons are processed in the order given; confidence
intervals come from bootstrap resamples, all replicates advanced at once. When several
comparisons share an item (several raters, several samples of one item), give ``clusters``
(the item of each comparison): the bootstrap then redraws whole items, because judgements of
one item are not independent and redrawing them one by one makes the interval too narrow.

:func:`clustered_spearman` is Spearman's ρ with an item-clustered permutation p-value and
bootstrap interval, for the same reason (δ belongs to an item; its raters share it).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

Comparison = tuple  # (first: str, second: str, outcome: int in {1, 0, -1}, separability: float)


def _ratings(ratings) -> np.ndarray:
    r = np.asarray(ratings, dtype=float)
    if r.ndim == 0 or r.shape[-1] == 0:
        raise ValueError(f"ratings need a last axis of k >= 1 labels, got shape {r.shape}")
    if not np.all(np.isin(r, (-1.0, 0.0, 1.0))):
        raise ValueError("ratings must be +1 (first better), 0 (tie) or -1 (second better)")
    return r


def consistency(ratings) -> np.ndarray | float:
    """Consistency of rating sets; ratings (..., k) in {+1, 0, -1} -> (...) in [0, 1]."""
    r = _ratings(ratings)
    mixed = (r == 1).any(axis=-1) & (r == -1).any(axis=-1)
    result = np.where(mixed, 0.0, np.abs(r.mean(axis=-1)))
    return float(result) if result.ndim == 0 else result


def preference_strength(ratings) -> np.ndarray | float:
    """Mean label of rating sets; ratings (..., k) -> (...) in [-1, 1] (+ favours the first)."""
    result = _ratings(ratings).mean(axis=-1)
    return float(result) if np.ndim(result) == 0 else result


def separability_k(separability, *, k: float = 4.0, tau: float = 0.5, alpha: float = 0.5, beta: float = 5.0) -> np.ndarray:
    """K_δ = K (1 + α tanh(β (δ − τ))); separability (n,) -> (n,). Equals K at δ = τ."""
    if not 0 <= alpha < 1:
        raise ValueError(f"alpha must lie in [0, 1) so that K stays positive, got {alpha}")
    if not (k > 0 and beta >= 0):
        raise ValueError(f"k must be > 0 and beta >= 0, got k={k}, beta={beta}")
    delta = np.asarray(separability, dtype=float)
    return k * (1.0 + alpha * np.tanh(beta * (delta - tau)))


@dataclass(frozen=True)
class EloRatings:
    """Elo ratings with bootstrap intervals; arrays have shape (s,) over ``systems``."""

    systems: tuple[str, ...]
    rating: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    bootstrap: int

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            s: {"rating": float(self.rating[i]), "lower": float(self.lower[i]), "upper": float(self.upper[i])}
            for i, s in enumerate(self.systems)
        }


def _parse(comparisons: Iterable[Sequence]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rows = list(comparisons)
    first_names, second_names, outcomes, deltas = [], [], [], []
    for n, row in enumerate(rows):
        if len(row) != 4:
            raise ValueError(f"comparison {n} must be (first, second, outcome, separability), got {row!r}")
        first, second, outcome, delta = row
        if first == second:
            raise ValueError(f"comparison {n} compares system {first!r} with itself")
        if outcome not in (1, 0, -1) or isinstance(outcome, bool):
            raise ValueError(f"comparison {n}: outcome must be +1, 0 or -1, got {outcome!r}")
        if delta is None or not np.isfinite(float(delta)):
            raise ValueError(f"comparison {n}: separability must be a finite number, got {delta!r}")
        first_names.append(str(first)); second_names.append(str(second))
        outcomes.append(outcome); deltas.append(float(delta))
    systems = tuple(sorted(set(first_names) | set(second_names)))
    index = {s: i for i, s in enumerate(systems)}
    return (
        systems,
        np.array([index[s] for s in first_names], dtype=int),
        np.array([index[s] for s in second_names], dtype=int),
        (np.array(outcomes, dtype=float) + 1.0) / 2.0,  # S of the first system: 1, 1/2, 0
        np.array(deltas),
    )


def _run_elo(first: np.ndarray, second: np.ndarray, score: np.ndarray, k: np.ndarray,
             systems: int, initial: float, scale: float) -> np.ndarray:
    """Sequential Elo for R replicates at once: first/second/score/k (R, n) -> ratings (R, s)."""
    replicates = first.shape[0]
    ratings = np.full((replicates, systems), float(initial))
    rows = np.arange(replicates)
    for t in range(first.shape[1]):
        a, b = first[:, t], second[:, t]
        expected = 1.0 / (1.0 + 10.0 ** ((ratings[rows, b] - ratings[rows, a]) / scale))
        change = k[:, t] * (score[:, t] - expected)
        ratings[rows, a] += change
        ratings[rows, b] -= change
    return ratings


def _cluster_index(clusters, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Cluster number of each of n entries, and the entries of each cluster (first-seen order)."""
    labels = list(clusters)
    if len(labels) != n:
        raise ValueError(f"clusters must give one cluster per comparison: {len(labels)} for {n}")
    number: dict = {}
    index = np.array([number.setdefault(label, len(number)) for label in labels], dtype=int)
    members = [np.flatnonzero(index == c) for c in range(len(number))]
    return index, members


def _clustered_draws(members: list[np.ndarray], replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(R, n) indices: each row redraws len(members) clusters with replacement and takes all
    entries of each, in a random order; rows shorter than the longest are padded with -1."""
    rows = []
    for _ in range(replicates):
        picked = rng.integers(0, len(members), size=len(members))
        row = np.concatenate([members[c] for c in picked])
        rows.append(rng.permutation(row))
    width = max(len(row) for row in rows)
    out = np.full((replicates, width), -1, dtype=int)
    for r, row in enumerate(rows):
        out[r, :len(row)] = row
    return out


def _elo(
    comparisons: Iterable[Sequence],
    k_of_delta,
    *,
    initial: float = 1000.0,
    scale: float = 400.0,
    bootstrap: int = 1000,
    level: float = 0.95,
    seed: int | None = 0,
    clusters: Sequence | None = None,
) -> EloRatings:
    """Elo ratings whose step of each comparison is ``k_of_delta(δ)`` (δ: (n,) -> (n,)); the
    options of :func:`elo` and :func:`separability_elo`, with their defaults."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    comparisons = list(comparisons)
    systems, first, second, score, delta = _parse(comparisons)
    if not systems:
        raise ValueError("no comparisons")
    members = _cluster_index(clusters, len(first))[1] if clusters is not None else None
    k = k_of_delta(delta)
    point = _run_elo(first[None], second[None], score[None], k[None], len(systems), initial, scale)[0]
    if bootstrap == 0:
        return EloRatings(systems, point, point.copy(), point.copy(), level, 0)
    rng = np.random.default_rng(seed)
    if members is None:
        draw = rng.integers(0, len(first), size=(bootstrap, len(first)))
        step_k = k[draw]
    else:
        draw = _clustered_draws(members, bootstrap, rng)
        step_k = np.where(draw >= 0, k[draw], 0.0)      # padding: K = 0 changes nothing
        draw = np.maximum(draw, 0)
    replicates = _run_elo(first[draw], second[draw], score[draw], step_k, len(systems), initial, scale)
    tail = (1.0 - level) / 2.0
    lower, upper = np.quantile(replicates, [tail, 1.0 - tail], axis=0)
    return EloRatings(systems, point, lower, upper, level, bootstrap)


def elo(comparisons: Iterable[Sequence], *, k: float = 4.0, **options) -> EloRatings:
    """Elo ratings over (first, second, outcome, separability) comparisons (δ unused here).

    outcome +1 = first won, 0 = tie, -1 = second won. ``options``: ``initial`` (1000),
    ``scale`` (400), ``bootstrap`` (1000) resamples of the comparisons (with replacement, in
    resampled order) give the ``level`` (0.95) interval, ``seed`` (0); ``clusters`` (n,), the
    item of each comparison: resample whole items instead.
    """
    if not k > 0:
        raise ValueError(f"k must be > 0, got {k}")
    return _elo(comparisons, lambda delta: np.full(len(delta), float(k)), **options)


def separability_elo(
    comparisons: Iterable[Sequence],
    *,
    k: float = 4.0,
    tau: float = 0.5,
    alpha: float = 0.5,
    beta: float = 5.0,
    **options,
) -> EloRatings:
    """Elo with K_δ = K (1 + α tanh(β (δ − τ))) per comparison (see :func:`separability_k`);
    ``options`` (initial, scale, bootstrap, level, seed, clusters) as for :func:`elo`."""
    separability_k(0.0, k=k, tau=tau, alpha=alpha, beta=beta)  # validate before the work
    return _elo(comparisons, lambda delta: separability_k(delta, k=k, tau=tau, alpha=alpha, beta=beta),
                **options)


@dataclass(frozen=True)
class ClusteredSpearman:
    """Spearman's ρ of n observations grouped in clusters (items).

    p: two-sided permutation p-value that permutes x between clusters (x must be constant
    within a cluster, as an item's δ is), (1 + #{|ρ*| >= |ρ|}) / (1 + permutations);
    lower/upper: percentile interval of ρ over bootstrap redraws of whole clusters.
    """

    n: int
    clusters: int
    rho: float
    p: float
    lower: float
    upper: float
    permutations: int
    bootstrap: int


def _spearman_rows(x_ranks_source: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ of every row of x (R, n) with y (n,); ties get average ranks."""
    from scipy.stats import rankdata

    rx = rankdata(x_ranks_source, axis=1)
    ry = rankdata(y)
    rx = rx - rx.mean(axis=1, keepdims=True)
    ry = ry - ry.mean()
    denominator = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, rx @ ry / denominator, np.nan)


def clustered_spearman(x, y, clusters, *, permutations: int = 2000, bootstrap: int = 1000,
                       level: float = 0.95, seed: int | None = 0) -> ClusteredSpearman:
    """Spearman's ρ between x and y (n,) with item-clustered inference (module docstring).

    x: (n,) a property of the cluster (equal within a cluster), y: (n,) per observation,
    clusters: (n,) cluster ids. Observations that share a cluster are not independent, so
    the p-value permutes x between clusters and the interval redraws whole clusters: adding
    copies of a cluster's observations does not make either look more certain.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be (n,) arrays of one length, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and y must be finite")
    if permutations < 0 or bootstrap < 0:
        raise ValueError("permutations and bootstrap must be >= 0")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    index, members = _cluster_index(clusters, len(x))
    cluster_x = np.array([x[rows[0]] for rows in members])
    if not np.allclose(x, cluster_x[index]):
        raise ValueError("x must be constant within each cluster (it is permuted between clusters)")
    rho = float(_spearman_rows(x[None], y)[0])
    rng = np.random.default_rng(seed)
    p = float("nan")
    if permutations:
        shuffled = np.stack([rng.permutation(cluster_x) for _ in range(permutations)])   # (R, clusters)
        null = _spearman_rows(shuffled[:, index], y)
        p = float((1 + np.sum(np.abs(null) >= abs(rho) - 1e-12)) / (1 + permutations))
    lower = upper = float("nan")
    if bootstrap:
        values = []
        for _ in range(bootstrap):
            rows = np.concatenate([members[c] for c in rng.integers(0, len(members), size=len(members))])
            values.append(_spearman_rows(x[rows][None], y[rows])[0])
        tail = (1 - level) / 2
        lower, upper = (float(v) for v in np.nanquantile(values, [tail, 1 - tail]))
    return ClusteredSpearman(len(x), len(members), rho, p, lower, upper, permutations, bootstrap)
