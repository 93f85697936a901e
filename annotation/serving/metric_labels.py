"""A metric's label of every item of a system pair (``protocol.adaptive.PairState.metric``),
computed from the metric's scores (or a judge's verdicts) when needed, never stored per pair.

Stored in each pair's protocol state, the labels were most of it (2,000 per pair at 2,000
items: 1,225 states of 30 KB at 50 systems), and a process's first round close decoded them
all, holding the interpreter for seconds while annotators waited. A metric's scores do not
change once imported, so each process keeps a study's label sources (the scores as an items x
systems table, or the verdicts) keyed by the study's identity and metrics; the protocol codec
(``protocol_state.py``) hands each pair a ``LazyLabels`` that computes its labels from them on
first use. ``selectors.studies.study_metric_labels`` reads through here too: one formula.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from protocol.preferences import combine_verdicts, preferences_from_scores
from protocol.ranking import label_counts
from protocol.study_settings import combined_by_criterion

from ..models import Item, Metric, MetricPreference, MetricScore, Study, System
from ..rubrics import criterion_metrics
from .process_cache import ProcessCache


# Pairs per pass of ``MetricLabelSource.counts``: an (items x pairs) block of 2,000 x 256
# floats is 4 MB, so 1,225 pairs never hold 2.45 M labels at once.
COUNT_CHUNK = 256


@dataclass(frozen=True)
class MetricLabelSource:
    """Every label one metric gives.

    items       (I,) item external ids, the rows of ``table``
    columns     system name -> column of ``table``
    table       (I, S) scores, NaN where an output has none
    tie_margin  |s1 - s2| <= margin is a tie (docs/formulas.md §1)
    verdicts    a preference metric's labels, (first, second) -> {item: label}; None for scores
    """

    items: np.ndarray
    columns: dict[str, int]
    table: np.ndarray
    tie_margin: float
    verdicts: dict[tuple[str, str], dict[str, int]] | None = None

    def pair(self, first: str, second: str, items=None) -> dict[str, int]:
        """{item: the metric's preference of ``first`` over ``second``} on the items where both
        have a score (or a verdict); canonical order first < second. ``items`` (external ids)
        restricts it to those (the items humans judged: Favi and SPA compare nothing else)."""
        if self.verdicts is not None:
            found = self.verdicts.get((first, second), {})
            if items is None:
                return dict(found)
            return {item: found[item] for item in items if item in found}
        if first not in self.columns or second not in self.columns:
            return {}
        rows = slice(None) if items is None else np.array(
            [self.row_of[item] for item in items if item in self.row_of], dtype=np.int64)
        a, b = self.table[rows, self.columns[first]], self.table[rows, self.columns[second]]
        scored = ~(np.isnan(a) | np.isnan(b))
        labels = preferences_from_scores(a[scored], b[scored], eps=self.tie_margin)
        return dict(zip(self.items[rows][scored].tolist(), labels.tolist()))

    def label(self, first: str, second: str, item: str) -> int | None:
        """The metric's preference of ``first`` over ``second`` on one item (``pair``'s formula,
        restricted to it); None where the pair has no label for it."""
        return self.pair(first, second, items=(item,)).get(item)

    @cached_property
    def row_of(self) -> dict[str, int]:
        """item external id -> its row of ``table``."""
        return {item: n for n, item in enumerate(self.items.tolist())}

    def counts(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """(P, 3) the metric's (n+, n=, n-) of each of ``pairs`` (first, second) over its items:
        the labels of ``pair``, counted without building them item by item (all pairs at
        50 systems x 2,000 items in one pass over the score table)."""
        out = np.zeros((len(pairs), 3), dtype=np.int64)
        if self.verdicts is not None:
            for n, (first, second) in enumerate(pairs):
                out[n] = label_counts(list(self.verdicts.get((first, second), {}).values()))
            return out
        known = [n for n, (a, b) in enumerate(pairs) if a in self.columns and b in self.columns]
        for chunk in range(0, len(known), COUNT_CHUNK):
            rows = known[chunk:chunk + COUNT_CHUNK]
            a = self.table[:, [self.columns[pairs[n][0]] for n in rows]]
            b = self.table[:, [self.columns[pairs[n][1]] for n in rows]]
            scored = ~(np.isnan(a) | np.isnan(b))
            labels = preferences_from_scores(np.where(scored, a, 0.0), np.where(scored, b, 0.0), eps=self.tie_margin)
            out[rows, 0] = ((labels == 1) & scored).sum(axis=0)
            out[rows, 1] = ((labels == 0) & scored).sum(axis=0)
            out[rows, 2] = ((labels == -1) & scored).sum(axis=0)
        return out

    def system_scores(self, systems: list[str]) -> np.ndarray:
        """(S,) how good the metric finds each of ``systems``: its mean score (a preference
        metric: its wins minus losses); a system it never scored comes last."""
        if self.verdicts is not None:
            net = dict.fromkeys(systems, 0.0)
            for (first, second), labels in self.verdicts.items():
                total = float(sum(labels.values()))
                if first in net and second in net:
                    net[first] += total
                    net[second] -= total
            return np.array([net[name] for name in systems])
        means = np.full(len(systems), np.nan)
        for n, name in enumerate(systems):
            column = self.table[:, self.columns[name]] if name in self.columns else np.array([])
            if np.any(~np.isnan(column)):
                means[n] = np.nanmean(column)
        lowest = np.nanmin(means) - 1.0 if np.any(~np.isnan(means)) else 0.0
        return np.where(np.isnan(means), lowest, means)


def _load(metric: Metric, systems: tuple[str, str] | None = None) -> MetricLabelSource:
    if metric.kind == Metric.Kind.PREFERENCE:
        verdicts: dict[tuple[str, str], dict[str, list[int]]] = {}
        for a, b, item, value in MetricPreference.objects.filter(metric=metric).values_list(
                "first__name", "second__name", "item__external_id", "value").iterator():
            verdicts.setdefault((a, b), {}).setdefault(item, []).append(value)
        # Both position orders of a judge are two rows; one function decides what they say.
        combined = {pair: {item: combine_verdicts(values) for item, values in by_item.items()}
                    for pair, by_item in verdicts.items()}
        return MetricLabelSource(np.array([], dtype=object), {}, np.zeros((0, 0)), metric.tie_margin, combined)
    # Ids, not names, in the 100,000-row read: no join to the systems, and np.unique over
    # integers rather than strings, and one typed array from the rows rather than a column at a
    # time (together less than half the time at 50 systems: docs/benchmarks.md).
    scores = MetricScore.objects.filter(metric=metric)
    if systems is not None:
        scores = scores.filter(output__system__study_id=metric.study_id, output__system__name__in=systems)
    rows = list(scores.values_list("output__item_id", "output__system_id", "value"))
    if not rows:
        return MetricLabelSource(np.array([], dtype=object), {}, np.zeros((0, 0)), metric.tie_margin)
    columns = np.fromiter(rows, dtype=[("item", "i8"), ("system", "i8"), ("value", "f8")], count=len(rows))
    item_ids, system_ids, values = columns["item"], columns["system"], columns["value"]
    items, item_index = np.unique(item_ids, return_inverse=True)
    systems, system_index = np.unique(system_ids, return_inverse=True)
    table = np.full((len(items), len(systems)), np.nan)
    table[item_index, system_index] = values
    external = dict(Item.objects.filter(pk__in=items.tolist()).values_list("pk", "external_id"))
    names = dict(System.objects.filter(pk__in=systems.tolist()).values_list("pk", "name"))
    return MetricLabelSource(np.array([external[i] for i in items.tolist()], dtype=object),
                             {names[pk]: k for k, pk in enumerate(systems.tolist())}, table, metric.tie_margin)


# (study id, study created_at, metric id, tie margin) -> source. The tie margin is fixed once the
# study's protocol has started (admin), so a source never goes stale while it is used.
_sources: ProcessCache[MetricLabelSource] = ProcessCache()
# (study id, created_at, study metric id, criteria) -> one metric (or None) per rubric lane
_lanes: ProcessCache[tuple[Metric | None, ...]] = ProcessCache()


def metric_label_source(study: Study, metric: Metric, *, systems: tuple[str, str] | None = None) -> MetricLabelSource:
    """The label source of one of ``study``'s metrics (loaded once per process).

    ``systems``: only these two systems' labels are wanted (one pair's page): the study's
    source if this process holds it already, else one of their scores alone, read now and not
    kept (4,000 scores rather than the 100,000 of 50 systems x 2,000 items)."""
    key = (study.pk, study.created_at, metric.pk, metric.tie_margin)
    if systems is not None and metric.kind == Metric.Kind.SCORE and not _sources.holds(key):
        return _load(metric, systems)
    return _sources.get(key, lambda: _load(metric))


def lane_metrics(study: Study) -> tuple[Metric | None, ...]:
    """The metric of each lane of the study's rubric (rubrics.criterion_metrics), None for a
    human-only lane; read once per process and study setup."""

    def load() -> tuple[Metric | None, ...]:
        by_name = {m.name: m for m in Metric.objects.filter(study_id=study.pk)}
        return tuple(by_name[name] if name else None for name in criterion_metrics(study).values())

    return _lanes.get((study.pk, study.created_at, study.metric_id, repr(study.criteria)), load)


def lane_label_sources(study: Study) -> tuple[MetricLabelSource | None, ...]:
    """One label source per lane of the study's rubric (None: human only)."""
    return tuple(None if metric is None else metric_label_source(study, metric) for metric in lane_metrics(study))


def combined_names(study: Study) -> tuple[tuple[str, ...], ...]:
    """The metric names each lane of the study's rubric combines with its own metric
    (Study.combined_metrics, ``combined_by_criterion``; () for a lane that combines none)."""
    criteria = tuple(criterion_metrics(study)) if study.criteria else ()
    by_criterion = combined_by_criterion(study.combined_metrics, criteria)
    return tuple(by_criterion.get(name, ()) for name in (criteria or ("",)))


def combined_label_sources(study: Study, lane: int = 0) -> tuple[MetricLabelSource, ...]:
    """The label sources lane ``lane`` of the study's rubric combines (Study.combined_metrics):
    that lane's metric first (the calibration is shrunk towards it), then every metric named
    for its criterion, in order (``combined_metrics_of``); () when the study names none for it
    (its lane's metric alone, or human only). ValueError naming a metric the study does not have."""
    return tuple(metric_label_source(study, metric) for metric in combined_metrics_of(study, lane))


# (study id, created_at, combined_metrics, study metric id, criteria) -> one tuple of metrics per
# lane: a close and every submit of a study that combines metrics ask (protocol_state).
_combined: ProcessCache[tuple[tuple[Metric, ...], ...]] = ProcessCache()


def combined_metrics_of(study: Study, lane: int = 0) -> tuple[Metric, ...]:
    """The metrics ``combined_label_sources`` reads, in its order; read once per process and
    study setup. ValueError naming a metric the study does not have."""
    def load() -> tuple[tuple[Metric, ...], ...]:
        lanes = []
        for index, names in enumerate(combined_names(study)):
            if not names:
                lanes.append(())
                continue
            by_name = {m.name: m for m in Metric.objects.filter(study_id=study.pk, name__in=names)}
            missing = [name for name in names if name not in by_name]
            if missing:
                raise ValueError(f"study {study.slug!r} combines metric {missing[0]!r}, which it does not have")
            first = lane_metrics(study)[index]
            lanes.append(tuple(([first] if first is not None else [])
                               + [by_name[n] for n in names if first is None or n != first.name]))
        return tuple(lanes)

    return _combined.get((study.pk, study.created_at, study.combined_metrics, study.metric_id, repr(study.criteria)),
                         load)[lane]
