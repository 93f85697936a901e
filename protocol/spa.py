"""Soft Pairwise Accuracy (SPA) and Pairwise Accuracy (PA) between human and metric scores.

docs/formulas.md §6, SPA paper §2–3. For every pair of systems (i, j) a paired
permutation test gives P[i, j], the p-value of "i is better than j": the fraction of random
sign flips s of the per-segment differences with s·(x_i - x_j) >= sum(x_i - x_j). Small
P[i, j] means i is better, large means j is better, 0.5 means indistinguishable.

    SPA = 1 - mean_{i<j} |P_h[i, j] - P_m[i, j]|
    PA  = mean_{i<j} a_ij,  a_ij = 1 iff sign(sum(h_i - h_j)) == sign(sum(m_i - m_j))

PA is the paper's Eq. 2 (Kocmi et al. 2021): sign agreement of the human and the metric
totals, deterministic. Its Eq. 3 form 1 - |round(P_h) - round(P_m)| equals it only when the
p-values are exact and no total is 0 or near it; from Monte-Carlo p-values it depends on the
seed (a pair whose exact p-value is 0.5 rounds either way), so it is kept only as
``pairwise_accuracy`` for comparison. A total within rounding of 0 is a tie, which agrees
only with a tie.

One (permutations x segments) matrix of random signs is drawn once (seeded) and shared by
every pair and by both the human and the metric scores. Sharing it across pairs makes the
cost linear in the number of systems: the signed sums S @ x_i are computed once per system
and a pair only subtracts two of them (the paper's §3.3 speed-up). Sharing it between human
and metric makes SPA of a metric against itself exactly 1.

Preference data (no per-system scores, e.g. PandaLM verdicts): for a pair the per-item
"difference" x_first - x_second is the preference value itself (+1/0/-1; several human
annotators of one item are averaged to one value in [-1, 1]), and the same permutation
test runs on those differences (:func:`p_values_from_differences`). SPA and PA are then
averages over the pairs that have labels, each pair on its own items.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_PERMUTATIONS = 1000
# Relative slack for ">=" between a permuted sum and the observed sum: the all-(+1) sign
# vector reproduces the observed sum but along a different rounding path.
_RELATIVE_TOLERANCE = 1e-9
_RESAMPLE_BLOCK = 16


def sign_matrix(permutations: int, segments: int, seed: int | None = 0) -> np.ndarray:
    """Random +-1 signs, float64 of shape (permutations, segments), reproducible by seed."""
    if int(permutations) != permutations or permutations < 1:
        raise ValueError(f"permutations must be a positive integer, got {permutations!r}")
    if int(segments) != segments or segments < 1:
        raise ValueError(f"segments must be a positive integer, got {segments!r}")
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, size=(int(permutations), int(segments)), dtype=np.int8)
    return (2.0 * bits - 1.0).astype(np.float64)


def _score_matrix(scores, name: str) -> np.ndarray:
    array = np.asarray(scores, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"{name} scores must be a 2-D (systems, segments) array, got shape {array.shape}")
    if array.shape[0] < 2:
        raise ValueError(f"{name} scores need at least 2 systems, got {array.shape[0]}")
    if array.shape[1] < 1:
        raise ValueError(f"{name} scores need at least 1 segment")
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(
            f"{name} scores contain NaN or infinite values (first at system {bad[0]}, segment {bad[1]})"
        )
    return array


def _signs_for(signs, permutations: int, segments: int, seed) -> np.ndarray:
    if signs is None:
        return sign_matrix(permutations, segments, seed)
    signs = np.asarray(signs, dtype=float)
    if signs.ndim != 2 or signs.shape[1] < segments:
        raise ValueError(
            f"sign matrix must have shape (permutations, >= {segments} segments), got {signs.shape}"
        )
    if not np.all(np.abs(signs) == 1):
        raise ValueError("sign matrix entries must be +1 or -1")
    return signs[:, :segments]


def _tolerance(values: np.ndarray) -> float:
    return _RELATIVE_TOLERANCE * max(1.0, float(np.abs(values).sum(axis=-1).max(initial=0.0)))


def pairwise_p_values(
    scores, permutations: int = DEFAULT_PERMUTATIONS, seed: int | None = 0, signs=None
) -> np.ndarray:
    """Paired permutation p-values for all system pairs.

    scores: (S systems, L segments), finite. signs: optional shared (permutations, >= L)
    +-1 matrix (otherwise drawn from ``seed``). Returns (S, S) float: P[i, j] = p-value of
    "system i better than system j" for i != j, NaN on the diagonal.
    """
    scores = _score_matrix(scores, "the")
    n_systems, n_segments = scores.shape
    signs = _signs_for(signs, permutations, n_segments, seed)
    signed_sums = signs @ scores.T  # (permutations, S)
    totals = scores.sum(axis=1)  # (S,)
    tolerance = _tolerance(scores)
    p_values = np.full((n_systems, n_systems), np.nan)
    # One row at a time keeps memory at permutations x S, whatever the number of systems.
    for i in range(n_systems):
        null = signed_sums[:, i : i + 1] - signed_sums  # (permutations, S)
        observed = totals[i] - totals
        p_values[i] = np.mean(null >= observed - tolerance, axis=0)
    np.fill_diagonal(p_values, np.nan)
    return p_values


def p_values_from_differences(
    differences, mask=None, permutations: int = DEFAULT_PERMUTATIONS, seed: int | None = 0, signs=None
) -> np.ndarray:
    """Paired permutation p-values from per-item differences, vectorised over pairs.

    differences: (P pairs, L items) values x_first - x_second (for preference data the
    preference values); mask: optional (P, L) bool, False marks padding. Returns (P,)
    p-values of "first better than second". A pair without items gets p = 1 (the identity
    flip always reaches the observed sum 0), i.e. the same as an all-tie pair.
    """
    differences = np.asarray(differences, dtype=float)
    if differences.ndim != 2:
        raise ValueError(f"differences must be a 2-D (pairs, items) array, got shape {differences.shape}")
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != differences.shape:
            raise ValueError(f"mask shape {mask.shape} differs from differences shape {differences.shape}")
        differences = np.where(mask, differences, 0.0)
    if not np.all(np.isfinite(differences)):
        raise ValueError("differences contain NaN or infinite values")
    n_items = max(differences.shape[1], 1)
    signs = _signs_for(signs, permutations, n_items, seed)[:, : differences.shape[1]]
    null = signs @ differences.T  # (permutations, P)
    observed = differences.sum(axis=1)
    return np.mean(null >= observed - _tolerance(differences), axis=0)


def _upper(matrix: np.ndarray) -> np.ndarray:
    return matrix[np.triu_indices(matrix.shape[0], 1)]


def _paired_p_values(human_p, metric_p) -> tuple[np.ndarray, np.ndarray]:
    human_p = np.asarray(human_p, dtype=float)
    metric_p = np.asarray(metric_p, dtype=float)
    if human_p.shape != metric_p.shape:
        raise ValueError(f"p-value arrays differ in shape: {human_p.shape} vs {metric_p.shape}")
    if human_p.ndim == 2:
        if human_p.shape[0] != human_p.shape[1]:
            raise ValueError(f"p-value matrices must be square, got {human_p.shape}")
        human_p, metric_p = _upper(human_p), _upper(metric_p)
    elif human_p.ndim != 1:
        raise ValueError("p-values must be a (P,) vector over pairs or an (S, S) matrix")
    if human_p.size == 0:
        raise ValueError("no system pairs to compare")
    for name, p in (("human", human_p), ("metric", metric_p)):
        if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
            raise ValueError(f"{name} p-values must lie in [0, 1] and be finite")
    return human_p, metric_p


def soft_pairwise_accuracy(human_p, metric_p) -> float:
    """SPA = 1 - mean |P_h - P_m| over pairs (vectors (P,) or upper triangles of (S, S)).

    >>> round(soft_pairwise_accuracy([0.01, 0.2, 0.9], [0.02, 0.5, 0.8]), 4)
    0.8633
    """
    human_p, metric_p = _paired_p_values(human_p, metric_p)
    return float(1.0 - np.mean(np.abs(human_p - metric_p)))


def pairwise_accuracy_from_totals(human_totals, metric_totals, human_tolerance: float = 0.0,
                                  metric_tolerance: float = 0.0) -> float:
    """PA by the paper's Eq. 2: the fraction of pairs whose totals agree in sign.

    human_totals, metric_totals: (P,) sums of x_first - x_second; |total| <= tolerance is a
    tie (sign 0).

    >>> round(pairwise_accuracy_from_totals([3.0, -1.0, 0.5], [2.0, 1.0, 0.2]), 4)
    0.6667
    """
    human = np.asarray(human_totals, dtype=float)
    metric = np.asarray(metric_totals, dtype=float)
    if human.shape != metric.shape or human.ndim != 1:
        raise ValueError(f"totals must be two (P,) vectors, got {human.shape} and {metric.shape}")
    if human.size == 0:
        raise ValueError("no system pairs to compare")
    if not (np.all(np.isfinite(human)) and np.all(np.isfinite(metric))):
        raise ValueError("totals must be finite")

    def sign(total, tolerance):
        return np.where(np.abs(total) <= tolerance, 0, np.sign(total))

    return float(np.mean(sign(human, human_tolerance) == sign(metric, metric_tolerance)))


def pairwise_accuracy(human_p, metric_p) -> float:
    """PA from quantised p-values (the paper's Eq. 3), round(p) = 1 iff p >= 0.5.

    Seed-dependent with Monte-Carlo p-values; SpaResult.pa uses Eq. 2 instead.
    """
    human_p, metric_p = _paired_p_values(human_p, metric_p)
    return float(1.0 - np.mean(np.abs((human_p >= 0.5).astype(float) - (metric_p >= 0.5))))


@dataclass(frozen=True)
class SpaResult:
    """SPA and PA of a metric against humans.

    pairs: (P,) (first index/name, second) in the order of the p-value vectors.
    human_p, metric_p: (P,) p-values of "first better than second".
    pa: Eq. 2, sign agreement of the totals (deterministic); pa_quantised: Eq. 3 from the
    Monte-Carlo p-values, for comparison.
    """

    spa: float
    pa: float
    pairs: tuple[tuple, ...]
    human_p: np.ndarray
    metric_p: np.ndarray
    permutations: int
    seed: int | None
    pa_quantised: float = float("nan")


def compare_scores(
    human_scores,
    metric_scores,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = 0,
    systems: Sequence[str] | None = None,
) -> SpaResult:
    """SPA and PA between two (systems, segments) score matrices with one shared sign matrix.

    Both matrices must have the same shape and be finite. ``systems`` names the rows
    (default: row indices) in the returned pairs.
    """
    human = _score_matrix(human_scores, "human")
    metric = _score_matrix(metric_scores, "metric")
    if human.shape[0] != metric.shape[0]:
        raise ValueError(f"human scores have {human.shape[0]} systems, metric scores {metric.shape[0]}")
    if human.shape[1] != metric.shape[1]:
        raise ValueError(
            f"segment counts differ: human scores have {human.shape[1]}, metric scores {metric.shape[1]}"
        )
    names = tuple(range(human.shape[0])) if systems is None else tuple(systems)
    if len(names) != human.shape[0]:
        raise ValueError(f"{len(names)} system names for {human.shape[0]} score rows")
    signs = sign_matrix(permutations, human.shape[1], seed)
    human_p = _upper(pairwise_p_values(human, signs=signs))
    metric_p = _upper(pairwise_p_values(metric, signs=signs))
    rows, cols = np.triu_indices(human.shape[0], 1)
    human_totals, metric_totals = human.sum(axis=1), metric.sum(axis=1)
    return SpaResult(
        spa=soft_pairwise_accuracy(human_p, metric_p),
        pa=pairwise_accuracy_from_totals(human_totals[rows] - human_totals[cols],
                                         metric_totals[rows] - metric_totals[cols],
                                         _tolerance(human), _tolerance(metric)),
        pairs=tuple((names[i], names[j]) for i, j in zip(rows, cols)),
        human_p=human_p,
        metric_p=metric_p,
        permutations=int(permutations),
        seed=seed,
        pa_quantised=pairwise_accuracy(human_p, metric_p),
    )


def _pad(rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    width = max((len(r) for r in rows), default=0)
    values = np.zeros((len(rows), width))
    mask = np.zeros((len(rows), width), dtype=bool)
    for k, row in enumerate(rows):
        values[k, : len(row)] = row
        mask[k, : len(row)] = True
    return values, mask


def compare_differences(
    pairs: Sequence[tuple],
    human_differences: Sequence,
    metric_differences: Sequence,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = 0,
) -> SpaResult:
    """SPA and PA from per-pair, per-item differences (preference data).

    human_differences[k], metric_differences[k]: (L_k,) values for pair k on the same items
    in the same order. One sign matrix (permutations x max L_k) is shared by all pairs.
    """
    if not (len(pairs) == len(human_differences) == len(metric_differences)):
        raise ValueError("pairs, human_differences and metric_differences must have the same length")
    if not pairs:
        raise ValueError("no system pairs to compare")
    human_rows, metric_rows = [], []
    for pair, h, m in zip(pairs, human_differences, metric_differences):
        h = np.asarray(h, dtype=float)
        m = np.asarray(m, dtype=float)
        if h.ndim != 1 or m.ndim != 1:
            raise ValueError(f"pair {pair}: differences must be 1-D per pair")
        if h.shape != m.shape:
            raise ValueError(f"pair {pair}: {h.size} human items but {m.size} metric items")
        if not (np.all(np.isfinite(h)) and np.all(np.isfinite(m))):
            raise ValueError(f"pair {pair}: differences contain NaN or infinite values")
        human_rows.append(h)
        metric_rows.append(m)
    human_values, mask = _pad(human_rows)
    metric_values, _ = _pad(metric_rows)
    signs = sign_matrix(permutations, max(human_values.shape[1], 1), seed)
    human_p = p_values_from_differences(human_values, mask, signs=signs)
    metric_p = p_values_from_differences(metric_values, mask, signs=signs)
    return SpaResult(
        spa=soft_pairwise_accuracy(human_p, metric_p),
        pa=pairwise_accuracy_from_totals(human_values.sum(axis=1), metric_values.sum(axis=1),
                                         _tolerance(human_values), _tolerance(metric_values)),
        pairs=tuple(tuple(p) for p in pairs),
        human_p=human_p,
        metric_p=metric_p,
        permutations=int(permutations),
        seed=seed,
        pa_quantised=pairwise_accuracy(human_p, metric_p),
    )


@dataclass(frozen=True)
class SpaInterval:
    """Bootstrap uncertainty of SPA and PA: ``spa``/``pa`` (low, high) = estimate ± z · standard
    error, clipped to [0, 1], at ``level``; ``replicate_spa`` (replicates,) the SPA of every
    replicate (same seed and item counts = same redraws, so two metrics on the same items can
    be compared replicate by replicate)."""

    spa: tuple[float, float]
    pa: tuple[float, float]
    spa_se: float
    pa_se: float
    replicates: int
    level: float
    replicate_spa: np.ndarray


def bootstrap_interval(
    pairs: Sequence[tuple],
    human_differences: Sequence,
    metric_differences: Sequence,
    *,
    replicates: int = 50,
    level: float = 0.95,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = 0,
) -> SpaInterval:
    """Uncertainty of :func:`compare_differences` from the items: every replicate redraws
    each pair's items with replacement (human and metric values of an item stay together)
    and recomputes SPA and PA. Same inputs as compare_differences; seeded by ``seed``.

    The interval is the normal one around the estimate, not the percentile one: redrawing
    items duplicates some, which makes the permutation p-values more extreme and shifts the
    replicates' SPA away from the estimate (percentile intervals then miss the estimate).
    """
    from scipy.stats import norm

    if replicates < 2:
        raise ValueError(f"replicates must be at least 2, got {replicates}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    point = compare_differences(pairs, human_differences, metric_differences, permutations=permutations, seed=seed)
    human_rows = [np.asarray(h, dtype=float) for h in human_differences]
    metric_rows = [np.asarray(m, dtype=float) for m in metric_differences]
    rng = np.random.default_rng(seed)
    spas, pas = [], []
    for r in range(replicates):
        picks = [rng.integers(0, len(h), size=len(h)) for h in human_rows]
        result = compare_differences(pairs, [h[k] for h, k in zip(human_rows, picks)],
                                     [m[k] for m, k in zip(metric_rows, picks)],
                                     permutations=permutations, seed=None if seed is None else seed + 1 + r)
        spas.append(result.spa)
        pas.append(result.pa)
    z = float(norm.ppf(0.5 + level / 2))
    spa_se, pa_se = float(np.std(spas, ddof=1)), float(np.std(pas, ddof=1))

    def around(value: float, se: float) -> tuple[float, float]:
        return float(max(value - z * se, 0.0)), float(min(value + z * se, 1.0))

    return SpaInterval(spa=around(point.spa, spa_se), pa=around(point.pa, pa_se), spa_se=spa_se, pa_se=pa_se,
                       replicates=int(replicates), level=float(level), replicate_spa=np.asarray(spas))


# --------------------------------------------------------------------------------------
# Comparing several metrics: significance of SPA differences and greedy clusters (§4.4).


def _standardise(scores: np.ndarray) -> np.ndarray:
    # p-values are invariant to a positive affine map of one metric's scores, so metrics
    # on different scales can be mixed segment by segment after standardising.
    spread = scores.std()
    return (scores - scores.mean()) / (spread if spread > 0 else 1.0)


def _spa_against(human_p_upper: np.ndarray, signed_sums: np.ndarray, totals: np.ndarray, tolerance: float):
    """SPA of metrics given their signed sums (R, permutations, S) and totals (R, S) -> (R,)."""
    n_systems = totals.shape[-1]
    metric_p = []
    for i in range(n_systems - 1):  # pairs (i, j > i), in np.triu_indices order
        null = signed_sums[..., i : i + 1] - signed_sums[..., i + 1 :]  # (R, permutations, S-i-1)
        observed = totals[:, i : i + 1] - totals[:, i + 1 :]  # (R, S-i-1)
        metric_p.append(np.mean(null >= observed[:, None, :] - tolerance, axis=1))
    metric_p = np.concatenate(metric_p, axis=-1)  # (R, P)
    return 1.0 - np.mean(np.abs(metric_p - human_p_upper), axis=-1)


@dataclass(frozen=True)
class MetricRanking:
    """Metrics ordered by SPA (best first) with significance clusters.

    p_values[a, b] (a < b): p-value of "metric b is as good as metric a" by PERM-INPUTS
    (segments' scores swapped between the two metrics at random); NaN elsewhere.
    ranks: cluster rank per metric (1 = best), greedy as in the WMT shared tasks.
    """

    metrics: tuple[str, ...]
    spa: tuple[float, ...]
    p_values: np.ndarray
    ranks: tuple[int, ...]


def significance_clusters(p_values, alpha: float = 0.05) -> tuple[int, ...]:
    """Greedy significance clusters (SPA paper §4.4).

    p_values: (M, M), metrics sorted best first; p_values[a, b] (a < b) is the p-value of
    "metric b is as good as metric a". Walking down the list, a metric opens a new rank as
    soon as it is significantly worse (p <= alpha) than any metric of the current rank.
    """
    p_values = np.asarray(p_values, dtype=float)
    if p_values.ndim != 2 or p_values.shape[0] != p_values.shape[1]:
        raise ValueError(f"p_values must be a square (M, M) matrix, got shape {p_values.shape}")
    ranks, current, start = [], 1, 0
    for b in range(p_values.shape[0]):
        column = p_values[start:b, b]
        if np.any(np.isnan(column)):
            raise ValueError("p_values must be filled above the diagonal")
        if np.any(column <= alpha):
            current += 1
            start = b
        ranks.append(current)
    return tuple(ranks)


def rank_metrics(
    human_scores,
    metric_scores: Mapping[str, object],
    resamples: int = 200,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = 0,
    alpha: float = 0.05,
) -> MetricRanking:
    """Rank several metrics by SPA against the same human scores, with significance clusters.

    human_scores: (S, L); metric_scores: name -> (S, L) on the same systems and segments.
    Each pair of metrics is compared by ``resamples`` PERM-INPUTS resamples; all use one
    shared sign matrix, so the cost is resamples x permutations x L x S per metric pair.
    """
    human = _score_matrix(human_scores, "human")
    if len(metric_scores) < 2:
        raise ValueError("rank_metrics needs at least two metrics")
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    standardised = {}
    for name, scores in metric_scores.items():
        scores = _score_matrix(scores, f"metric {name!r}")
        if scores.shape != human.shape:
            raise ValueError(f"metric {name!r} scores have shape {scores.shape}, human scores {human.shape}")
        standardised[name] = _standardise(scores)
    signs = sign_matrix(permutations, human.shape[1], seed)
    human_p = _upper(pairwise_p_values(human, signs=signs))
    sums = {name: signs @ x.T for name, x in standardised.items()}
    tolerance = max(_tolerance(x) for x in standardised.values())
    spa = {
        name: float(_spa_against(human_p, sums[name][None], x.sum(axis=1)[None], tolerance)[0])
        for name, x in standardised.items()
    }
    order = sorted(spa, key=lambda name: (-spa[name], name))
    rng = np.random.default_rng(None if seed is None else seed + 1)
    n_metrics = len(order)
    p_values = np.full((n_metrics, n_metrics), np.nan)
    for a in range(n_metrics):
        for b in range(a + 1, n_metrics):
            x_a, x_b = standardised[order[a]], standardised[order[b]]
            swap = rng.integers(0, 2, size=(int(resamples), human.shape[1])).astype(float)  # (R, L)
            gap = (x_b - x_a).T  # (L, S)
            null_delta = np.empty(int(resamples))
            # Resamples in blocks bound memory to block x permutations x pairs.
            for start in range(0, int(resamples), _RESAMPLE_BLOCK):
                block = swap[start : start + _RESAMPLE_BLOCK]
                # signs @ (x_a + swap * (x_b - x_a)).T per resample, without building the matrices
                weighted = (block[:, :, None] * gap[None]).transpose(1, 0, 2).reshape(len(gap), -1)
                shift = (signs @ weighted).reshape(len(signs), len(block), -1).transpose(1, 0, 2)
                total_shift = block @ gap  # (B, S)
                null_delta[start : start + len(block)] = _spa_against(
                    human_p, sums[order[a]][None] + shift, x_a.sum(axis=1)[None] + total_shift, tolerance
                ) - _spa_against(
                    human_p, sums[order[b]][None] - shift, x_b.sum(axis=1)[None] - total_shift, tolerance
                )
            observed = spa[order[a]] - spa[order[b]]
            p_values[a, b] = float(np.mean(null_delta >= observed - 1e-12))
    return MetricRanking(
        metrics=tuple(order),
        spa=tuple(spa[name] for name in order),
        p_values=p_values,
        ranks=significance_clusters(p_values, alpha),
    )


# --------------------------------------------------------------------------------------
# SPA of a metric's labels against the human judgements of a study (the dashboard, the
# metrics table)

# SPA from fewer judged items per pair, or fewer pairs, is mostly noise (its interval spans
# most of [0, 1] on PandaLM with 5 items a pair): the dashboard says what is missing instead.
SPA_MIN_ITEMS_PER_PAIR = 10
SPA_MIN_PAIRS = 3
SUMMARY_REPLICATES = 40
SUMMARY_PERMUTATIONS = 300


def item_mean_rows(human: Mapping, metrics: Mapping[str, Mapping], min_items: int = SPA_MIN_ITEMS_PER_PAIR
                   ) -> tuple[list, list[list[float]], dict[str, list[list[float]]]]:
    """The per-item differences SPA compares on preference labels, on the items every metric labels.

    human: pair -> labels table (``.items`` (k,), ``.values`` (k,) in {-1, 0, 1}; an item may
    occur several times); metrics: name -> (pair -> labels table, one label per item). A pair
    is used when every metric labels it and at least ``min_items`` of its judged items are
    labelled by every metric. Returns (pairs, sorted; human_rows: per pair the mean human label
    of each such item, items sorted; metric_rows: name -> per pair the metric's label of each).

    >>> from types import SimpleNamespace as T
    >>> human = {("A", "B"): T(items=["x", "y", "x"], values=[1, -1, 0])}
    >>> metric = {("A", "B"): T(items=["x", "y", "z"], values=[1, 1, -1])}
    >>> item_mean_rows(human, {"m": metric}, min_items=2)
    ([('A', 'B')], [[0.5, -1.0]], {'m': [[1.0, 1.0]]})
    """
    names = list(metrics)
    pairs, human_rows, metric_rows = [], [], {name: [] for name in names}
    for pair in sorted(human):
        of = {name: dict(zip(metrics[name][pair].items, metrics[name][pair].values))
              for name in names if pair in metrics[name]}
        if len(of) < len(names):
            continue
        per_item: dict = {}
        for item, value in zip(human[pair].items, human[pair].values):
            if all(item in labels for labels in of.values()):
                per_item.setdefault(item, []).append(int(value))
        if len(per_item) < min_items:
            continue
        items = sorted(per_item)
        pairs.append(pair)
        human_rows.append([float(np.mean(per_item[i])) for i in items])
        for name in names:
            metric_rows[name].append([float(of[name][i]) for i in items])
    return pairs, human_rows, metric_rows


def spa_summary(human: Mapping, metric: Mapping, seed: int) -> dict:
    """SPA and PA between the humans and a metric on the judged items the metric labels (pairs
    and tables as :func:`item_mean_rows`), with a bootstrap interval — or, below
    ``SPA_MIN_PAIRS`` pairs of ``SPA_MIN_ITEMS_PER_PAIR`` items, why there is not enough data.

    Returns ``{"enough": True, "spa", "pa", "pairs", "spa_low", "spa_high", "pa_low",
    "pa_high", "level"}`` or ``{"enough": False, "pairs", "min_pairs", "min_items"}``.
    """
    used, human_rows, metric_rows = item_mean_rows(human, {"metric": metric})
    metric_rows = metric_rows["metric"]
    if len(used) < SPA_MIN_PAIRS:
        return {"enough": False, "pairs": len(used), "min_pairs": SPA_MIN_PAIRS,
                "min_items": SPA_MIN_ITEMS_PER_PAIR}
    result = compare_differences(used, human_rows, metric_rows, permutations=SUMMARY_PERMUTATIONS, seed=seed)
    interval = bootstrap_interval(used, human_rows, metric_rows, replicates=SUMMARY_REPLICATES,
                                  permutations=SUMMARY_PERMUTATIONS, seed=seed)
    return {"enough": True, "spa": result.spa, "pa": result.pa, "pairs": len(used),
            "spa_low": interval.spa[0], "spa_high": interval.spa[1],
            "pa_low": interval.pa[0], "pa_high": interval.pa[1], "level": interval.level}
