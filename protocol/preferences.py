"""Pairwise preferences: from scalar scores (docs/formulas.md §1) and per-pair label tables of a bundle.

Labels everywhere: ``+1`` = first system better, ``0`` = tie, ``-1`` = second better. A pair is
always stored in canonical order (first < second by name); a row given the other way round is
flipped and its label negated.

The item is the unit. Several judgements of one comparison (several annotators of one item
and pair) are aggregated before any statistic into one label, the sign of their mean
(``sign_of_mean_per_item``; docs/formulas.md §1 averages annotators first, and the Correction paper merges
its three crowd labels per item into one). Counting each annotator's label as an observation
treats correlated labels as independent: on PandaLM, under a null that flips whole items, the
per-label sign test decides ± for about a quarter of the pairs at alpha 0.05.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .bundle import Bundle


def canonical_pair(a: str, b: str) -> tuple[str, str, int]:
    """``(first, second, sign)`` with first < second; sign is -1 when a and b were swapped.

    >>> canonical_pair("M2", "M1")
    ('M1', 'M2', -1)
    """
    if a == b:
        raise ValueError(f"a pair needs two different systems, got {a!r} twice")
    return (a, b, 1) if a < b else (b, a, -1)


def shared_items(items: Iterable, systems: Iterable[str]) -> dict[tuple[str, str], int]:
    """(first, second) -> items on which both systems have an output, for every pair with one.

    items, systems: (n,) parallel, one entry per output (repeats, e.g. samples, count once).
    One (items x systems) presence matrix and one product: never a loop over items x pairs
    (40 M pairs of outputs at 200 systems x 2,000 items).

    >>> shared_items(["q1", "q1", "q1", "q2", "q2"], ["B", "A", "C", "A", "B"])
    {('A', 'B'): 2, ('A', 'C'): 1, ('B', 'C'): 1}
    """
    items, systems = list(items), list(systems)
    if len(items) != len(systems):
        raise ValueError(f"{len(items)} items but {len(systems)} systems")
    if not items:
        return {}
    _, item_index = np.unique(np.asarray(items, dtype=object).astype(str), return_inverse=True)
    names, system_index = np.unique(np.asarray(systems, dtype=str), return_inverse=True)
    present = np.zeros((int(item_index.max()) + 1, len(names)), dtype=np.float64)
    present[item_index, system_index] = 1.0
    shared = np.rint(present.T @ present).astype(np.int64)
    first, second = np.nonzero(np.triu(shared, k=1))  # names are sorted: first < second
    return {(str(names[a]), str(names[b])): int(shared[a, b]) for a, b in zip(first.tolist(), second.tolist())}


def preferences_from_scores(first_scores, second_scores, eps: float = 0.0) -> np.ndarray:
    """Preference of first over second per element: sign(s1 - s2), ties within ``eps``.

    first_scores, second_scores: arrays of the same shape, finite. Returns int8 of that shape.

    >>> preferences_from_scores([0.9, 0.5, 0.2], [0.4, 0.45, 0.3]).tolist()
    [1, 1, -1]
    >>> preferences_from_scores([0.9, 0.5, 0.2], [0.4, 0.45, 0.3], eps=0.1).tolist()
    [1, 0, 0]
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


def sign_of_mean_per_item(items, values) -> tuple[np.ndarray, np.ndarray]:
    """One label per item: the sign of the mean of the item's labels (0 when they cancel).

    items (k,) hashable ids, values (k,) in {-1, 0, 1}. Returns (unique items (u,) object,
    sorted; labels (u,) int8). An item with one label keeps it.

    >>> items, labels = sign_of_mean_per_item(["a", "b", "a", "c", "c"], [1, -1, 1, 1, -1])
    >>> items.tolist(), labels.tolist()
    (['a', 'b', 'c'], [1, -1, 0])
    """
    items = np.asarray(items, dtype=object).reshape(-1)
    values = np.asarray(values).reshape(-1)
    if items.shape != values.shape:
        raise ValueError(f"{len(items)} items but {len(values)} label values")
    if values.size and (values.dtype.kind not in "iuf" or not np.all(np.isin(values, (-1, 0, 1)))):
        raise ValueError("labels must all be -1, 0 or 1")
    if not items.size:
        return np.array([], dtype=object), np.array([], dtype=np.int8)
    unique, inverse = np.unique(items, return_inverse=True)
    sums = np.bincount(inverse.reshape(-1), weights=values, minlength=len(unique))
    return unique.astype(object), np.sign(sums).astype(np.int8)


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

    def per_item(self) -> PairLabels:
        """One label per item (sign of the mean, ``sign_of_mean_per_item``), annotator
        ``"mean"`` where several labels were merged."""
        items, values = sign_of_mean_per_item(self.items, self.values)
        if len(items) == len(self.items):
            order = np.argsort(self.items.astype(str), kind="stable")
            return PairLabels(self.first, self.second, self.items[order], self.values[order],
                              self.annotators[order])
        counts = defaultdict(list)
        for item, annotator in zip(self.items.tolist(), self.annotators.tolist()):
            counts[item].append(annotator)
        annotators = np.array([counts[i][0] if len(counts[i]) == 1 else "mean" for i in items],
                              dtype=object)
        return PairLabels(self.first, self.second, items, values, annotators)


def pair_labels_table(labels: Mapping[tuple[str, str], Sequence[tuple[str, int]]]) -> dict[tuple[str, str], PairLabels]:
    """PairLabels tables (annotators left empty) from (first, second) -> [(item, value)] lists;
    a pair without labels is left out.

    >>> table = pair_labels_table({("A", "B"): [("x", 1), ("y", -1)], ("A", "C"): []})
    >>> list(table), table[("A", "B")].values.tolist()
    ([('A', 'B')], [1, -1])
    """
    return {
        pair: PairLabels(pair[0], pair[1], np.array([i for i, _ in rows], dtype=object),
                         np.array([v for _, v in rows], dtype=np.int8), np.array([""] * len(rows), dtype=object))
        for pair, rows in labels.items() if rows
    }


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


def _preferences_from_mean_scores(by_item: dict[str, dict[str, float]], eps: float, annotator: str,
                                  on: dict[str, set[tuple[str, str]]] | None = None):
    """(item, a, b, label, annotator) for every item and pair of its scored systems, a < b;
    ``on``: only the pairs it names for the item (item -> {(a, b)}, a < b)."""
    for item in sorted(by_item):
        scores = by_item[item]
        if on is None:
            systems = sorted(scores)
            pairs = [(a, b) for i, a in enumerate(systems) for b in systems[i + 1:]]
        else:
            pairs = sorted((a, b) for a, b in on.get(item, ()) if a in scores and b in scores)
        for a, b in pairs:
            diff = scores[a] - scores[b]
            value = 0 if abs(diff) <= eps else (1 if diff > 0 else -1)
            yield item, a, b, value, annotator


def human_labels(bundle: Bundle, eps: float = 0.0, *, per_item: bool = True
                 ) -> dict[tuple[str, str], PairLabels]:
    """Human labels per canonical pair, one per item (the module docstring's rule).

    human_preference rows give one label per row; human_score rows are averaged per
    (item, system) first and give one label per item (annotator ``"mean"``). A bundle with
    both kinds uses both. per_item=True (default) merges the labels of one item and pair into
    the sign of their mean; per_item=False keeps every annotator's label (for annotator
    agreement, never for a statistic that assumes independent observations).
    """
    rows = [(r.item, r.first, r.second, r.preference, r.annotator) for r in bundle.human_preferences]
    if bundle.human_scores:
        rows.extend(_preferences_from_mean_scores(_mean_scores(bundle.human_scores), eps, "mean"))
    table = _pair_table(rows)
    if per_item:
        table = {key: labels.per_item() for key, labels in table.items()}
    return table


def metric_labels(bundle: Bundle, metric: str, eps: float = 0.0, *, on: Mapping | None = None
                  ) -> dict[tuple[str, str], PairLabels]:
    """One label per item and pair from a metric's metric_score or metric_preference rows.

    ``on``: a label table (e.g. human_labels'): only the labels of the (pair, item)s it holds,
    each what it is without ``on`` (a pair the metric labels on none of them is left out).
    """
    kind = bundle.metric_kind(metric)
    wanted: dict[str, set[tuple[str, str]]] | None = None
    if on is not None:
        wanted = defaultdict(set)
        for (first, second), labels in on.items():
            pair = tuple(sorted((first, second)))
            for item in set(labels.items.tolist()):
                wanted[item].add(pair)
    if kind == "score":
        by_item = _mean_scores(r for r in bundle.metric_scores if r.metric == metric
                               and (wanted is None or r.item in wanted))
        rows = _preferences_from_mean_scores(by_item, eps, metric, wanted)
    else:
        verdicts: dict[tuple[str, str, str], list[int]] = {}
        for r in bundle.metric_preferences:
            if r.metric == metric:
                a, b = sorted((r.first, r.second))
                if wanted is not None and (a, b) not in wanted.get(r.item, ()):
                    continue
                verdicts.setdefault((r.item, a, b), []).append(r.preference if a == r.first else -r.preference)
        rows = ((item, a, b, combine_verdicts(values), metric) for (item, a, b), values in verdicts.items())
    return _pair_table(rows)


def combine_verdicts(values: list[int]) -> int:
    """One preference from a judge's verdicts on one item and pair (+1 / 0 / -1, all in the
    pair's own direction): usually one verdict; with both position orders, their common verdict
    when they agree and a tie when they do not — an order-dependent verdict is no preference
    (Zheng et al. 2023, "Judging LLM-as-a-judge", the swap-and-tie rule).

    >>> combine_verdicts([1]), combine_verdicts([1, 1]), combine_verdicts([1, -1])
    (1, 1, 0)
    """
    first = values[0]
    return first if all(v == first for v in values) else 0


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
