"""Quality control writes: excluding and re-including workers.

An exclusion is cheap and on the request path: it records the decision (AnnotatorExclusion,
and a row of the audit log ExclusionEvent), gives the worker's live leases back and asks for a
re-decision. The re-decision runs off the request path, where round closes run
(jobs.rounds_close; services/runtime.py's ``rounds_close`` runs ``protocol_redecide`` first):
every pair whose protocol state no longer matches the counted judgements
(selectors.quality.counted_judgements) is re-decided. The judgements of excluded workers stay
spent: the protocol's budget loses them (``Study.protocol_lost_judgements``). Re-including a
worker brings their judgements back the same way.
"""
from __future__ import annotations

import logging

from django.core.exceptions import ValidationError

from django.db import transaction
from django.db.models import F

from protocol.quality import QualityThresholds

from .. import jobs
from ..errors import QualityError
from ..models import (AnnotatorExclusion, Annotator, Assignment, CheckItem, ExclusionEvent, Judgement, JudgementKind,
                      Study)
from ..selectors.quality import study_annotator_quality
from .hits import hit_release

log = logging.getLogger(__name__)
REDECIDE_PASSES = 10
# Study setting -> the protocol.quality flag whose worker it excludes.
EXCLUSION_RULES = {"exclude_too_fast": "too_fast", "exclude_failed_checks": "failed_checks",
                   "exclude_low_agreement": "low_agreement"}


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
    reason = (reason or "").strip()
    if len(reason) > 500:
        raise QualityError("a reason is at most 500 characters")
    if "\x00" in reason:  # full_clean does not check it; PostgreSQL refuses it
        raise QualityError("the reason holds a NUL character: remove it")
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
        transaction.on_commit(lambda: jobs.rounds_close(study.pk))
    if excluded:
        for lease in Assignment.objects.filter(comparison__study=study, annotator=annotator,
                                               state=Assignment.State.LEASED):
            hit_release(assignment=lease)
    return True


def checks_need_items(*, study: Study, check_every: int, onboarding_checks: int) -> None:
    """Checks need check items (bundle lines ``check``): QualityError when they are asked for in a
    study without any (the settings update's rule, docs/quality.md)."""
    if (check_every or onboarding_checks) and not CheckItem.objects.filter(study=study).exists():
        raise QualityError("this study has no check items (bundle lines of kind 'check'): checks cannot be served")


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
    for row in study_annotator_quality(study=study, thresholds=thresholds):
        hits = [flag for flag in row["flags"] if flag in rules]
        if hits and not row["excluded"] and row["annotator_id"] not in overruled:
            annotator = Annotator.objects.get(pk=row["annotator_id"])
            if annotator_exclude(study=study, annotator=annotator, rule=hits[0],
                                 reason=f"study rule: flagged {', '.join(hits)}"):
                done.append(annotator.external_id)
    return done


