"""Pairwise preferences: from scalar scores (SPEC §1) and per-pair label tables of a bundle.

Labels everywhere: ``+1`` = first system better, ``0`` = tie, ``-1`` = second better. A pair is
always stored in canonical order (first < second by name); a row given the other way round is
flipped and its label negated.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .bundle import Bundle


def canonical_pair(a: str, b: str) -> tuple[str, str, int]:
    """``(first, second, sign)`` with first < second; sign is -1 when a and b were swapped."""
    if a == b:
        raise ValueError(f"a pair needs two different systems, got {a!r} twice")
    return (a, b, 1) if a < b else (b, a, -1)


def preferences_from_scores(first_scores, second_scores, eps: float = 0.0) -> np.ndarray:
    """Preference of first over second per element: sign(s1 - s2), ties within ``eps``.

    first_scores, second_scores: arrays of the same shape, finite. Returns int8 of that shape.
    """
    s1 = np.asarray(first_scores, dtype=float)
    s2 = np.asarray(second_scores, dtype=float)
    if s1.shape != s2.shape:
        raise ValueError(f"score arrays differ in shape: {s1.shape} vs {s2.shape}")
    if eps < 0 or not np.isfinite(eps):
        raise ValueError(f"tie margin eps must be a finite number >= 0, got {eps}")
    if not (np.isfinite(s1).all() and np.isfinite(s2).all()):
        raise ValueError("scores must be finite (found NaN or infinity)")
    diff = s1 - s2
    out = np.sign(diff).astype(np.int8)
    out[np.abs(diff) <= eps] = 0
    return out


@dataclass(frozen=True)
class PairLabels:
    """The labels of one system pair, canonical order.

    items: (k,) str item ids; values: (k,) int8 in {-1,0,1}; annotators: (k,) str.
    An item may occur several times (several annotators).
    """

    first: str
    second: str
    items: np.ndarray
    values: np.ndarray
    annotators: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def swapped(self) -> PairLabels:
        return PairLabels(self.second, self.first, self.items, (-self.values).astype(np.int8), self.annotators)


def _pair_table(rows: Iterable[tuple[str, str, str, int, str]]) -> dict[tuple[str, str], PairLabels]:
    grouped: dict[tuple[str, str], list[tuple[str, int, str]]] = defaultdict(list)
    for item, a, b, value, annotator in rows:
        first, second, sign = canonical_pair(a, b)
        grouped[(first, second)].append((item, sign * int(value), annotator))
    table = {}
    for (first, second), entries in sorted(grouped.items()):
        table[(first, second)] = PairLabels(
            first,
            second,
            np.array([e[0] for e in entries], dtype=object),
            np.array([e[1] for e in entries], dtype=np.int8),
            np.array([e[2] for e in entries], dtype=object),
        )
    return table


def _mean_scores(rows) -> dict[str, dict[str, float]]:
    """item -> system -> mean score over the rows (annotators) of that (item, system)."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        sums[(r.item, r.system)].append(r.score)
    by_item: dict[str, dict[str, float]] = defaultdict(dict)
    for (item, system), values in sums.items():
        by_item[item][system] = float(np.mean(values))
    return by_item


def _preferences_from_mean_scores(by_item: dict[str, dict[str, float]], eps: float, annotator: str):
    for item in sorted(by_item):
        scores = by_item[item]
        systems = sorted(scores)
        for i, a in enumerate(systems):
            for b in systems[i + 1:]:
                diff = scores[a] - scores[b]
                value = 0 if abs(diff) <= eps else (1 if diff > 0 else -1)
                yield item, a, b, value, annotator


def human_labels(bundle: Bundle, eps: float = 0.0) -> dict[tuple[str, str], PairLabels]:
    """Human labels per canonical pair.

    human_preference rows give one label per row. human_score rows are averaged per
    (item, system) first and give one label per item (annotator ``"mean"``). A bundle with
    both kinds uses both.
    """
    rows = [(r.item, r.first, r.second, r.preference, r.annotator) for r in bundle.human_preferences]
    if bundle.human_scores:
        rows.extend(_preferences_from_mean_scores(_mean_scores(bundle.human_scores), eps, "mean"))
    return _pair_table(rows)


def metric_labels(bundle: Bundle, metric: str, eps: float = 0.0) -> dict[tuple[str, str], PairLabels]:
    """One label per item and pair from a metric's metric_score or metric_preference rows."""
    kind = bundle.metric_kind(metric)
    if kind == "score":
        by_item = _mean_scores(r for r in bundle.metric_scores if r.metric == metric)
        rows = _preferences_from_mean_scores(by_item, eps, metric)
    else:
        rows = (
            (r.item, r.first, r.second, r.preference, metric)
            for r in bundle.metric_preferences
            if r.metric == metric
        )
    return _pair_table(rows)


def score_matrix(bundle: Bundle, source: str) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    """Scores as a (systems, items) float array, NaN where missing.

    source: ``"human"`` (human_score rows averaged per item and system) or the name of a
    metric with metric_score rows. Returns (systems, items, scores (S, L)).
    """
    if source == "human":
        rows = bundle.human_scores
        if not rows:
            raise ValueError("the bundle has no human_score rows")
    else:
        if bundle.metric_kind(source) != "score":
            raise ValueError(f"metric {source!r} gives preferences, not scores")
        rows = [r for r in bundle.metric_scores if r.metric == source]
    by_item = _mean_scores(rows)
    systems = bundle.systems
    items = tuple(sorted(by_item))
    index = {s: i for i, s in enumerate(systems)}
    matrix = np.full((len(systems), len(items)), np.nan)
    for j, item in enumerate(items):
        for system, value in by_item[item].items():
            matrix[index[system], j] = value
    return systems, items, matrix
