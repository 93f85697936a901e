"""Reads of the quality screens: which judgements count, the annotator quality table, the
exclusion log."""
from __future__ import annotations

import math

import numpy as np
from django.db.models import Q, QuerySet

from protocol.agreement import agreement
from protocol.quality import QualityThresholds, annotator_quality

from ..models import (
    Annotator,
    AnnotatorExclusion,
    CheckItem,
    ExclusionEvent,
    Judgement,
    JudgementKind,
    PairState,
    Study,
)


def excluded_annotators(*, study: Study) -> QuerySet:
    """Ids of the workers currently excluded from ``study`` (a subquery)."""

    return AnnotatorExclusion.objects.filter(study=study, excluded=True).values("annotator_id")


def counted_judgements(*, study: Study) -> QuerySet[Judgement]:
    """The judgements the protocol counts: real comparisons (no check, no repeat) by workers
    who are not excluded. The one definition for the protocol, decisions, reports, exports'
    counted rows and the budget; a judgement of an excluded worker counts again once they are
    re-included (services/quality.py re-decides)."""

    return (Judgement.objects.filter(comparison__study=study, kind=JudgementKind.REAL)
            .exclude(annotator_id__in=excluded_annotators(study=study)))


def judgement_agreement(*, study: Study, pair: PairState | None = None, bootstrap: int = 1000):
    """Agreement between the annotators of ``study`` (or of one ``pair``): protocol.agreement
    (Krippendorff's α nominal and ordinal with bootstrap intervals over comparisons, percent
    agreement) over the counted judgements of comparisons judged at least twice. A comparison
    is a unit and its annotators are the coders; values −1/0/+1 in the comparison's order."""

    rows = counted_judgements(study=study)
    if pair is not None:
        rows = rows.filter(comparison__pair=pair)
    comparisons, annotators, values = [], [], []
    for comparison, annotator, value in rows.values_list("comparison_id", "annotator_id", "value"):
        comparisons.append(comparison)
        annotators.append(annotator)
        values.append(value)
    return agreement(comparisons, annotators, values, bootstrap=bootstrap, seed=study.protocol_seed)


# Columns of the annotator quality table (dashboard panel, CSV, API), in display order.
QUALITY_COLUMNS = ("annotator", "platform", "judgements", "checks", "median_seconds", "tie_rate", "left_share",
                   "agreement", "overlap", "gold_accuracy", "repeats", "repeat_consistency", "flags", "excluded")


QUALITY_SORTS = {c for c in QUALITY_COLUMNS if c not in ("flags",)} | {"flag_count"}


def study_annotator_quality(*, study: Study, sort: str = "annotator", descending: bool = False,
                            thresholds=None) -> list[dict]:
    """Per worker of ``study``: protocol.quality's statistics and flags (docs/quality.md), with
    whether they are excluded now, one dict per worker sorted by ``sort`` (a QUALITY_SORTS key;
    missing values last either way).

    Over every judgement of the study, checks and repeats included (the statistics tell them
    apart), excluded workers included (so agreement is with everyone who judged). Time on task
    is the server's measure (render to answer) where there is one, else the client's claim.
    """

    if sort not in QUALITY_SORTS:
        raise ValueError(f"cannot sort by {sort!r}; choose one of {', '.join(sorted(QUALITY_SORTS))}")

    rows = list(Judgement.objects.filter(Q(comparison__study=study) | Q(check_item__study=study)).order_by("id")
                .values_list("annotator_id", "comparison_id", "value", "assignment__shown_swapped", "server_seconds",
                             "seconds_on_task", "kind", "check_item_id"))
    if not rows:
        return []
    annotators = [r[0] for r in rows]
    comparisons = [r[1] if r[7] is None else f"check:{r[7]}" for r in rows]
    values = np.array([r[2] for r in rows], dtype=np.int64)
    shown = np.array([-r[2] if r[3] else r[2] for r in rows], dtype=np.int64)
    seconds = np.array([r[4] if r[4] is not None else (r[5] if r[5] is not None else math.nan) for r in rows],
                       dtype=float)
    first_time: dict[tuple[int, int], int] = {}
    repeats = []
    for j, (who, comparison, *_, kind, _check) in enumerate(rows):
        if kind == JudgementKind.REPEAT and (who, comparison) in first_time:
            repeats.append((first_time[(who, comparison)], j))
        elif kind == JudgementKind.REAL:
            first_time.setdefault((who, comparison), j)
    quality = annotator_quality(annotators, comparisons, values, shown, seconds, repeats=repeats or None,
                                gold=_gold_answers(rows, CheckItem), thresholds=thresholds or QualityThresholds())
    names = {pk: (external_id, platform) for pk, external_id, platform in
             Annotator.objects.filter(pk__in=set(annotators)).values_list("id", "external_id", "platform")}
    excluded = set(excluded_annotators(study=study).values_list("annotator_id", flat=True))
    table = []
    for q in quality:
        row = q.as_dict()
        row["annotator_id"] = row.pop("annotator")
        row["annotator"], row["platform"] = names[row["annotator_id"]]
        row["excluded"] = row["annotator_id"] in excluded
        row["flag_count"] = len(row["flags"])
        table.append(row)
    present = [r for r in table if r[sort] is not None]
    present.sort(key=lambda r: (r[sort], r["annotator"]), reverse=descending)
    return present + sorted((r for r in table if r[sort] is None), key=lambda r: r["annotator"])


def _gold_answers(rows, check_model) -> list | None:
    """Per judgement (rows of study_annotator_quality) the answers its check accepts, None for
    other judgements; None when there are no checks."""
    checks = {r[7] for r in rows if r[7] is not None}
    if not checks:
        return None
    accepted = {c.pk: c.accepted for c in check_model.objects.filter(pk__in=checks)}
    return [None if r[7] is None else accepted[r[7]] for r in rows]


def study_exclusion_log(*, study: Study) -> QuerySet:
    """The study's exclusion audit log, newest first, with worker and user."""

    return ExclusionEvent.objects.filter(study=study).select_related("annotator", "user")

def annotator_is_excluded(*, study: Study, annotator: Annotator | int) -> bool:
    """Whether the worker is excluded from ``study`` now (serving asks only when
    ``study.exclusions_active``)."""
    return AnnotatorExclusion.objects.filter(study=study, annotator=annotator, excluded=True).exists()
