"""Quality control writes: excluding and re-including workers, and the re-decision that follows.

An exclusion is cheap and on the request path: it records the decision (AnnotatorExclusion,
and a row of the audit log ExclusionEvent), gives the worker's live leases back and asks for a
re-decision. The re-decision runs off the request path, where round closes run
(rounds.schedule_close, which calls ``protocol_redecide`` first): like a close it reads a
snapshot with no lock held, re-decides every pair whose protocol state no longer matches the
counted judgements (selectors.counted_judgements) with ``protocol.adaptive.rebuild_pairs``,
opens rounds within the budget for pairs that are no longer decided, and applies the result
compare-and-set under the study's lock. The judgements of excluded workers stay spent: the
protocol's budget loses them (``Study.protocol_lost_judgements``). Re-including a worker
brings their judgements back the same way.
"""
from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
import time

from django.db import OperationalError, connection, transaction
from django.db.models import Count, F

from protocol import adaptive
from protocol.quality import QualityThresholds

from .. import selectors
from ..models import (
    AnnotatorExclusion,
    Annotator,
    Assignment,
    Comparison,
    ExclusionEvent,
    Judgement,
    JudgementKind,
    PairState,
    Study,
)
from . import protocol_state
from .transactions import retry_transient

log = logging.getLogger(__name__)
REDECIDE_PASSES = 10
# Study setting -> the protocol.quality flag whose worker it excludes.
EXCLUSION_RULES = {"exclude_too_fast": "too_fast", "exclude_failed_checks": "failed_checks",
                   "exclude_low_agreement": "low_agreement"}


class QualityError(ValueError):
    """An exclusion or re-inclusion that cannot be done; the message says why."""


def annotator_exclude(*, study: Study, annotator: Annotator, user=None, rule: str = "", reason: str = "") -> bool:
    """Leave the worker's judgements out of the study's protocol; False if already excluded.

    ``user``: the researcher who decided, or None when a study rule (``rule``: the flag) did.
    The worker is served nothing more in the study; the re-decision is scheduled after commit.
    """
    return _set_excluded(study, annotator, True, user=user, rule=rule, reason=reason)


def annotator_include(*, study: Study, annotator: Annotator, user=None, reason: str = "") -> bool:
    """Undo an exclusion: the worker's judgements count again; False if they were not excluded."""
    return _set_excluded(study, annotator, False, user=user, rule="", reason=reason)


def _set_excluded(study: Study, annotator: Annotator, excluded: bool, *, user, rule: str, reason: str) -> bool:
    from .hits import hit_release
    from .rounds import schedule_close

    reason = (reason or "").strip()
    if len(reason) > 500:
        raise QualityError("a reason is at most 500 characters")
    if not Judgement.objects.filter(comparison__study=study, annotator=annotator).exists() and not \
            Assignment.objects.filter(comparison__study=study, annotator=annotator).exists():
        raise QualityError(f"worker {annotator.external_id!r} has no work in this study")
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        row = AnnotatorExclusion.objects.filter(study=locked, annotator=annotator).first()
        if bool(row and row.excluded) == excluded:
            return False
        if row is None:
            row = AnnotatorExclusion(study=locked, annotator=annotator)
        row.excluded, row.reason = excluded, reason or rule
        row.full_clean(exclude=["study", "annotator"], validate_constraints=False)
        row.save()
        event = ExclusionEvent(
            study=locked, annotator=annotator, user=user if user is not None and user.is_authenticated else None,
            action=ExclusionEvent.Action.EXCLUDE if excluded else ExclusionEvent.Action.INCLUDE,
            rule=rule, reason=reason,
            judgements=Judgement.objects.filter(comparison__study=locked, annotator=annotator,
                                                kind=JudgementKind.REAL).count())
        try:
            event.full_clean(exclude=["study", "annotator", "user"])
        except ValidationError as exc:
            raise QualityError("; ".join(exc.messages)) from exc
        event.save()
        Study.objects.filter(pk=locked.pk).update(
            exclusions_active=F("exclusions_active") + (1 if excluded else -1),
            protocol_redecide_requested=F("protocol_redecide_requested") + 1)
        transaction.on_commit(lambda: schedule_close(study.pk))
    if excluded:
        for lease in Assignment.objects.filter(comparison__study=study, annotator=annotator,
                                               state=Assignment.State.LEASED):
            hit_release(assignment=lease)
    return True


def study_quality_settings_update(*, study: Study, check_every: int, onboarding_checks: int, exclude_too_fast: bool,
                                  exclude_failed_checks: bool, exclude_low_agreement: bool,
                                  repeat_every: int = 0) -> Study:
    """Set a study's checks and exclusion rules (docs/quality.md); QualityError names a bad one.

    Checks need check items (bundle lines ``check``). Rules act in the next sweep.
    """
    from ..models import CheckItem

    if (check_every or onboarding_checks) and not CheckItem.objects.filter(study=study).exists():
        raise QualityError("this study has no check items (bundle lines of kind 'check'): checks cannot be served")
    study.refresh_from_db()
    study.check_every, study.onboarding_checks, study.repeat_every = check_every, onboarding_checks, repeat_every
    study.exclude_too_fast, study.exclude_failed_checks = exclude_too_fast, exclude_failed_checks
    study.exclude_low_agreement = exclude_low_agreement
    study.full_clean()
    study.save(update_fields=["check_every", "onboarding_checks", "repeat_every", "exclude_too_fast",
                              "exclude_failed_checks", "exclude_low_agreement"])
    return study


def annotator_is_excluded(*, study: Study, annotator: Annotator | int) -> bool:
    """Whether the worker is excluded from ``study`` now (serving asks only when
    ``study.exclusions_active``)."""
    return AnnotatorExclusion.objects.filter(study=study, annotator=annotator, excluded=True).exists()


def exclusion_rules_apply(*, study: Study, thresholds: QualityThresholds = QualityThresholds()) -> list[str]:
    """Exclude every worker whom a rule of the study (``exclude_too_fast`` ...) says to exclude.

    Returns the external ids excluded now. A worker once re-included by a researcher is left
    alone by the rules (the researcher's word stands). Run off the request path (the sweep).
    """
    rules = {flag for setting, flag in EXCLUSION_RULES.items() if getattr(study, setting)}
    if not rules:
        return []
    overruled = set(ExclusionEvent.objects.filter(study=study, action=ExclusionEvent.Action.INCLUDE)
                    .values_list("annotator_id", flat=True))
    done = []
    for row in selectors.study_annotator_quality(study=study, thresholds=thresholds):
        hits = [flag for flag in row["flags"] if flag in rules]
        if hits and not row["excluded"] and row["annotator_id"] not in overruled:
            annotator = Annotator.objects.get(pk=row["annotator_id"])
            if annotator_exclude(study=study, annotator=annotator, rule=hits[0],
                                 reason=f"study rule: flagged {', '.join(hits)}"):
                done.append(annotator.external_id)
    return done


def redecide_pending(study: Study) -> bool:
    return study.protocol_redecide_requested != study.protocol_redecide_done


def protocol_redecide(*, study_id: int) -> int:
    """Bring the protocol in line with the counted judgements after exclusions; returns the
    number of pairs re-decided.

    Call outside any transaction. Reads the study row, then the pair rows, then the counted
    judgements (in that order: a submit that lands in between changes a pair row's version, and
    the apply then refuses the stale snapshot and the next pass starts again). Every pair whose
    recorded judgements (count and per-item votes) differ from its counted ones is rebuilt from
    them; rounds are opened within the budget left; comparisons' serving counters follow.
    """
    for attempt in range(REDECIDE_PASSES):
        if attempt:
            time.sleep(0.02 * attempt)  # a pair row was busy or moved: let the submit finish
        study = Study.objects.get(pk=study_id)
        if not redecide_pending(study):
            return 0
        rows = list(PairState.objects.filter(study=study))
        labels = selectors.study_judgement_labels(study=study)
        lost = Judgement.objects.filter(comparison__study=study, kind=JudgementKind.REAL,
                                        annotator_id__in=selectors.excluded_annotators(study=study)).count()
        before = protocol_state.study_state_load(study, rows)
        changed = {}
        for pair in before.pairs:
            mine = labels.get(pair.key, [])
            votes: dict[str, int] = {}
            for item, value in mine:
                votes[item] = votes.get(item, 0) + value
            if pair.judgements != len(mine) or dict(pair.votes) != votes:
                changed[pair.key] = ([i for i, _ in mine], [v for _, v in mine])
        settings = protocol_state.protocol_settings(study)
        budget = study.budget + study.protocol_imported_judgements - lost
        rebuilt = adaptive.rebuild_pairs(adaptive.replace(before, settings=adaptive.replace(settings, budget=budget)),
                                         changed)
        opened = adaptive.open_rounds(rebuilt)
        applied = _redecide_apply(study, rows, before, rebuilt, opened, lost=lost)
        if applied is not None:
            return applied
    log.warning("study %s: pairs moved under %d re-decision passes; the sweep will retry", study_id, REDECIDE_PASSES)
    return 0


@retry_transient
def _redecide_apply(study: Study, rows: list[PairState], before: adaptive.ProtocolState,
                    rebuilt: adaptive.ProtocolState, opened: adaptive.ProtocolState, *, lost: int) -> int | None:
    """Write a re-decision computed from a snapshot, unless what it read has moved (then None)."""
    earlier = {p.key: p for p in before.pairs}
    writes = {p.key for p in opened.pairs if p != earlier[p.key]}
    targets = [row for row in rows if (row.state["first"], row.state["second"]) in writes]
    recounted = {p.key for p, b in zip(rebuilt.pairs, before.pairs) if p.judgements != b.judgements
                 or dict(p.votes) != dict(b.votes)}
    try:
        with transaction.atomic():
            return _redecide_write(study, rows, targets, before, rebuilt, opened, recounted, lost=lost)
    except OperationalError:
        if connection.features.has_select_for_update_nowait:
            return None  # a pair row is locked by a lease or submit: a new pass
        raise


def _redecide_write(study: Study, rows, targets, before, rebuilt, opened, recounted, *, lost: int) -> int | None:
    """The apply's transaction (see _redecide_apply); None when the snapshot is stale."""
    locked = Study.objects.select_for_update().get(pk=study.pk)
    if (locked.budget, locked.protocol_closes, locked.protocol_redecide_requested) != \
            (study.budget, study.protocol_closes, study.protocol_redecide_requested):
        return None  # a close, a budget change or another exclusion came first
    # Every pair row is locked (never waiting: NOWAIT, so no deadlock with a lease that holds
    # one pair and waits for another) and must still have the version of the snapshot. Unlike
    # a round close, untouched pairs matter too: a submit of a worker who was not excluded yet
    # when it read the exclusion (under its pair's lock) may land in any pair; it either
    # committed before (the version moved: a new pass sees it) or waits for this lock and
    # then sees the exclusion.
    nowait = connection.features.has_select_for_update_nowait
    versions = dict(PairState.objects.select_for_update(nowait=nowait).filter(study=locked).order_by("pk")
                    .values_list("pk", "version"))
    if any(versions.get(row.pk) != row.version for row in rows):
        return None
    # The protocol's budget (settings) moves with the lost judgements, in the same write.
    locked.protocol_lost_judgements = lost
    locked.protocol_redecide_done = study.protocol_redecide_requested
    locked.save(update_fields=["protocol_lost_judgements", "protocol_redecide_done"])
    protocol_state.study_state_save(locked, targets, opened, before=before, closed=rebuilt)
    _recount_comparisons(locked, [row.pk for row in rows if (row.state["first"], row.state["second"]) in recounted])
    return len(recounted)


def _recount_comparisons(study: Study, pair_ids: list[int]) -> None:
    """Serving's per-comparison counter counts the counted judgements (an excluded worker's
    comparisons can be served again). Call holding the pairs' locks."""
    if not pair_ids:
        return
    counted = dict(selectors.counted_judgements(study=study).filter(comparison__pair_id__in=pair_ids)
                   .values_list("comparison_id").annotate(n=Count("id")).values_list("comparison_id", "n"))
    stale = []
    for comparison in Comparison.objects.filter(pair_id__in=pair_ids).only("id", "judgement_count"):
        if comparison.judgement_count != counted.get(comparison.pk, 0):
            comparison.judgement_count = counted.get(comparison.pk, 0)
            stale.append(comparison)
    Comparison.objects.bulk_update(stale, ["judgement_count"])
