"""Serving HITs and running the budgeted protocol inside the app (writes).

The protocol itself is ``protocol.adaptive``: a pure state machine. This module loads its
state from PairState rows, advances it and stores it back, always while holding the study's
row lock (``_lock_study``), so concurrent annotators, workers and researchers see one
consistent state. The cycle per pair:

    open round (quota q) -> annotators lease comparisons of the pair (at most q at once)
    -> each submit records one judgement -> when the round is full, a task closes it
    (batched decision over every filled pair) and opens the next rounds within the budget.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import replace
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from protocol import adaptive
from protocol.allocation import choose_items

from . import selectors
from .models import Annotator, Assignment, Comparison, Judgement, PairState, PairStateHistory, Study


class HitError(ValueError):
    """A HIT cannot be served or submitted; the message says why (shown to the annotator)."""


def _lock_study(study_id: int) -> Study:
    """The study row, locked until the end of the current transaction (call inside atomic)."""
    return Study.objects.select_for_update().get(pk=study_id)


def _protocol_settings(study: Study, imported: int) -> adaptive.ProtocolSettings:
    return adaptive.ProtocolSettings(
        budget=study.budget + imported,
        batch=study.batch_size,
        gamma=study.gamma,
        policy=study.allocation_policy,
        strict=study.protocol_strict,
        seed=study.protocol_seed,
    )


def _load_state(study: Study) -> adaptive.ProtocolState | None:
    rows = list(PairState.objects.filter(study=study).select_related("first", "second").order_by(
        "first__name", "second__name"))
    if not rows or not all(r.state for r in rows):
        return None
    settings = adaptive.ProtocolSettings(**rows[0].state["settings"])
    pairs = tuple(adaptive.PairState.from_dict(r.state["pair"]) for r in rows)
    return adaptive.ProtocolState(settings, pairs, study.protocol_closes)


def _save_state(study: Study, state: adaptive.ProtocolState, *, history: bool) -> None:
    """Write every changed pair back (call while holding the study lock)."""
    rows = {(r.first.name, r.second.name): r
            for r in PairState.objects.filter(study=study).select_related("first", "second")}
    settings = state.to_dict()["settings"]
    changed, log = [], []
    for pair in state.pairs:
        row = rows[pair.key]
        blob = {"settings": settings, "pair": pair.to_dict()}
        if row.state == blob:
            continue
        closed_now = len(pair.theta) > len(row.state.get("pair", {}).get("theta", [])) if row.state else bool(pair.theta)
        _store_pair(row, pair, settings)
        changed.append(row)
        if history and closed_now:
            log.append(PairStateHistory(pair_state=row, round=pair.round, decision=pair.decision,
                                        theta=row.theta, counts=row.counts, judgements=pair.judgements))
    PairState.objects.bulk_update(changed, ["state", "decision", "decided", "theta", "round", "quota_left",
                                            "counts", "updated_at"])
    PairStateHistory.objects.bulk_create(log)
    if study.protocol_closes != state.closes:
        study.protocol_closes = state.closes
        study.save(update_fields=["protocol_closes"])


def _store_pair(row: PairState, pair: adaptive.PairState, settings: dict | None = None) -> None:
    """Copy one pair's protocol state into its row (the JSON and the columns serving reads)."""
    row.state = {"settings": settings or row.state["settings"], "pair": pair.to_dict()}
    row.decision = pair.decision
    row.decided = pair.status == adaptive.DECIDED
    row.theta = pair.theta[-1] if pair.theta else None
    row.round = pair.round
    row.quota_left = pair.quota
    row.counts = {"paired": [list(r) for r in pair.paired], "human_only": list(pair.human_only),
                  "metric_only": list(pair.metric_only), "status": pair.status}


def study_protocol_ensure_started(*, study: Study) -> None:
    """Start the protocol unless every pair already has its state (a cheap check)."""
    if PairState.objects.filter(study=study, state={}).exists():
        study_protocol_start(study=study)


def study_protocol_start(*, study: Study) -> adaptive.ProtocolState:
    """Build the protocol state of a study (idempotent) and open the first rounds.

    Judgements already in the study (imported with its bundle) are recorded as each pair's
    round 0 and decided, so a pair they settle is never served. Takes the study lock.
    """
    with transaction.atomic():
        study = _lock_study(study.id)
        state = _load_state(study)
        if state is not None:
            return state
        capacities = selectors.study_pair_capacities(study=study)
        metric = selectors.study_metric_labels(study=study)
        existing = selectors.study_judgement_labels(study=study)
        imported = sum(len(v) for v in existing.values())
        for key, labels in existing.items():
            # Imported labels beyond ratings_per_item still count: the pair has them all.
            capacities[key] = max(capacities.get(key, 0), len(labels))
        state = adaptive.start(_protocol_settings(study, imported), capacities, metric)
        if existing:
            state = _seed_judgements(state, existing)
        # History is written with the closed rounds' numbers, before new rounds open.
        _save_state(study, state, history=True)
        state = adaptive.open_rounds(state)
        _save_state(study, state, history=False)
        return state


def _seed_judgements(state: adaptive.ProtocolState, existing: dict) -> adaptive.ProtocolState:
    """Record judgements collected before the protocol started as one round per pair."""
    pairs = list(state.pairs)
    for index, pair in enumerate(pairs):
        labels = existing.get(pair.key)
        if labels:
            quota = min(len(labels), pair.remaining)
            pairs[index] = replace(pair, round=1, quota=quota, status=adaptive.OPEN)
    state = replace(state, pairs=tuple(pairs))
    for (first, second), labels in existing.items():
        quota = state.pair(first, second).quota
        items, values = zip(*labels[:quota])
        state = adaptive.record_judgements(state, first, second, list(items), list(values))
    return adaptive.close_rounds(state)


def study_protocol_advance(*, study_id: int) -> adaptive.ProtocolState:
    """Close every filled round (one batched decision) and open new rounds within the budget.

    Runs as a background task after a round fills; safe to call at any time (no-op when
    nothing is filled). Takes the study lock.
    """
    with transaction.atomic():
        study = _lock_study(study_id)
        state = _load_state(study)
        if state is None:
            return study_protocol_start(study=study)
        closed = adaptive.close_rounds(state)
        if closed != state:
            _save_state(study, closed, history=True)
        advanced = adaptive.open_rounds(closed)
        if advanced != closed:
            _save_state(study, advanced, history=False)
        return advanced


def annotator_for_user(*, user) -> Annotator:
    """The Annotator of a logged-in user (created on first use)."""
    annotator, _ = Annotator.objects.get_or_create(
        user=user, defaults={"platform": Annotator.Platform.LOCAL, "external_id": f"user-{user.pk}"})
    return annotator


def annotator_for_worker(*, platform: str, worker_id: str) -> Annotator:
    """The Annotator of an external crowd worker (Prolific PID, MTurk worker id)."""
    if platform not in (Annotator.Platform.PROLIFIC, Annotator.Platform.MTURK):
        raise HitError(f"unknown crowd platform {platform!r}")
    worker_id = (worker_id or "").strip()
    if not worker_id or len(worker_id) > 200:
        raise HitError("a worker id is required (PROLIFIC_PID or workerId in the study link)")
    annotator, _ = Annotator.objects.get_or_create(platform=platform, external_id=worker_id)
    return annotator


def leases_expire(*, study: Study) -> int:
    """Mark leases past their expiry as expired, returning their comparisons to the pool."""
    return Assignment.objects.filter(
        comparison__study=study, state=Assignment.State.LEASED, expires_at__lt=timezone.now()
    ).update(state=Assignment.State.EXPIRED)


def hit_next_for_annotator(*, study: Study, annotator: Annotator) -> Assignment | None:
    """Lease the next comparison for ``annotator``, or None when there is no work for them.

    An annotator with an unexpired lease in the study gets it back (a reload does not skip
    work), even while the study is paused; a study that is not running leases nothing new.
    Otherwise: among pairs with an open round whose quota exceeds their active
    leases (most unmet quota first), choose an item of that pair that the pair has not yet
    been judged on (up to ``ratings_per_item`` times), that this annotator has not judged and
    that is not leased, by the study's item-choice policy (separability-weighted or not).
    """
    study_protocol_ensure_started(study=study)
    with transaction.atomic():
        study = _lock_study(study.id)
        leases_expire(study=study)
        current = (Assignment.objects.filter(annotator=annotator, comparison__study=study,
                                             state=Assignment.State.LEASED)
                   .select_related("comparison").order_by("issued_at").first())
        if current is not None:
            return current  # also in a paused study: the annotator has seen it already
        if study.status != Study.Status.RUNNING:
            return None
        # The quota_left/round columns mirror the protocol state (written with it under this
        # lock), so serving needs no JSON parsing.
        open_rounds = PairState.objects.filter(study=study, quota_left__gt=0).values_list(
            "first__name", "second__name", "first_id", "second_id", "quota_left", "round")
        active: dict[tuple[int, int], int] = {}
        for first_id, second_id in Assignment.objects.filter(
                comparison__study=study, state=Assignment.State.LEASED).values_list(
                "comparison__first_id", "comparison__second_id"):
            active[(first_id, second_id)] = active.get((first_id, second_id), 0) + 1
        rng = random.Random(f"{study.protocol_seed}:{annotator.pk}:{timezone.now().timestamp()}")
        # Fill the rounds closest to full first: a full round is decided (and maybe stopped)
        # sooner than many half-full ones.
        candidates = sorted(
            (quota - active.get((i, j), 0), rng.random(), (i, j), round_)
            for _, _, i, j, quota, round_ in open_rounds
        )
        for unmet, _, pair_ids, round_ in candidates:
            if unmet <= 0:
                continue
            comparison = _choose_comparison(study, pair_ids, annotator, seed=rng.randrange(2**31))
            if comparison is None:
                continue
            now = timezone.now()
            return Assignment.objects.create(
                annotator=annotator, comparison=comparison, shown_swapped=rng.random() < 0.5, round=round_,
                issued_at=now, expires_at=now + timedelta(seconds=study.lease_timeout_seconds),
            )
        return None


def _choose_comparison(study: Study, pair: tuple[int, int], annotator: Annotator, *, seed: int) -> Comparison | None:
    comparisons = Comparison.objects.filter(study=study, first_id=pair[0], second_id=pair[1])
    rows = list(comparisons.annotate(
        judged=Count("judgements", distinct=True),
        mine=Count("judgements", filter=Q(judgements__annotator=annotator), distinct=True),
        leased=Count("assignments", filter=Q(assignments__state=Assignment.State.LEASED), distinct=True),
    ).values_list("id", "judged", "mine", "leased", "separability"))
    eligible = [r for r in rows if r[2] == 0 and r[3] == 0 and r[1] < study.ratings_per_item]
    if not eligible:
        return None
    separability = [r[4] if r[4] is not None else 0.0 for r in eligible]
    has_separability = any(r[4] is not None for r in eligible)
    policy = study.item_choice if has_separability else Study.ItemChoice.UNIFORM
    chosen = choose_items([str(r[0]) for r in eligible], separability, (), 1, policy=policy,
                          temperature=study.item_choice_temperature, seed=seed)
    return Comparison.objects.select_related("item", "first", "second").get(pk=int(chosen[0]))


def judgement_submit(
    *,
    assignment: Assignment,
    annotator: Annotator,
    shown_value: int,
    idempotency_key: str,
    seconds_on_task: float | None = None,
) -> Judgement:
    """Store the annotator's answer for a HIT; idempotent on ``idempotency_key``.

    ``shown_value`` is in screen order: +1 = the left output is better, -1 = the right one,
    0 = tie; it is stored in canonical order. Submitting the same key again returns the first
    judgement unchanged. A lease that expired is still accepted while its pair's round needs
    judgements; otherwise HitError. When the submit fills the pair's round, the decision is
    recomputed by a background task after commit.
    """
    if shown_value not in (-1, 0, 1):
        raise HitError(f"answer must be -1, 0 or 1, got {shown_value!r}")
    if not idempotency_key or len(idempotency_key) > 64:
        raise HitError("a submit needs an idempotency key of at most 64 characters")
    if assignment.annotator_id != annotator.pk:
        raise HitError("this HIT belongs to another annotator")
    earlier = Judgement.objects.filter(Q(idempotency_key=idempotency_key) | Q(assignment=assignment)).first()
    if earlier is not None:
        if earlier.assignment_id != assignment.pk:
            raise HitError("this submission key was already used for another HIT")
        return earlier
    comparison = assignment.comparison
    with transaction.atomic():
        study = _lock_study(comparison.study_id)
        assignment = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if hasattr(assignment, "judgement"):
            return assignment.judgement
        row = PairState.objects.get(study=study, first_id=comparison.first_id, second_id=comparison.second_id)
        key = (comparison.first.name, comparison.second.name)
        # Recording touches one pair only: a one-pair protocol state is enough.
        state = adaptive.ProtocolState(adaptive.ProtocolSettings(**row.state["settings"]),
                                       (adaptive.PairState.from_dict(row.state["pair"]),), study.protocol_closes)
        pair = state.pairs[0]
        if pair.status != adaptive.OPEN:
            assignment.state = Assignment.State.EXPIRED
            assignment.save(update_fields=["state"])
            raise HitError("this comparison is no longer needed: its pair was decided or its round is full")
        if Judgement.objects.filter(comparison=comparison, annotator=annotator).exists():
            raise HitError("you have already judged this comparison")
        value = -shown_value if assignment.shown_swapped else shown_value
        judgement = Judgement(comparison=comparison, annotator=annotator, assignment=assignment, value=value,
                              seconds_on_task=seconds_on_task, idempotency_key=idempotency_key)
        judgement.full_clean()
        judgement.save()
        assignment.state = Assignment.State.SUBMITTED
        assignment.save(update_fields=["state"])
        pair = adaptive.record_judgement(state, *key, comparison.item.external_id, value).pairs[0]
        _store_pair(row, pair)
        row.save(update_fields=["state", "decision", "decided", "theta", "round", "quota_left", "counts",
                                "updated_at"])
        if pair.status == adaptive.FILLED:
            from .tasks import study_protocol_advance_task

            transaction.on_commit(lambda: study_protocol_advance_task.delay(study.id))
    return judgement


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


def study_settings_update(
    *,
    study: Study,
    status: str,
    budget: int,
    lease_timeout_seconds: int,
    completion_code: str,
    instructions: str,
    item_choice: str,
    item_choice_temperature: float,
) -> Study:
    """Change what a researcher may change while a study runs (takes the study lock).

    The budget may not go below the judgements already spent plus those asked for in open
    rounds (ValueError naming both); a larger budget opens new rounds at once. The protocol's
    own parameters (metric, batch, gamma, policy) are fixed once it has started.
    """
    with transaction.atomic():
        study = _lock_study(study.id)
        state = _load_state(study)
        imported = Judgement.objects.filter(comparison__study=study, source=Judgement.Source.IMPORT).count()
        if state is not None:
            committed = state.spent + state.reserved - imported
            if budget < committed:
                raise ValueError(f"the budget cannot be below {committed}: judgements already spent and "
                                 f"asked for in open rounds ({state.spent - imported} + {state.reserved})")
        study.status = status
        study.budget = budget
        study.lease_timeout_seconds = lease_timeout_seconds
        study.completion_code = completion_code
        study.instructions = instructions
        study.item_choice = item_choice
        study.item_choice_temperature = item_choice_temperature
        study.full_clean()
        study.save()
        # The protocol counts imported judgements against its budget too (see study_protocol_start).
        if state is not None and state.settings.budget != budget + imported:
            resized = replace(state, settings=replace(state.settings, budget=budget + imported))
            _save_state(study, adaptive.open_rounds(resized), history=False)
        return study
