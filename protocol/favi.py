"""Favi-Score and sign accuracy: how a metric's errors against human labels are skewed.

docs/formulas.md §2, Favi-Score paper §4–6. Labels are ``+1`` (first system better), ``0`` (tie)
and ``-1`` (second better), in canonical pair order. Every 3-vector and 3x3 matrix is
ordered ``(+, =, -)``; confusion matrices have human labels as rows and metric labels as
columns.

Functions accept a leading batch axis so many system pairs are computed in one call:
labels of shape ``(..., k)`` give confusion matrices of shape ``(..., 3, 3)``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .preferences import sign_of_mean_per_item

CLASSES = np.array([1, 0, -1], dtype=np.int8)
#: W[m, n]: change of the outcome margin when the human label m is rated n by the metric
#: (positive = in favour of the first system).
COST = np.array([[0, -1, -2], [1, 0, -1], [2, 1, 0]], dtype=np.int64)


def _labels(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ValueError(f"{name} labels contain NaN or infinite values")
    if array.dtype.kind not in "iuf" or not np.all(np.isin(array, (-1, 0, 1))):
        raise ValueError(f"{name} labels must all be -1, 0 or 1")
    return array.astype(np.int8)


def _confusion(confusion) -> np.ndarray:
    matrix = np.asarray(confusion)
    if matrix.ndim < 2 or matrix.shape[-2:] != (3, 3):
        raise ValueError(f"confusion matrix must have shape (..., 3, 3), got {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or np.any(matrix < 0):
        raise ValueError("confusion matrix entries must be finite non-negative counts")
    return matrix


def _one_hot(labels: np.ndarray) -> np.ndarray:
    """(..., k) labels in {+1, 0, -1} -> (..., k, 3) indicators in class order (+, =, -)."""
    return (labels[..., None] == CLASSES).astype(np.int64)


def confusion_matrix(human, metric, mask=None) -> np.ndarray:
    """Confusion matrix C[m, n] = #items with human label m and metric label n.

    human, metric: label arrays of shape (..., k), paired item by item.
    mask: optional bool array (..., k); False entries (padding) are not counted.
    Returns int64 counts of shape (..., 3, 3).

    Rows and columns in class order +1, 0, -1:

    >>> confusion_matrix([1, 1, 0, -1, 1], [1, 0, 0, -1, -1]).tolist()
    [[1, 1, 1], [0, 1, 0], [0, 0, 1]]
    """
    human = _labels(human, "human")
    metric = _labels(metric, "metric")
    if human.shape != metric.shape:
        raise ValueError(
            f"human and metric labels must have the same shape, got {human.shape} and {metric.shape}"
        )
    human_hot = _one_hot(human)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != human.shape:
            raise ValueError(f"mask shape {mask.shape} differs from label shape {human.shape}")
        human_hot = human_hot * mask[..., None]
    return np.einsum("...km,...kn->...mn", human_hot, _one_hot(metric))


def outcomes(confusion) -> tuple[np.ndarray, np.ndarray]:
    """(human outcome d, metric outcome d_hat): row and column sums, each (..., 3)."""
    matrix = _confusion(confusion)
    return matrix.sum(axis=-1), matrix.sum(axis=-2)


def margin(outcome) -> np.ndarray:
    """Outcome margin mar(d) = d_+ - d_- of outcome vectors (..., 3) -> (...)."""
    outcome = np.asarray(outcome)
    if outcome.ndim < 1 or outcome.shape[-1] != 3:
        raise ValueError(f"outcome must have shape (..., 3), got {outcome.shape}")
    return outcome[..., 0] - outcome[..., 2]


def total_error(confusion) -> np.ndarray:
    """E = sum(C) - trace(C), shape (...)."""
    matrix = _confusion(confusion)
    return matrix.sum(axis=(-2, -1)) - np.trace(matrix, axis1=-2, axis2=-1)


def favi_score(confusion) -> np.ndarray | float:
    """Favi-Score Phi(C) = sum(W * C) / E in [-2, 2]; NaN where E = 0 ("no errors").

    confusion: (..., 3, 3). Returns a float for one matrix, else an array (...).
    Positive values favour the first system.

    A metric whose two errors both go against the first system:

    >>> favi_score(confusion_matrix([1, 1, 0, -1, 1], [1, 0, 0, -1, -1]))
    -1.5
    """
    matrix = _confusion(confusion)
    errors = total_error(matrix).astype(float)
    weighted = np.einsum("...mn,mn->...", matrix, COST).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(errors > 0, weighted / np.where(errors > 0, errors, 1.0), np.nan)
    return float(phi) if phi.ndim == 0 else phi


def favi_from_margins(confusion) -> np.ndarray | float:
    """Lemma 1 form of the Favi-Score: (mar(d_hat) - mar(d)) / E; NaN where E = 0."""
    human_outcome, metric_outcome = outcomes(confusion)
    errors = total_error(confusion).astype(float)
    shift = (margin(metric_outcome) - margin(human_outcome)).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(errors > 0, shift / np.where(errors > 0, errors, 1.0), np.nan)
    return float(phi) if phi.ndim == 0 else phi


def swap_systems(confusion) -> np.ndarray:
    """Confusion matrix of the same items with the two systems swapped: P C P."""
    return _confusion(confusion)[..., ::-1, ::-1]


def sample_accuracy(confusion) -> float:
    """Sample-level sign accuracy trace(C) / sum(C), pooled over any leading axes.

    NaN when there are no items.

    >>> sample_accuracy(confusion_matrix([1, 1, 0, -1, 1], [1, 0, 0, -1, -1]))
    0.6
    """
    matrix = _confusion(confusion)
    total = matrix.sum()
    return float(np.trace(matrix, axis1=-2, axis2=-1).sum() / total) if total else float("nan")


def system_sign_agreement(confusion) -> np.ndarray:
    """Per pair: sign(mar(d)) == sign(mar(d_hat)), bool of shape (...)."""
    human_outcome, metric_outcome = outcomes(confusion)
    return np.sign(margin(human_outcome)) == np.sign(margin(metric_outcome))


def system_accuracy(confusions) -> float:
    """System-level sign accuracy: fraction of pairs (leading axes) whose margins agree in sign."""
    agreement = system_sign_agreement(confusions)
    return float(np.mean(agreement)) if agreement.size else float("nan")


# --------------------------------------------------------------------------------------
# Per-pair results from label tables (protocol.preferences.PairLabels or anything with
# ``items`` and ``values`` arrays).


@dataclass(frozen=True)
class PairFavi:
    """Favi-Score of one system pair (canonical order)."""

    first: str
    second: str
    confusion: np.ndarray  # (3, 3) int64, human rows x metric columns
    favi: float  # NaN when the metric makes no error on this pair
    total_error: int
    sample_accuracy: float
    system_sign_agrees: bool


def paired_labels(human_items, human_values, metric_items, metric_values):
    """Pair every item's human label with its metric label.

    Several human labels of one item (several annotators) are first merged into one, the sign
    of their mean (protocol.preferences.sign_of_mean_per_item: the item is the unit); items
    the metric did not rate are dropped. Returns (human labels (n,), metric labels (n,)).
    """
    _, human, metric = paired_items(human_items, human_values, metric_items, metric_values)
    return human, metric


def paired_items(human_items, human_values, metric_items, metric_values):
    """paired_labels with the items: (items (n,) object, human (n,), metric (n,))."""
    metric_items = np.asarray(metric_items, dtype=object)
    metric_values = _labels(metric_values, "metric")
    if len(set(metric_items.tolist())) != len(metric_items):
        raise ValueError("metric labels must hold at most one label per item")
    human_items = np.asarray(human_items)
    human_values = _labels(human_values, "human")
    if human_items.shape != human_values.shape or metric_items.shape != metric_values.shape:
        raise ValueError("items and label values must have the same length")
    human_items, human_values = sign_of_mean_per_item(human_items, human_values)
    metric_of = dict(zip(metric_items.tolist(), metric_values.tolist()))
    found = np.array([item in metric_of for item in human_items.tolist()], dtype=bool)
    items = human_items[found]
    metric = np.array([metric_of[item] for item in items.tolist()], dtype=np.int8)
    return items, human_values[found], metric


def favi_by_pair(human: Mapping, metric: Mapping) -> dict[tuple[str, str], PairFavi]:
    """Favi result for every pair present in both label tables.

    human, metric: dict (first, second) -> object with ``items`` and ``values`` arrays
    (protocol.preferences.PairLabels), canonical order.
    """
    pairs = sorted(set(human) & set(metric))
    if not pairs:
        return {}
    paired = [
        paired_labels(human[p].items, human[p].values, metric[p].items, metric[p].values) for p in pairs
    ]
    # One padded (pairs, items) batch: all confusion matrices and scores in single calls.
    width = max(max(len(h) for h, _ in paired), 1)
    human_batch = np.zeros((len(pairs), width), dtype=np.int8)
    metric_batch = np.zeros((len(pairs), width), dtype=np.int8)
    mask = np.zeros((len(pairs), width), dtype=bool)
    for k, (h, m) in enumerate(paired):
        human_batch[k, : len(h)] = h
        metric_batch[k, : len(m)] = m
        mask[k, : len(h)] = True
    confusions = confusion_matrix(human_batch, metric_batch, mask=mask)
    scores = np.atleast_1d(favi_score(confusions))
    errors = total_error(confusions)
    agreements = system_sign_agreement(confusions)
    return {
        pair: PairFavi(
            first=pair[0],
            second=pair[1],
            confusion=confusions[k],
            favi=float(scores[k]),
            total_error=int(errors[k]),
            sample_accuracy=sample_accuracy(confusions[k]),
            system_sign_agrees=bool(agreements[k]),
        )
        for k, pair in enumerate(pairs)
    }


def per_system_favi(favi_by_pair_values: Mapping[tuple[str, str], float]) -> dict[str, np.ndarray]:
    """For every system s, the Favi-Scores Phi(s as first, o as second) over opponents o.

    favi_by_pair_values: (first, second) -> Phi in canonical order; the reversed pair has
    -Phi. Pairs without errors (NaN) are left out. Returns system -> float array (<= S-1,).
    """
    scores: dict[str, list[float]] = {}
    for (first, second), phi in favi_by_pair_values.items():
        if isinstance(phi, PairFavi):
            phi = phi.favi
        scores.setdefault(first, [])
        scores.setdefault(second, [])
        if np.isnan(phi):
            continue
        scores[first].append(float(phi))
        scores[second].append(-float(phi))
    return {system: np.array(values) for system, values in sorted(scores.items())}


@dataclass(frozen=True)
class FaviSummary:
    """Per-metric summary over all system pairs (the paper's Figure 4 quantities)."""

    pairs: int
    pairs_without_errors: int
    mean_abs_favi: float  # over pairs with errors
    std_abs_favi: float
    sample_accuracy: float  # pooled over all paired labels
    system_accuracy: float  # over all pairs


def summarize(results: Mapping[tuple[str, str], PairFavi]) -> FaviSummary:
    """Mean |Phi|, sample- and system-level sign accuracy over the pairs of one metric."""
    if not results:
        raise ValueError("no system pairs to summarize")
    confusions = np.stack([r.confusion for r in results.values()])
    phis = np.array([r.favi for r in results.values()], dtype=float)
    with_errors = np.abs(phis[~np.isnan(phis)])
    return FaviSummary(
        pairs=len(results),
        pairs_without_errors=int(np.isnan(phis).sum()),
        mean_abs_favi=float(with_errors.mean()) if with_errors.size else float("nan"),
        std_abs_favi=float(with_errors.std()) if with_errors.size else float("nan"),
        sample_accuracy=sample_accuracy(confusions),
        system_accuracy=system_accuracy(confusions),
    )


# --------------------------------------------------------------------------------------
# Uncertainty: item-clustered bootstrap


@dataclass(frozen=True)
class FaviIntervals:
    """Percentile intervals (low, high) at ``level`` from an item-clustered bootstrap.

    pairs: (P,) canonical pairs; favi: (P, 2), NaN rows where a pair had no error in too
    many replicates to say; sample_accuracy, system_accuracy, mean_abs_favi: (2,).
    """

    pairs: tuple[tuple[str, str], ...]
    favi: np.ndarray
    sample_accuracy: np.ndarray
    system_accuracy: np.ndarray
    mean_abs_favi: np.ndarray
    level: float
    draws: int


def bootstrap_intervals(human: Mapping, metric: Mapping, *, draws: int = 1000,
                        level: float = 0.95, seed: int = 0) -> FaviIntervals:
    """Intervals for the Favi-Scores and the accuracies, resampling items, not labels.

    human, metric: as for favi_by_pair. An item id names one input (e.g. a source text)
    shared by every pair that was compared on it, so one replicate draws the item ids with
    replacement and every pair keeps all its labels of a drawn item: labels that share an
    item (annotators, pairs of systems on one input) are dependent and move together.
    """
    if not (isinstance(draws, (int, np.integer)) and draws >= 2):
        raise ValueError(f"draws must be an integer >= 2, got {draws!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    pairs = sorted(set(human) & set(metric))
    if not pairs:
        raise ValueError("no system pairs in both label tables")
    per_pair = [paired_items(human[p].items, human[p].values, metric[p].items, metric[p].values)
                for p in pairs]
    index = {item: k for k, item in enumerate(sorted({i for items, _, _ in per_pair
                                                      for i in items.tolist()}, key=str))}
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(index), np.full(len(index), 1 / len(index)), size=draws)
    confusions = np.zeros((draws, len(pairs), 9))
    for k, (items, h, m) in enumerate(per_pair):
        cells = np.zeros((len(items), 9))
        cells[np.arange(len(items)), (1 - h.astype(int)) * 3 + (1 - m.astype(int))] = 1
        columns = np.array([index[i] for i in items.tolist()], dtype=np.int64)
        confusions[:, k] = weights[:, columns] @ cells
    confusions = confusions.reshape(draws, len(pairs), 3, 3)
    with np.errstate(invalid="ignore", divide="ignore"):
        favi = np.atleast_2d(favi_score(confusions))                              # (B, P)
        totals = confusions.sum(axis=(1, 2, 3))
        sample = np.trace(confusions, axis1=-2, axis2=-1).sum(axis=1) / totals
        system = system_sign_agreement(confusions).mean(axis=1)
    abs_favi = np.abs(favi)
    has_error = ~np.isnan(favi)
    mean_abs = np.where(has_error.any(axis=1),
                        np.nansum(abs_favi, axis=1) / np.maximum(has_error.sum(axis=1), 1), np.nan)
    tails = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]

    def interval(values):
        values = values[np.isfinite(values)]
        return np.percentile(values, tails) if values.size >= draws / 2 else np.full(2, np.nan)

    return FaviIntervals(
        pairs=tuple(pairs),
        favi=np.array([interval(favi[:, k]) for k in range(len(pairs))]),
        sample_accuracy=interval(sample),
        system_accuracy=interval(system),
        mean_abs_favi=interval(mean_abs),
        level=float(level),
        draws=int(draws),
    )
