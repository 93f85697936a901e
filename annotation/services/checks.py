"""Attention and gold checks, and repeated comparisons: serving them between real HITs, and
storing their answers.

A check (CheckItem, bundle kind ``check``) looks like any HIT to the worker: an input and two
texts, sides drawn at random. Its answer is a Judgement of kind ``check`` with no comparison,
so nothing that reads comparisons — the protocol, decisions, reports, exports' counted rows,
serving's counters — ever sees it; the quality statistics do (gold accuracy).

When a check is served (study settings; ``check_turn`` decides, called by
services/hits.hit_next_for_annotator only when the study has checks):

- onboarding: a worker's first ``onboarding_checks`` HITs are checks. A worker who answers
  fewer than ``QualityThresholds.min_gold_accuracy`` of them as expected is served nothing
  more (the annotate page shows a polite end screen with the platform's return path), before
  any real judgement of theirs counts;
- interleaving: after that, each HIT is a check with probability 1 / ``check_every``, but never
  two checks in a row (so the share of checks is about 1 / (check_every + 1)); the draw is
  seeded by (protocol seed, worker, HITs answered), so it is reproducible.

A worker gets the checks they have seen least first (each once before any repeats).

Repeats (``repeat_every``): after onboarding, each HIT is (also with probability
1 / ``repeat_every``, drawn independently of the check's draw, a check winning a tie) a repeat
of a comparison the worker judged before, not their last one, with the sides swapped from how
they saw it; never right after a check or another repeat, and each comparison is repeated at
most once per worker. Its answer is a Judgement of kind ``repeat``: it touches no serving
counter and no protocol state, and gives the quality table's repeat consistency.
"""
from __future__ import annotations

import random
from datetime import timedelta
from typing import NamedTuple

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from protocol.quality import QualityThresholds

from ..errors import HitError
from ..models import Annotator, Assignment, CheckItem, Judgement, JudgementKind, Study
from ..selectors.quality import annotator_is_excluded


class CheckTurn(NamedTuple):
    """The hook's answer when it takes the turn: ``hit`` is the check to show, or None when the
    worker is to be served nothing (they failed onboarding)."""

    hit: Assignment | None


def study_has_checks(study: Study) -> bool:
    """Whether serving must ask ``check_turn`` (checks or repeats)."""
    return bool(study.check_every or study.onboarding_checks or study.repeat_every)


def _answers(study: Study, annotator: Annotator) -> list[tuple[int, int]]:
    """(check item id, value in the check's order) of the worker's check answers, oldest first."""
    return list(Judgement.objects.filter(check_item__study=study, annotator=annotator, kind=JudgementKind.CHECK)
                .order_by("id").values_list("check_item_id", "value"))


def onboarding_state(*, study: Study, annotator: Annotator | int) -> str:
    """``none`` (no onboarding), ``running`` (checks still to answer), ``passed`` or ``failed``."""
    needed = study.onboarding_checks
    if not needed:
        return "none"
    answers = _answers(study, annotator)[:needed]
    if len(answers) < needed:
        return "running"
    accepted = {pk: set(accepted) for pk, accepted in
                ((c.pk, c.accepted) for c in CheckItem.objects.filter(pk__in={pk for pk, _ in answers}))}
    correct = sum(value in accepted[pk] for pk, value in answers)
    return "passed" if correct / needed >= QualityThresholds().min_gold_accuracy else "failed"


def worker_screened_out(*, study: Study, annotator: Annotator) -> bool:
    """The worker failed the onboarding checks, or was excluded: no more HITs for them (a read)."""
    if study.onboarding_checks and onboarding_state(study=study, annotator=annotator) == "failed":
        return True
    return bool(study.exclusions_active) and annotator_is_excluded(study=study, annotator=annotator)


def check_turn(*, study: Study, annotator: Annotator) -> CheckTurn | None:
    """The worker's live check, or a new one when it is a check's turn; None when the next HIT
    is a real one. Precondition: ``study_has_checks(study)`` and the worker holds no real lease."""
    now = timezone.now()
    live = (Assignment.objects.filter(annotator=annotator, check_item__study=study, state=Assignment.State.LEASED,
                                      expires_at__gt=now).select_related("check_item").first())
    if live is not None:
        return CheckTurn(live)
    if study.status != Study.Status.RUNNING:
        return None
    onboarding = onboarding_state(study=study, annotator=annotator)
    if onboarding == "failed":
        return CheckTurn(None)
    if onboarding == "running":
        return CheckTurn(_lease_check(study, annotator, now))
    if not (study.check_every or study.repeat_every):
        return None
    last = (Assignment.objects.filter(Q(comparison__study=study) | Q(check_item__study=study), annotator=annotator,
                                      state=Assignment.State.SUBMITTED)
            .order_by("-issued_at", "-id").values_list("kind", flat=True).first())
    if last in (JudgementKind.CHECK, JudgementKind.REPEAT):
        return None  # never two checks (or a check and a repeat) in a row
    answered = Judgement.objects.filter(Q(comparison__study=study) | Q(check_item__study=study),
                                        annotator=annotator).count()
    if study.check_every:
        draw = random.Random(f"{study.protocol_seed}:check:{annotator.pk}:{answered}").random()
        if draw < 1 / study.check_every:
            return CheckTurn(_lease_check(study, annotator, now))
    if study.repeat_every:
        draw = random.Random(f"{study.protocol_seed}:repeat:{annotator.pk}:{answered}").random()
        if draw < 1 / study.repeat_every:
            repeat = _lease_repeat(study, annotator, now, answered)
            if repeat is not None:
                return CheckTurn(repeat)
    return None


def _lease_repeat(study: Study, annotator: Annotator, now, answered: int) -> Assignment | None:
    """Lease a repeat of a comparison the worker judged (not their last, not repeated yet), the
    sides swapped from how they saw it; None when there is none. Touches no serving counter."""
    repeated = Judgement.objects.filter(annotator=annotator, comparison__study=study,
                                        kind=JudgementKind.REPEAT).values("comparison_id")
    judged = list(Judgement.objects.filter(annotator=annotator, comparison__study=study, kind=JudgementKind.REAL,
                                           comparison__item__withdrawn=False)
                  .exclude(comparison_id__in=repeated).order_by("id")
                  .values_list("comparison_id", "assignment__shown_swapped"))[:-1]
    if not judged:
        return None
    rng = random.Random(f"{study.protocol_seed}:repeat-item:{annotator.pk}:{answered}")
    comparison_id, seen_swapped = rng.choice(judged)
    swapped = (not seen_swapped) if seen_swapped is not None else rng.random() < 0.5
    return Assignment.objects.create(
        annotator=annotator, comparison_id=comparison_id, kind=JudgementKind.REPEAT, shown_swapped=swapped,
        issued_at=now, expires_at=now + timedelta(seconds=study.lease_timeout_seconds))


def _lease_check(study: Study, annotator: Annotator, now) -> Assignment | None:
    """Lease the check this worker has seen least (ties at random), sides at random."""
    seen = dict(Assignment.objects.filter(annotator=annotator, check_item__study=study)
                .values_list("check_item_id").annotate(n=Count("id")).values_list("check_item_id", "n"))
    candidates = list(CheckItem.objects.filter(study=study).values_list("id", flat=True))
    if not candidates:
        return None
    rng = random.Random(f"{study.protocol_seed}:check-item:{annotator.pk}:{sum(seen.values())}:{now.timestamp()}")
    fewest = min(seen.get(pk, 0) for pk in candidates)
    chosen = rng.choice([pk for pk in candidates if seen.get(pk, 0) == fewest])
    return Assignment.objects.create(
        annotator=annotator, check_item_id=chosen, kind=JudgementKind.CHECK, shown_swapped=rng.random() < 0.5,
        issued_at=now, expires_at=now + timedelta(seconds=study.lease_timeout_seconds))


def check_submit(*, assignment: Assignment, annotator: Annotator, shown_value: int, idempotency_key: str,
                 seconds_on_task: float | None) -> Judgement:
    """Store the answer to a check or repeat HIT (idempotent on the key); never touches the
    protocol or a serving counter.

    Preconditions: as services.hits.judgement_submit checked them (answer, key, owner).
    """
    with transaction.atomic():
        earlier = Judgement.objects.filter(assignment_id=assignment.pk).first()
        if earlier is not None:
            if earlier.idempotency_key == idempotency_key:
                return earlier
            raise HitError("this HIT was already answered")
        state = Assignment.objects.filter(pk=assignment.pk).values_list("state", flat=True).get()
        if state not in (Assignment.State.LEASED, Assignment.State.EXPIRED):
            raise HitError("this HIT is no longer open")
        now = timezone.now()
        value = -shown_value if assignment.shown_swapped else shown_value
        judgement = Judgement(check_item_id=assignment.check_item_id, comparison_id=assignment.comparison_id,
                              annotator=annotator, assignment=assignment,
                              value=value, kind=assignment.kind, seconds_on_task=seconds_on_task,
                              server_seconds=max((now - assignment.issued_at).total_seconds(), 0.0),
                              idempotency_key=idempotency_key)
        try:
            with transaction.atomic():
                judgement.save()
        except IntegrityError:
            raise HitError("this submission key was already used for another HIT") from None
        Assignment.objects.filter(pk=assignment.pk).update(state=Assignment.State.SUBMITTED)
    return judgement


def check_release(*, assignment: Assignment, state: str) -> bool:
    """Give a check or repeat HIT back (skipped or expired); False if it was not live. No counters."""
    return bool(Assignment.objects.filter(pk=assignment.pk, state=Assignment.State.LEASED).update(state=state))
