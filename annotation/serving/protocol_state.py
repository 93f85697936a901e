"""The one codec between PairState rows and ``protocol.adaptive`` / ``protocol.rubric`` state.

Nothing else reads or writes ``PairState.state``, ``PairState.criteria_state`` or the columns
that mirror them. A study's protocol is a ``rubric.RubricState``: one lane per criterion of the
study's rubric (annotation/rubrics.py). ``state`` holds the first criterion's lane of the pair,
``criteria_state`` the other lanes and the pair's HITs ({} for one criterion: its HITs are its
judgements); the mirror columns show the pair as serving sees it (status and quota of the
round its lanes share) and the first criterion's decision and theta. Every load
validates (``adaptive.ProtocolState.from_dict`` / ``PairState.from_dict``), every write sets
the JSON and its mirror columns together and bumps the row's ``version``.

The protocol's settings are not stored with the pairs: they are a function of the Study row
(``protocol_settings``). The protocol's budget counts the judgements imported with the bundle
(they seed round 0) on top of the study's budget of live judgements, less the judgements of
excluded workers (``Study.protocol_lost_judgements``).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from types import MappingProxyType

from django.db.models import Count, F, Sum
from django.utils import timezone

from protocol import adaptive, machine, rubric
from protocol.control_variate import calibration_sums, features_of

from . import store
from .metric_labels import (MetricLabelSource, combined_metrics_of, lane_label_sources, lane_metrics,
                            metric_label_source)
from .process_cache import ProcessCache
from ..models import PairState, PairStateHistory, Study, System
from ..rubrics import study_rubric

# The close's columns (PairState.hits, log_e_value, cv_*, level_*): what a round close reads of
# the pairs it does not decode, as SQL sums and a filter (study_close_snapshot).
MOMENT_COLUMNS = ("cv_n", "cv_s", "cv_m", "cv_ss", "cv_mm", "cv_sm")
LEVEL_COLUMNS = ("level_k", "level_xx", "level_xm", "level_mm", "level_v")
CLOSE_COLUMNS = ("hits", "log_e_value", *MOMENT_COLUMNS, *LEVEL_COLUMNS, "lanes_close", "calibration")
MIRRORED_COLUMNS = ("state", "criteria_state", "status", "decision", "theta", "round", "quota_left", "version",
                    "updated_at", *CLOSE_COLUMNS)


def decision_options(study: Study) -> dict:
    """The ProtocolSettings fields that make the study's decision rule (policy, rule, looks,
    family control across pairs): the protocol run by the app and the planner's replays both
    take them from here, so a plan simulates the rule the study decides with."""
    return {"policy": study.allocation_policy, "rule": study.protocol_rule, "strict": study.protocol_strict,
            "family": study.family_control, "futility": study.futility, "futility_prior": study.futility_prior}


def protocol_settings(study: Study) -> adaptive.ProtocolSettings:
    """The protocol's settings, derived from the study (the one place they are stated)."""
    return adaptive.ProtocolSettings(
        # Judgements of excluded workers stay spent (services/quality.py): they leave the
        # protocol's counts and its budget together.
        budget=study.budget + study.protocol_imported_judgements - study.protocol_lost_judgements,
        batch=study.batch_size,
        gamma=study.decision_level,
        seed=study.protocol_seed,
        **decision_options(study),
    )


def _parsed_pair(data: dict, labels_of: Callable[[str, str], dict[str, int]] | None,
                 label_of: Callable[[str, str, str], int | None] | None = None) -> adaptive.PairState:
    """One lane's pair from its stored JSON, with the metric's labels of the pair computed by
    ``labels_of(first, second)`` on first use (None: a human-only lane), and one item's by
    ``label_of(first, second, item)`` while they are not (a submit's). JSON stored before the
    labels were left out still holds them: the source's are the same, computed by the same formula."""
    if labels_of is None:
        return adaptive.PairState.from_dict(data, metric=EMPTY_LABELS)
    first, second = str(data.get("first")), str(data.get("second"))
    one = None if label_of is None else (lambda item: label_of(first, second, item))
    return adaptive.PairState.from_dict(data, metric=adaptive.LazyLabels(lambda: labels_of(first, second), one))


def _source_labels(source: MetricLabelSource | None) -> tuple[Callable | None, Callable | None]:
    """``_parsed_pair``'s label functions of a lane's metric source (None, None: human-only)."""
    return (None, None) if source is None else (source.pair, source.label)


EMPTY_LABELS = MappingProxyType({})


def start_labels(study: Study, keys: list[tuple[str, str]]) -> tuple[dict, dict]:
    """What a start needs of each lane's metric for ``keys`` (pairs, canonical order): criterion ->
    (first, second) -> the pair's labels as a ``LazyLabels`` (computed from the scores by the
    formula the codec reads them with, when the pair first needs an item's label), and
    criterion -> (first, second) -> (n+, n=, n-), counted from the scores in one vectorised
    pass (``MetricLabelSource.counts``); None for a human-only lane. Nothing per (pair, item)
    is built: 40 M labels at 200 systems x 2,000 items (rubric.start's ``metrics`` and ``counts``)."""
    metrics: dict = {}
    counts: dict = {}
    for name, source in zip(_criteria_names(study), lane_label_sources(study)):
        if source is None:
            metrics[name] = counts[name] = None
            continue
        metrics[name] = {(first, second): adaptive.LazyLabels(functools.partial(source.pair, first, second))
                         for first, second in keys}
        counts[name] = dict(zip(keys, source.counts(keys).tolist()))
    return metrics, counts


def _require_state(row: PairState) -> None:
    if not row.state:
        raise ValueError(f"pair {row.pk} of study {row.study_id} has no protocol state (protocol not started)")


def pair_state_of(study: Study, row: PairState) -> adaptive.PairState:
    """The first criterion's protocol state of one pair row (validated); ValueError when the row
    holds none."""
    _require_state(row)
    metric = lane_metrics(study)[0]
    if metric is None:
        return _parsed_pair(row.state, None)
    # A reader of one pair (its page) rarely needs the labels, and then only this pair's: the
    # study's scores are not read for it (metric_label_source with ``systems``).
    return _parsed_pair(row.state, lambda first, second: metric_label_source(
        study, metric, systems=(first, second)).pair(first, second))


def pair_hits_of(study: Study, row: PairState) -> int:
    """HITs the pair's protocol has recorded (every lane of a rubric counts a HIT once)."""
    if row.criteria_state:
        return int(row.criteria_state["hits"])
    _require_state(row)
    return int(row.state["judgements"])


def _lane_pairs(study: Study, row: PairState, names: tuple[str, ...]) -> tuple[tuple[adaptive.PairState, ...], int]:
    """The pair in every lane (one per criterion name) and its HITs."""
    _require_state(row)
    return _lanes_of(row.state, row.criteria_state, names, lane_label_sources(study),
                     f"pair {row.pk} of study {row.study_id}")


def _lanes_of(state: dict, criteria_state: dict, names: tuple[str, ...], sources: tuple[MetricLabelSource | None, ...],
              where: str) -> tuple[tuple[adaptive.PairState, ...], int]:
    """_lane_pairs from the row's two JSON columns (``where`` names the row in errors)."""
    first = _parsed_pair(state, *_source_labels(sources[0]))
    if len(names) == 1:
        return (first,), first.judgements
    lanes = (criteria_state or {}).get("lanes", {})
    missing = [name for name in names[1:] if name not in lanes]
    if missing:
        raise ValueError(f"{where} has no protocol state for criterion {missing[0]!r}")
    return (first, *(_parsed_pair(lanes[name], *_source_labels(source)) for name, source in zip(names[1:], sources[1:]))), \
        int(criteria_state["hits"])


def _criteria_names(study: Study) -> tuple[str, ...]:
    return tuple(c.name for c in study_rubric(study))


def pair_lanes_of(study: Study, row: PairState) -> dict[str, adaptive.PairState]:
    """criterion -> the pair's protocol state in that criterion's lane (validated), for readers."""
    names = _criteria_names(study)
    return dict(zip(names, _lane_pairs(study, row, names)[0]))


def label_sources_ready(study: Study) -> None:
    """Load the study's metric label sources into this process if it holds them not yet (they
    are kept: ``metric_labels``). Call before taking a pair's lock to decode its state: the
    first load reads every score of the study (docs/benchmarks.md), and under the lock it
    would hold the pair, and on SQLite every writer, while it reads."""
    lane_label_sources(study)
    for lane in range(len(_criteria_names(study))):
        combined_sources(study, lane)  # a submit writes the pair's calibration sums (pair_write)


def pair_rubric_of(study: Study, row: PairState) -> rubric.RubricState:
    """The protocol state of one pair row in every lane (validated), as a one-pair rubric: what
    a submit records into (call holding the pair's lock, after ``label_sources_ready``)."""
    names = _criteria_names(study)
    pairs, hits = _lane_pairs(study, row, names)
    settings = protocol_settings(study)
    return rubric.RubricState(names, tuple(adaptive.ProtocolState(settings, (p,), study.protocol_closes)
                                           for p in pairs), (hits,))


def _rubric_from(study: Study, names: tuple[str, ...], lanes_by_pair: list[tuple[tuple, int]], *,
                 outside: tuple[adaptive.Outside, ...] | None = None) -> rubric.RubricState:
    """A study's rubric state from each pair's lanes and HITs, pairs in canonical order;
    ``outside``: for a partial state, each lane's totals of the pairs left out (C,)."""
    lanes_by_pair = sorted(lanes_by_pair, key=lambda entry: entry[0][0].key)
    settings = protocol_settings(study)
    lanes = tuple(adaptive.ProtocolState.from_pairs(settings, [pairs[c] for pairs, _ in lanes_by_pair],
                                                    study.protocol_closes, None if outside is None else outside[c])
                  for c in range(len(names)))
    return rubric.RubricState(names, lanes, tuple(hits for _, hits in lanes_by_pair))


def pair_row_save(row: PairState, *, leases_change: int = 0) -> None:
    """Write back a row (locked by ``store.pair_row_locked``) that ``pair_write`` filled: its
    JSON, mirror columns and version, and its live-lease counter moved by ``leases_change``."""
    store.pair_save(row, MIRRORED_COLUMNS, leases_change=leases_change)


def study_state_load(study: Study, rows: Iterable[PairState]) -> adaptive.ProtocolState:
    """The first criterion's protocol state (every study has one; a rubric's other lanes:
    ``study_rubric_load``), validated: for readers."""
    return study_rubric_load(study, rows).primary


def study_rubric_load(study: Study, rows: Iterable[PairState]) -> rubric.RubricState:
    """The whole protocol state, every lane, from the study row and all its pair rows (validated).

    ``rows``: every PairState of the study, e.g. locked with ``select_for_update`` by a caller
    that will write back with ``study_state_save``.
    """
    rows = list(rows)
    if not rows or not all(row.state for row in rows):
        raise ValueError(f"study {study.slug!r} has pairs without protocol state (protocol not started)")
    names = _criteria_names(study)
    return _rubric_from(study, names, [_lane_pairs(study, row, names) for row in rows])


# Pairs already parsed by this process, by row id: ((version, study created_at), pair). A round
# close reads the whole study, but between two closes only the pairs judged since have moved
# (every write bumps the version), so the others are neither fetched (their JSON) nor parsed
# again. The study's created_at is part of the key because a row id can come back after a
# rolled-back import (SQLite) -- with another study row, created anew.
_parsed: dict[int, tuple[tuple, tuple[tuple[adaptive.PairState, ...], int]]] = {}
PARSED_MAX = 50_000


def study_state_snapshot(study: Study) -> tuple[dict[tuple[str, str], tuple[int, int]], rubric.RubricState] | None:
    """The whole protocol state (validated) and each pair's (row id, version) it was read at, or
    None when no pair's round is filled (nothing to close). No lock: for a caller that writes
    back compare-and-set on the versions (services/runtime.rounds_close).

    Asks whether any round is filled (the serving index answers), then reads every row's
    version, then the JSON of the rows this process has not parsed at that version yet.
    """
    # Most closes scheduled by a burst of fills find them closed by the first (another thread
    # or process): that one costs an index probe, not a read of every pair.
    if not PairState.objects.filter(study=study, status=adaptive.FILLED).exists():
        return None
    names = _criteria_names(study)
    read = _pairs_decoded(study, list(PairState.objects.filter(study=study).values_list("pk", "version")), names)
    state = _rubric_from(study, names, [entry for _, entry in read.values()])
    return _read_at(read), state


def _pairs_decoded(study: Study, heads: list[tuple[int, int]], names: tuple[str, ...]) -> dict[int, tuple]:
    """Row id -> ((version, study created_at), (lanes, HITs)) of the rows ``heads`` names by
    (row id, version): parsed by this process at that version already, or read and parsed now
    (and kept, ``_parsed``); a row that moved since its head was read: its newer version."""
    sources = lane_label_sources(study)
    stale = [pk for pk, version in heads if _parsed.get(pk, (None,))[0] != (version, study.created_at)]
    if len(_parsed) + len(stale) > PARSED_MAX:
        _parsed.clear()
    for pk, version, blob, lanes in (PairState.objects.filter(pk__in=stale).values_list(
            "pk", "version", "state", "criteria_state")):
        if not blob:
            raise ValueError(f"study {study.slug!r} has pairs without protocol state (protocol not started)")
        _parsed[pk] = ((version, study.created_at), _lanes_of(blob, lanes, names, sources,
                                                              f"pair {pk} of study {study.slug!r}"))
    read = {pk: _parsed[pk] for pk, _ in heads}
    if any(len(lanes) != len(names) for _, (lanes, _) in read.values()):
        _parsed.clear()
        raise ValueError(f"study {study.slug!r}: a cached pair has other criteria than the study; read it again")
    return read


def _read_at(read: dict[int, tuple]) -> dict[tuple[str, str], tuple[int, int]]:
    """(first, second) -> (row id, version) of ``_pairs_decoded``'s rows: what a close's
    compare-and-set checks."""
    return {entry[0][0].key: (pk, version) for pk, ((version, _), entry) in read.items()}


def close_reads_some(study: Study) -> bool:
    """Does a round close of the study read only the pairs it closes or opens, with totals of the
    others (``study_close_snapshot``)? Yes under a design that asks for no pairs after a close
    (one criterion or a rubric's several: each lane's totals), or for one criterion only for
    pairs with labels and a few it names (``PairDesign.advances_from_labelled``: the active
    design, the merge sort; with combined metrics too: the pairs it leaves out have no
    judgement, so their calibration sums are zero), and under a family rule that reads
    e-values (the boundary rule's reads each pair's crossing); otherwise the close reads every
    pair (``study_state_snapshot``)."""
    design = study.design
    return ((not design.advances or (design.advances_from_labelled and len(_criteria_names(study)) == 1))
            and study.protocol_rule != adaptive.BOUNDARY)


def combined_sources(study: Study, lane: int = 0) -> tuple[MetricLabelSource, ...]:
    """The label sources lane ``lane`` combines (``metric_labels.combined_label_sources``;
    read once per process and study setup)."""
    return tuple(metric_label_source(study, metric) for metric in combined_metrics_of(study, lane))


def _combined_names(study: Study) -> tuple[tuple[str, ...], ...]:
    """Each lane's metrics combined, by name (() for a lane that combines none): what a row's
    ``calibration`` entry was summed for."""
    return tuple(tuple(m.name for m in combined_metrics_of(study, lane)) for lane in range(len(_criteria_names(study))))


def _pair_calibration(pair: adaptive.PairState, sources: tuple[MetricLabelSource, ...]) -> list[int]:
    """One lane's x'x (q x q, row by row) then x'y (q,) of the pair's judged items
    (``control_variate.calibration_sums`` over the features ``runtime.metrics_combined``
    builds, restricted to those items): integers, as the labels are."""
    q = len(sources)
    judged = machine.pair_judged(pair)
    if not judged:
        return [0] * (q * q + q)
    items = sorted(judged)
    features = features_of([{pair.key: source.pair(*pair.key, items=items)} for source in sources]).get(pair.key, {})
    gram, moment = calibration_sums(features, judged, q)
    return [int(v) for v in (*gram.ravel().tolist(), *moment.tolist())]


def _calibration_of(study: Study, criteria: tuple[str, ...], pairs: tuple[adaptive.PairState, ...]) -> dict:
    """A pair's ``calibration`` column: criterion -> [the metrics combined, its lane's sums]
    for every lane that combines metrics ({} when none does)."""
    out = {}
    for lane, (name, pair) in enumerate(zip(criteria, pairs)):
        metrics = combined_metrics_of(study, lane)
        if metrics:
            out[name] = [[m.name for m in metrics], _pair_calibration(pair, combined_sources(study, lane))]
    return out


_TOTALS = {"pairs": Count("id"), "used": Sum(F("hits") + F("quota_left")),
           **{column: Sum(column) for column in (*MOMENT_COLUMNS, *LEVEL_COLUMNS)}}
_ROW_TOTALS = ("hits", "quota_left", *MOMENT_COLUMNS, *LEVEL_COLUMNS)
_MOMENTS = slice(2, 2 + len(MOMENT_COLUMNS))  # of _ROW_TOTALS
_LEVELS = slice(_MOMENTS.stop, _MOMENTS.stop + len(LEVEL_COLUMNS))

# The close's totals by group of pairs (the pairs of one first system), as this process last
# summed them: (study id, created_at, criteria, family floor, metrics combined) -> first system
# id -> (the group's sum of row versions, its _TOTALS, and when summed in Python every lane's
# ``_LaneTotals``). Every write of a pair's close columns bumps its version and no version goes
# down, so a group whose version sum is unchanged holds the totals summed then; a close sums
# the version of every pair (one column of the totals index) and the totals of the groups that
# moved only. Summing all eight columns of 19,900 pairs was 3.8 ms of a close at 200 systems.
_group_totals: ProcessCache[dict[int, tuple[int, dict, dict]]] = ProcessCache()

# Exact sums of floats: every finite double is an integer multiple of 2^-1074, so as integers in
# those units they add exactly. The moments of calibrated predictions are no integers, and the
# close over every pair adds them exactly (machine.study_moments), so the totals a partial close
# takes of the others must be exact too, not SQL's float SUM in the order the rows come.
_EXACT_SHIFT = 1074
_EXACT_ONE = 1 << _EXACT_SHIFT


def _exact(value: float) -> int:
    """``value`` in units of 2^-1074, exactly."""
    numerator, denominator = float(value).as_integer_ratio()
    return numerator << (_EXACT_SHIFT + 1 - denominator.bit_length())


def _expansion(total: int) -> tuple[float, ...]:
    """Floats whose exact sum is ``total`` (units of 2^-1074), largest first (``Outside.moments``)."""
    parts = []
    while total:
        part = total / _EXACT_ONE  # correctly rounded
        parts.append(part)
        total -= _exact(part)
    return tuple(parts) or (0.0,)


class _LaneTotals:
    """One lane's totals over some pairs when summed in Python: its control-variate moments and
    level-prior sums, each summed exactly (6 and 5, units of 2^-1074: the first lane's from the
    ``cv_*`` and ``level_*`` columns, a rubric's other lanes' from ``lanes_close``), (row id, log
    e-value) of the pairs whose e-value is at least the family's floor (the other lanes; the first
    lane's are read through an index), and for a lane that combines metrics its calibration sums
    (``calibration``)."""

    __slots__ = ("moments", "levels", "high", "calibration")

    def __init__(self) -> None:
        self.moments = [0] * 6
        self.levels = [0] * 5
        self.high: list[tuple[int, float]] = []
        self.calibration: list[int] | None = None

    def add(self, pk: int, close: list, floor: float) -> None:
        """Add one pair's ``lanes_close`` entry of the lane: [log e (None: e = 0), n, s, m, ss, mm,
        sm, level k, xx, xm, mm, v] (an entry written before the level prior has no level sums:
        its study runs without the prior)."""
        self.add_moments(close[1:7])
        self.add_levels(close[7:12] or (0.0,) * 5)
        if close[0] is not None and close[0] >= floor:
            self.high.append((pk, close[0]))

    def add_moments(self, moments) -> None:
        for j in range(6):
            self.moments[j] += _exact(moments[j])

    def add_levels(self, levels) -> None:
        for j in range(5):
            self.levels[j] += _exact(levels[j])

    def add_calibration(self, sums: list[int], sign: int = 1) -> None:
        if self.calibration is None:
            self.calibration = [0] * len(sums)
        self.calibration = [a + sign * b for a, b in zip(self.calibration, sums)]

    def merged(self, other: "_LaneTotals") -> None:
        self.moments = [a + b for a, b in zip(self.moments, other.moments)]
        self.levels = [a + b for a, b in zip(self.levels, other.levels)]
        self.high += other.high
        if other.calibration is not None:
            self.add_calibration(other.calibration)


def _lane_close(pair: adaptive.PairState, settings: adaptive.ProtocolSettings) -> list:
    """A rubric lane's entry of the pair's ``lanes_close``: what a close reads of it when it does
    not decode the pair (as the first lane's ``log_e_value`` and ``cv_*`` columns)."""
    log_e = adaptive.pair_log_e_value(pair, settings)
    moments = machine.pair_moments(pair)
    return [None if log_e == -math.inf else log_e, moments.n, moments.s, moments.m, moments.ss, moments.mm,
            moments.sm, *machine.pair_level_sums(pair)]


def _summed_in_python(study: Study) -> bool:
    """Are the close's totals summed in Python from the rows (a rubric's other lanes, or a study
    that combines metrics: exact moments and the calibration sums), not in SQL?"""
    return len(_criteria_names(study)) > 1 or bool(study.combined_metrics.strip())


def _stored_calibration(stored: dict, name: str, metrics: tuple[str, ...]) -> list[int] | None:
    """A row's calibration sums of lane ``name`` when they were summed for ``metrics`` (None:
    written before, or for other metrics: ``_calibration_of`` sums them from its state)."""
    entry = (stored or {}).get(name)
    return entry[1] if entry is not None and tuple(entry[0]) == metrics else None


def _groups_summed(rows, names: tuple[str, ...], combined: tuple[tuple[str, ...], ...], floor: float
                   ) -> tuple[dict[int, tuple[int, dict, dict]], list[tuple[int, int, int]]]:
    """The moved groups summed in Python from their rows (first_id, pk, version, *_ROW_TOTALS,
    lanes_close, calibration), read by one statement so that each group's version sum and
    totals are of one snapshot: first id -> (version sum, _TOTALS' pairs and used, criterion
    -> _LaneTotals), and the (first id, row id, version) of the rows whose calibration sums are
    not stored for the metrics combined now (to be summed from their state)."""
    groups: dict[int, tuple[list, dict, dict]] = {}
    stale = []
    for first, pk, version, hits, quota, *rest in rows:
        moments, levels, lanes_close, calibration = rest[:6], rest[6:11], rest[11], rest[12]
        versions, totals, lanes = groups.setdefault(first, ([0], {"pairs": 0, "used": 0},
                                                            {name: _LaneTotals() for name in names}))
        versions[0] += version
        totals["pairs"] += 1
        totals["used"] += hits + quota
        lanes[names[0]].add_moments(moments)
        lanes[names[0]].add_levels(levels)
        for name in names[1:]:
            lanes[name].add(pk, lanes_close[name], floor)
        for name, metrics in zip(names, combined):
            if metrics:
                sums = _stored_calibration(calibration, name, metrics)
                if sums is None:
                    stale.append((first, pk, version))
                else:
                    lanes[name].add_calibration(sums)
    return {first: (versions[0], totals, lanes) for first, (versions, totals, lanes) in groups.items()}, stale


def _row_calibration(study: Study, names: tuple[str, ...], combined: tuple[tuple[str, ...], ...], stored: dict,
                     lanes: tuple[adaptive.PairState, ...]) -> dict[str, list[int]]:
    """A decoded row's calibration sums by lane (that combines metrics): stored, or from its state."""
    out = {}
    for lane, (name, metrics) in enumerate(zip(names, combined)):
        if metrics:
            sums = _stored_calibration(stored, name, metrics)
            out[name] = sums if sums is not None else _pair_calibration(lanes[lane], combined_sources(study, lane))
    return out


def _study_totals(study: Study) -> tuple[dict, dict[str, _LaneTotals]]:
    """``_TOTALS`` over every pair of the study (one criterion, no metrics combined: summed in
    SQL), or their count and budget used and every lane's ``_LaneTotals`` (summed in Python from
    the rows: ``_summed_in_python``); each group's read again only when its version sum moved
    since this process last read it. One statement reads every group's version sum, one more the
    totals of the groups that moved (each with its version sum, from the same snapshot, so what
    is kept is consistent); rows whose calibration sums are stale are decoded to sum them."""
    names = _criteria_names(study)
    combined = _combined_names(study)
    floor = machine.family_floor(protocol_settings(study))
    groups = _group_totals.get((study.pk, study.created_at, names, floor, combined), dict)
    pairs = PairState.objects.filter(study=study)
    versions = dict(pairs.values("first_id").annotate(versions=Sum("version")).values_list("first_id", "versions"))
    moved = [first for first, total in versions.items() if groups.get(first, (None,))[0] != total]
    python = _summed_in_python(study)
    if moved and not python:
        for row in pairs.filter(first_id__in=moved).values("first_id").annotate(versions=Sum("version"), **_TOTALS):
            groups[row.pop("first_id")] = (row.pop("versions"), row, {})
    elif moved:
        summed, stale = _groups_summed(pairs.filter(first_id__in=moved).values_list(
            "first_id", "pk", "version", *_ROW_TOTALS, "lanes_close", "calibration"), names, combined, floor)
        if stale:
            read = _pairs_decoded(study, [(pk, version) for _, pk, version in stale], names)
            for first, pk, _ in stale:
                pair_lanes = read[pk][1][0]
                for lane, (name, metrics) in enumerate(zip(names, combined)):
                    if metrics:
                        summed[first][2][name].add_calibration(
                            _pair_calibration(pair_lanes[lane], combined_sources(study, lane)))
        groups.update(summed)
    if not python:
        totals = dict.fromkeys(_TOTALS, 0)
        for first in versions:
            for name, value in groups[first][1].items():
                totals[name] += value or 0
        return totals, {}
    totals = {"pairs": 0, "used": 0}
    lanes = {name: _LaneTotals() for name in names}
    for first in versions:
        _, group, group_lanes = groups[first]
        totals["pairs"] += group["pairs"]
        totals["used"] += group["used"]
        for name, lane in group_lanes.items():
            lanes[name].merged(lane)
    return totals, lanes


def study_close_snapshot(study: Study) -> tuple[dict[tuple[str, str], tuple[int, int]], rubric.RubricState] | None:
    """What a round close reads: ``study_state_snapshot``'s (row id, version) per pair read and
    the state, or None when no pair's round is filled. For a study whose close reads only some
    pairs (``close_reads_some``) the state is partial: the pairs whose rounds are filled, and
    the waiting pairs when the budget has judgements left to open rounds with, with totals of
    the others (``adaptive.Outside``: their count, judgements used and control-variate moments
    summed by group of pairs, ``_study_totals``, the e-values of those that may pass the family
    rule's bar, read through an index, and for a study that combines metrics each lane's
    calibration sums; a rubric's other lanes each their own ``Outside``, from the rows'
    ``lanes_close``). No lock: for a caller that writes back compare-and-set on the versions.

    The totals are read before the rows decoded, which are subtracted from them, so the study's
    totals are the ones the totals' statements read (each group's as of the version sums, or of
    the statement that summed it again): the only rows that move meanwhile, open pairs taking a
    submit, leave the budget as read (a submit moves a judgement from quota to hits) and the
    moments as of those statements; a pair that fills after the filled rows were read is closed
    by the next pass.
    """
    if not close_reads_some(study):
        return study_state_snapshot(study)
    if not PairState.objects.filter(study=study, status=adaptive.FILLED).exists():
        return None
    if study.design.advances_from_labelled:
        return _labelled_close_snapshot(study)
    settings = protocol_settings(study)
    pairs = PairState.objects.filter(study=study)
    totals, lane_totals = _study_totals(study)
    columns = ("pk", "version", "state", "criteria_state", *_ROW_TOTALS, "lanes_close", "calibration")
    read = list(pairs.filter(status=adaptive.FILLED).values_list(*columns))
    if settings.budget - (totals["used"] or 0) > 0:
        # rounds may open: every waiting pair asks (closes never move a waiting pair's counters)
        read += pairs.filter(status=adaptive.WAITING).values_list(*columns)
    family = pairs.filter(log_e_value__gte=machine.family_floor(settings)).values_list("pk", "log_e_value")
    decoded = {pk for pk, *_ in read}
    names = _criteria_names(study)
    combined = _combined_names(study)
    sources = lane_label_sources(study)
    entries, read_at = [], {}
    read_lanes = {name: _LaneTotals() for name in names}  # the decoded rows' share of lane_totals
    for pk, version, blob, lanes, *rest in read:
        if not blob:
            raise ValueError(f"study {study.slug!r} has pairs without protocol state (protocol not started)")
        entry = _lanes_of(blob, lanes, names, sources, f"pair {pk} of study {study.slug!r}")
        entries.append(entry)
        read_at[entry[0][0].key] = (pk, version)
        if lane_totals:
            lanes_close, calibration = rest[-2], rest[-1]
            read_lanes[names[0]].add_moments(rest[_MOMENTS])
            read_lanes[names[0]].add_levels(rest[_LEVELS])
            for name in names[1:]:
                read_lanes[name].add(pk, lanes_close[name], -math.inf)
            for name, sums in _row_calibration(study, names, combined, calibration, entry[0]).items():
                read_lanes[name].add_calibration(sums)
    sums = [sum(row[4 + j] for row in read) for j in range(len(_ROW_TOTALS))]
    used = (totals["used"] or 0) - sums[0] - sums[1]
    if not lane_totals:  # summed in SQL
        outside = [adaptive.Outside(
            pairs=totals["pairs"] - len(read),
            log_e_values=tuple(sorted(value for pk, value in family if pk not in decoded)),
            used=used,
            moments=tuple((totals[column] or 0.0) - total
                          for column, total in zip(_ROW_TOTALS[_MOMENTS], sums[_MOMENTS])),
            levels=tuple((totals[column] or 0.0) - total for column, total in zip(_ROW_TOTALS[_LEVELS], sums[_LEVELS])))]
        return read_at, _rubric_from(study, names, entries, outside=tuple(outside))
    outside = []
    for lane, name in enumerate(names):
        # each lane its own family, moments and calibration; the budget shared (HITs)
        high = [(pk, value) for pk, value in family] if lane == 0 else lane_totals[name].high
        left_out = lane_totals[name].calibration
        outside.append(adaptive.Outside(
            pairs=totals["pairs"] - len(read),
            log_e_values=tuple(sorted(value for pk, value in high if pk not in decoded)),
            used=used,
            moments=tuple(_expansion(a - b) for a, b in zip(lane_totals[name].moments, read_lanes[name].moments)),
            levels=tuple(_expansion(a - b) for a, b in zip(lane_totals[name].levels, read_lanes[name].levels)),
            calibration=None if not combined[lane] else _left_out(left_out, read_lanes[name].calibration,
                                                                  len(combined[lane]))))
    return read_at, _rubric_from(study, names, entries, outside=tuple(outside))


def _left_out(total: list[int] | None, decoded: list[int] | None, q: int) -> tuple[float, ...]:
    """A lane's calibration sums of the pairs a partial close leaves out: the study's less the
    decoded rows' (integers: exact as floats below 2^53)."""
    zeros = [0] * (q * q + q)
    return tuple(float(a - b) for a, b in zip(total or zeros, decoded or zeros))


# The rows a design that advances from the labelled pairs leaves out of a close: parked, no HIT.
# The codec writes a quota only with an open round and a control-variate moment only for a
# judged item, so such a row takes nothing of the budget and adds no moment. The others are
# read as two index searches (SQLite walked every row of the study for the two conditions
# OR-ed in one filter: 5.1-5.7 ms of CPU at 19,900 rows against 0.5-0.6 ms,
# scripts/bench/active_close_reads.py).
_NOT_PARKED = tuple(status for status in adaptive.STATUSES if status != adaptive.PARKED)


def _labelled_close_snapshot(study: Study) -> tuple[dict[tuple[str, str], tuple[int, int]], rubric.RubricState]:
    """``study_close_snapshot`` under a design that advances from the labelled pairs
    (``PairDesign.advances_from_labelled``): every pair with a HIT or not parked (on SQLite
    from two indexes, ``pair_state_totals_idx`` and ``pair_state_serving_idx``), decoded as
    ``study_state_snapshot`` decodes (parsed once per version); the others, parked with no HIT,
    as ``adaptive.Outside`` (their count, and the e-values that may pass the family's bar: none
    unless a rebuild left one). The design reads the few others it needs with
    ``study_pairs_read``."""
    settings = protocol_settings(study)
    pairs = PairState.objects.filter(study=study)
    names = _criteria_names(study)
    heads = dict(pairs.filter(hits__gt=0).values_list("pk", "version"))
    heads.update(pairs.filter(status__in=_NOT_PARKED).values_list("pk", "version"))
    read = _pairs_decoded(study, list(heads.items()), names)
    family = pairs.filter(log_e_value__gte=machine.family_floor(settings)).values_list("pk", "log_e_value")
    # A pair left out (parked, no HIT) has no judged item, nor has one read later through
    # study_pairs_read (checked there): its calibration sums are zero (_pair_calibration).
    q = len(combined_sources(study)) if study.combined_metrics.strip() else 0
    outside = adaptive.Outside(pairs=len(_study_pair_ids(study)) - len(read),
                               log_e_values=tuple(sorted(value for pk, value in family if pk not in read)),
                               calibration=(0.0,) * (q * q + q) if q else None)
    state = _rubric_from(study, names, [entry for _, entry in read.values()], outside=(outside,))
    return _read_at(read), state


# A study's pair rows' ids by their systems' names, read once per process (a study's pair rows
# are made by its import, never added or removed): the close names the neighbours it lacks by
# their names, and a filter OR-ing up to k - 1 (first, second) conditions was 380 ms of ORM and
# SQLite per read at 200 systems, the largest part of such a close (--profile-close); and its
# size is the study's count of pairs.
_pair_ids: ProcessCache[dict[tuple[str, str], int]] = ProcessCache()


def _study_pair_ids(study: Study) -> dict[tuple[str, str], int]:
    """(first, second) names -> the pair row's id, every pair of the study (``_pair_ids``)."""
    return _pair_ids.get((study.pk, study.created_at), lambda: dict(
        ((first, second), pk) for pk, first, second in PairState.objects.filter(study=study).values_list(
            "pk", "first__name", "second__name")))


class PairsMoved(Exception):
    """A pair a close asked for (``study_pairs_read``) is no longer parked with no HIT: the
    snapshot it would join is stale (a re-decision opened it meanwhile); read a new one."""


def study_pairs_read(study: Study, keys: list[tuple[str, str]]) -> tuple[dict[tuple[str, str], tuple[int, int]],
                                                                         list[adaptive.PairState]]:
    """The pairs ``keys`` (canonical (first, second) names) that a labelled close snapshot left
    out, decoded, with each one's (row id, version) for the close's compare-and-set; PairsMoved
    when one of them is no longer parked with no HIT."""
    ids = _study_pair_ids(study)
    heads = list(PairState.objects.filter(pk__in=[ids[key] for key in keys], status=adaptive.PARKED, hits=0)
                 .values_list("pk", "version"))
    if len(heads) != len(keys):
        raise PairsMoved(f"study {study.slug!r}: {len(keys) - len(heads)} of the {len(keys)} pairs asked for moved")
    read = _pairs_decoded(study, heads, _criteria_names(study))
    pairs = [entry[0][0] for _, entry in read.values()]
    if any(pair.status != adaptive.PARKED or pair.judgements for pair in pairs):
        raise PairsMoved(f"study {study.slug!r}: a pair asked for moved after its version was read")
    return _read_at(read), pairs


def pair_write(study: Study, row: PairState, state: rubric.RubricState, index: int = 0) -> None:
    """Put pair ``index`` of ``state`` into ``row`` (JSON and mirror columns) and bump its
    version; no save. ``study``: the row's (its metrics combined, for ``calibration``)."""
    pairs = state.lane_pairs(index)
    first = pairs[0]
    # The metric's labels are not stored: the codec computes them from the scores (metric_labels).
    row.state = first.to_dict(with_metric=False)
    row.criteria_state = {} if len(pairs) == 1 else {
        "hits": state.hits[index],
        "lanes": {name: pair.to_dict(with_metric=False) for name, pair in zip(state.criteria[1:], pairs[1:])}}
    row.status = state.status(index)
    row.decision = first.decision
    row.theta = first.theta[-1] if first.theta else None
    row.round = max(pair.round for pair in pairs)
    row.quota_left = state.quota(index)
    row.hits = state.hits[index]
    log_e = adaptive.pair_log_e_value(first, state.settings)
    row.log_e_value = None if log_e == -math.inf else log_e  # e = 0: null
    moments = machine.pair_moments(first)
    row.cv_n, row.cv_s, row.cv_m, row.cv_ss, row.cv_mm, row.cv_sm = (
        moments.n, moments.s, moments.m, moments.ss, moments.mm, moments.sm)
    row.level_k, row.level_xx, row.level_xm, row.level_mm, row.level_v = machine.pair_level_sums(first)
    row.lanes_close = {name: _lane_close(pair, state.settings) for name, pair in zip(state.criteria[1:], pairs[1:])}
    row.calibration = _calibration_of(study, state.criteria, pairs) if study.combined_metrics.strip() else {}
    row.version += 1
    # every write of a pair's state goes through here (a submit, a close, a re-decision), and
    # the stores write the mirrored columns as set (no auto_now): a close left it as it was
    row.updated_at = timezone.now()


def study_state_save(
    study: Study,
    rows: Iterable[PairState],
    state: rubric.RubricState,
    *,
    before: rubric.RubricState,
    closed: rubric.RubricState | None = None,
) -> list[PairState]:
    """Write the pairs of ``state`` that differ from ``before``; returns the rows written.

    ``before`` is the state loaded from ``rows`` (not parsed again here); ``rows`` must
    include the row of every pair that differs. Call inside a transaction that holds the
    locks of those rows — or has checked, under the study's lock, that their versions are
    the ones ``before`` was loaded from — and of the study when its closes counter moves.
    ``closed``: the state right after ``close_rounds`` (before new rounds opened) — a history
    row is written for every pair whose first criterion it closed, with the closed round's number.
    """
    by_key = {(row.state.get("first"), row.state.get("second")): row for row in rows if row.state}
    keys = state.keys
    changed, history = [], []
    if closed is not None:
        for index in rubric.changed_pairs(before, closed):
            if len(closed.primary.pairs[index].theta) > len(before.primary.pairs[index].theta):
                history.append(_history_row(by_key[keys[index]], closed.primary.pairs[index]))
    for index in rubric.changed_pairs(before, state):
        row = by_key[keys[index]]
        pair_write(study, row, state, index)
        changed.append(row)
    store.pairs_save(changed, MIRRORED_COLUMNS)
    PairStateHistory.objects.bulk_create(history)
    if study.protocol_closes != state.closes:
        study.protocol_closes = state.closes
        study.save(update_fields=["protocol_closes"])
    return changed


def _history_row(row: PairState, pair: adaptive.PairState) -> PairStateHistory:
    return PairStateHistory(
        pair_state=row, round=pair.round, decision=pair.decision, theta=pair.theta[-1],
        counts={"paired": [list(r) for r in pair.paired], "human_only": list(pair.human_only),
                "metric_only": list(pair.metric_only), "status": pair.status},
        judgements=pair.judgements)


def study_state_first_save(study: Study, rows: Iterable[PairState], state: rubric.RubricState, *,
                           closed: rubric.RubricState | None = None) -> None:
    """Write a freshly started protocol into rows that hold no state yet (and its history);
    ``rows`` need not have their systems loaded (their names are read once here)."""
    names = dict(System.objects.filter(study=study).values_list("pk", "name"))
    by_key = {(names[row.first_id], names[row.second_id]): row for row in rows}
    history = []
    for index, key in enumerate(state.keys):
        row = by_key[key]
        pair_write(study, row, state, index)
        if closed is not None and closed.primary.pairs[index].theta:
            history.append(_history_row(row, closed.primary.pairs[index]))
    store.pairs_save(list(by_key.values()), MIRRORED_COLUMNS)
    PairStateHistory.objects.bulk_create(history)
    study.protocol_closes = state.closes
    study.save(update_fields=["protocol_closes"])
