"""Serving HITs: leases and submits (writes), lock-light.

No study-wide lock on this path. A lease locks one pair row (on PostgreSQL with
``skip_locked``, so concurrent annotators spread over the open pairs), a submit locks the
pair row of its comparison; on SQLite every write transaction is short and ``IMMEDIATE``.
Serving reads counters kept up to date on write instead of aggregating per request:

- ``PairState.quota_left`` (judgements the pair's open round still needs) and
  ``PairState.leased`` (its live leases): a pair is served while ``quota_left > leased``;
- ``Comparison.judgement_count`` and ``Comparison.lease_expires_at`` (one live lease at most).

Invariant, maintained by every function here under the pair's row lock: the LEASED
assignments of a pair are exactly its comparisons with a ``lease_expires_at``, and there are
``PairState.leased`` of them. A lease past its expiry stays counted until it is taken over by
a new lease of its comparison or given back by ``leases_reclaim``.

A submit that fills its pair's round schedules the round close after commit
(services/rounds.py); it never waits for a decision.

The statements of a lease and a submit are plain SQL (annotation/sql.py, docs/serving.md: the
ORM's building them was two thirds of the loop's CPU); the rarer paths (checks, repeats,
stratified choice, release, reclaim) keep the ORM.
"""
from __future__ import annotations

import random
import uuid
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from protocol import adaptive
from protocol.allocation import choose_items, selection_probability

from .. import sql
from ..models import (
    Annotator,
    Assignment,
    Comparison,
    Item,
    ItemFlag,
    Judgement,
    JudgementKind,
    PairState,
    Study,
)
from . import protocol_state, rounds
from .transactions import retry_transient


class HitError(ValueError):
    """A HIT cannot be served or submitted; the message says why (shown to the annotator)."""


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


def annotator_for_user(*, user) -> Annotator:
    """The Annotator of a logged-in user (created on first use)."""
    annotator, _ = Annotator.objects.get_or_create(
        user=user, defaults={"platform": Annotator.Platform.LOCAL, "external_id": f"user-{user.pk}"})
    return annotator


def annotator_for_worker(*, platform: str, worker_id: str, session_id: str = "") -> Annotator:
    """The Annotator of an external crowd worker (Prolific PID, MTurk worker id) in one
    platform session (``session_id``; see Annotator)."""
    if platform not in (Annotator.Platform.PROLIFIC, Annotator.Platform.MTURK):
        raise HitError(f"unknown crowd platform {platform!r}")
    worker_id = (worker_id or "").strip()
    if not worker_id or len(worker_id) > 200:
        raise HitError("a worker id is required (PROLIFIC_PID or workerId in the study link)")
    annotator, _ = Annotator.objects.get_or_create(platform=platform, external_id=worker_id, session_id=session_id)
    return annotator


# The columns of an Assignment read by plain SQL (annotation/sql.py), in model order.
ASSIGNMENT_COLUMNS = ("id", "annotator_id", "comparison_id", "check_item_id", "shown_swapped", "round", "issued_at",
                      "expires_at", "state", "kind", "draw_probability")
_ASSIGNMENT_SELECT = ", ".join(f'a."{column}"' for column in ASSIGNMENT_COLUMNS)


def assignment_from_row(values) -> Assignment:
    """An Assignment from its ASSIGNMENT_COLUMNS as a cursor read them."""
    return sql.instance(Assignment, ASSIGNMENT_COLUMNS, values)


def hit_current(*, study: Study, annotator: Annotator) -> Assignment | None:
    """The annotator's live lease in the study (a check's too, when the study has checks), if any (a read)."""
    with_checks = bool(study.check_every or study.onboarding_checks)
    row = sql.one(
        f"SELECT {_ASSIGNMENT_SELECT} FROM {sql.ASSIGNMENT} a "
        f'LEFT JOIN {sql.COMPARISON} c ON c."id" = a."comparison_id" '
        + (f'LEFT JOIN {sql.CHECK_ITEM} k ON k."id" = a."check_item_id" ' if with_checks else "")
        + 'WHERE a."annotator_id" = %s AND a."state" = %s AND a."expires_at" > %s AND (c."study_id" = %s'
        + (' OR k."study_id" = %s)' if with_checks else ")")
        + ' ORDER BY a."issued_at" LIMIT 1',
        [annotator.pk, Assignment.State.LEASED, sql.db_datetime(timezone.now()), study.pk]
        + ([study.pk] if with_checks else []))
    return assignment_from_row(row) if row is not None else None


def hit_of_study(*, study: Study, assignment_id: int) -> Assignment | None:
    """The HIT ``assignment_id`` of ``study`` (a comparison's or a check's), or None (a read).

    A comparison's HIT comes with its comparison (``study`` attached) and the item's external
    id loaded, as a submit needs them: one statement.
    """
    row = sql.one(
        f'SELECT {_ASSIGNMENT_SELECT}, c."pair_id", c."item_id", c."first_id", c."second_id", i."external_id" '
        f'FROM {sql.ASSIGNMENT} a LEFT JOIN {sql.COMPARISON} c ON c."id" = a."comparison_id" '
        f'LEFT JOIN {sql.ITEM} i ON i."id" = c."item_id" LEFT JOIN {sql.CHECK_ITEM} k ON k."id" = a."check_item_id" '
        'WHERE a."id" = %s AND (c."study_id" = %s OR k."study_id" = %s)', [assignment_id, study.pk, study.pk])
    if row is None:
        return None
    assignment = assignment_from_row(row[:len(ASSIGNMENT_COLUMNS)])
    if assignment.comparison_id is not None:
        pair_id, item_id, first_id, second_id, external_id = row[len(ASSIGNMENT_COLUMNS):]
        comparison = sql.instance(Comparison, ("id", "study_id", "item_id", "first_id", "second_id", "pair_id"),
                                  [assignment.comparison_id, study.pk, item_id, first_id, second_id, pair_id])
        comparison.study = study
        comparison.item = sql.instance(Item, ("id", "study_id", "external_id"), [item_id, study.pk, external_id])
        assignment.comparison = comparison
    return assignment


@retry_transient
def hit_next_for_annotator(*, study: Study, annotator: Annotator) -> Assignment | None:
    """The annotator's live lease, or a new one; None when there is no work for them now.

    A live lease is returned again (a reload does not skip work), also while the study is
    paused; a study that is not running leases nothing new. A new lease goes to an open
    round whose quota exceeds its live leases, the round closest to full first (a full round
    is decided sooner than many half-full ones), and to a comparison of that pair that has
    fewer than ``ratings_per_item`` judgements, no live lease, no judgement or skip by this
    annotator and an item that is not withdrawn, chosen by the study's item choice. A worker
    who reached the study's ``session_hits_max`` or whose ``session_minutes`` are up gets
    nothing new (selectors.crowd_session). Retried as a whole after a transient database
    error, so a lease whose commit was cut off is found as the current lease.
    """
    if study.exclusions_active and _excluded(study, annotator):
        return None
    current = hit_current(study=study, annotator=annotator)
    if current is not None:
        return current
    if study.status != Study.Status.RUNNING:
        return None
    if (study.session_hits_max or study.session_minutes) and not _session_may_lease(study, annotator):
        return None
    if study.check_every or study.onboarding_checks or study.repeat_every:
        turn = _check_turn(study, annotator)
        if turn is not None:
            return turn.hit  # a check, or None: the worker failed onboarding
    rounds.sweeper_ensure()
    lease = _lease(study, annotator)
    if lease is None and leases_reclaim(study=study):
        lease = _lease(study, annotator)  # expired leases went back to the pool: look again
    return lease


def _check_turn(study: Study, annotator: Annotator):
    from .checks import check_turn

    return check_turn(study=study, annotator=annotator)


def _excluded(study: Study, annotator: Annotator) -> bool:
    from .quality import annotator_is_excluded

    return annotator_is_excluded(study=study, annotator=annotator)


def _session_may_lease(study: Study, annotator: Annotator) -> bool:
    from ..selectors import crowd_session

    return crowd_session(study=study, annotator=annotator).may_lease


def _lease(study: Study, annotator: Annotator) -> Assignment | None:
    rng = random.Random(f"{study.protocol_seed}:{annotator.pk}:{timezone.now().timestamp()}")
    with transaction.atomic():
        open_pairs = sql.rows(f'SELECT "id", "round", "quota_left", "leased" FROM {sql.PAIR} '
                              'WHERE "study_id" = %s AND "status" = %s AND "quota_left" > "leased"',
                              [study.pk, adaptive.OPEN])
        if not open_pairs:
            return None
        order = [(pk, round_) for *_, pk, round_ in sorted(
            (quota - leased, rng.random(), pk, round_) for pk, round_, quota, leased in open_pairs)]
        # SQLite: this transaction holds the database's write lock, so the rows just read are
        # current. PostgreSQL: lock the pair row, skipping rows that other leases hold. (One
        # query that picks and locks, ORDER BY ... LIMIT 1 FOR UPDATE SKIP LOCKED, saves a
        # statement but deadlocked under 20 concurrent leases and submits: its waits for a
        # busy pair ran down the sorted rows while holding the pairs already tried.)
        row_locks = connection.features.has_select_for_update
        busy = []
        for pk, round_ in order:
            if row_locks and not _lock_open_pair(pk, skip_locked=True):
                busy.append((pk, round_))
                continue
            lease = _lease_in_pair(study, pk, round_, annotator, rng)
            if lease is not None:
                return lease
    # Every open pair that might serve them was locked by another lease: wait for one rather
    # than say "no work" -- each wait in a transaction of its own, holding no other pair's lock
    # (two leases that waited for each other's pair while holding the pairs they had tried
    # deadlocked on PostgreSQL). Nothing was written above: no lease, no change.
    for pk, round_ in busy[:3]:
        with transaction.atomic():
            if _lock_open_pair(pk, skip_locked=False):
                lease = _lease_in_pair(study, pk, round_, annotator, rng)
                if lease is not None:
                    return lease
    return None


def _lock_open_pair(pk: int, *, skip_locked: bool) -> bool:
    """Lock the pair row if it still has unmet quota (False when skipped or no longer open)."""
    return sql.one(f'SELECT "id" FROM {sql.PAIR} WHERE "id" = %s AND "status" = %s AND "quota_left" > "leased"'
                   + sql.for_update(skip_locked=skip_locked), [pk, adaptive.OPEN]) is not None


def _lease_in_pair(study: Study, pair_id: int, pair_round: int, annotator: Annotator,
                   rng: random.Random) -> Assignment | None:
    """Lease a comparison of the pair ``pair_id`` to ``annotator`` (None if none fits).

    Precondition: the caller holds the pair's row lock (or SQLite's write lock).
    """
    now = timezone.now()
    # The decision weights each item by its draw's chance (protocol.allocation.design_weights);
    # a uniform draw needs none.
    chance = None
    if study.item_choice == Study.ItemChoice.STRATIFIED:
        chosen, lease, chance = _choose_stratified(study, pair_id, annotator, now, rng)
    else:
        # A uniform or weighted draw depends on the available comparisons only: read only those
        # (a uniform one draws in the database and reads one row).
        available = (
            f'SELECT c."id", c."lease_expires_at", c."separability" FROM {sql.COMPARISON} c '
            f'JOIN {sql.ITEM} i ON i."id" = c."item_id" '
            'WHERE c."pair_id" = %s AND c."judgement_count" < %s AND NOT i."withdrawn" '
            'AND (c."lease_expires_at" IS NULL OR c."lease_expires_at" <= %s) '
            f'AND NOT EXISTS (SELECT 1 FROM {sql.JUDGEMENT} j WHERE j."annotator_id" = %s AND j."comparison_id" = c."id") '
            f'AND NOT EXISTS (SELECT 1 FROM {sql.ASSIGNMENT} s WHERE s."annotator_id" = %s '
            'AND s."comparison_id" = c."id" AND s."state" = %s)')
        params = [pair_id, study.ratings_per_item, sql.db_datetime(now), annotator.pk, annotator.pk,
                  Assignment.State.SKIPPED]
        if study.item_choice == Study.ItemChoice.UNIFORM:
            picked = sql.one(available + " ORDER BY RANDOM() LIMIT 1", params)
            if picked is None:
                return None
            chosen, lease, _ = picked
        else:
            rows = sql.rows(available, params)
            if not rows:
                return None
            policy = study.item_choice if any(r[2] is not None for r in rows) else Study.ItemChoice.UNIFORM
            candidates, separability = [str(r[0]) for r in rows], [r[2] if r[2] is not None else 0.0 for r in rows]
            chosen = int(choose_items(candidates, separability, [], 1, policy=policy,
                                      temperature=study.item_choice_temperature, seed=rng.randrange(2**31))[0])
            lease = next(r[1] for r in rows if r[0] == chosen)
            if policy != Study.ItemChoice.UNIFORM:
                chance = selection_probability(candidates, separability, [], str(chosen), policy=policy,
                                               temperature=study.item_choice_temperature)
    if chosen is None:
        return None
    expired_lease = lease is not None
    if expired_lease:
        # Taking over an expired lease: the pair's live-lease count stays the same.
        sql.execute(f'UPDATE {sql.ASSIGNMENT} SET "state" = %s WHERE "comparison_id" = %s AND "state" = %s',
                    [Assignment.State.EXPIRED, chosen, Assignment.State.LEASED])
    else:
        sql.execute(f'UPDATE {sql.PAIR} SET "leased" = "leased" + 1 WHERE "id" = %s', [pair_id])
    expires = now + timedelta(seconds=study.lease_timeout_seconds)
    sql.execute(f'UPDATE {sql.COMPARISON} SET "lease_expires_at" = %s WHERE "id" = %s',
                [sql.db_datetime(expires), chosen])
    assignment = Assignment(annotator=annotator, comparison_id=chosen, shown_swapped=rng.random() < 0.5,
                            round=pair_round, issued_at=now, expires_at=expires, draw_probability=chance)
    sql.insert(assignment, ASSIGNMENT_COLUMNS[1:])
    return assignment


def _choose_stratified(study: Study, pair_id: int, annotator: Annotator, now, rng: random.Random):
    """(comparison id, its expired lease or None, the draw's chance) drawn by strata, or
    (None, None, None).

    All the pair's comparisons are read: the strata's bins come from all of them (they do not
    move as items are judged); the unavailable ones are excluded from the draw.
    """
    judged = Judgement.objects.filter(comparison_id=OuterRef("pk"), annotator_id=annotator.pk)
    skipped = Assignment.objects.filter(comparison_id=OuterRef("pk"), annotator_id=annotator.pk,
                                        state=Assignment.State.SKIPPED)
    comparisons = list(Comparison.objects.filter(pair_id=pair_id)
                       .annotate(mine=Exists(judged) | Exists(skipped))
                       .values_list("id", "judgement_count", "lease_expires_at", "separability", "mine",
                                    "item__withdrawn"))
    unavailable = [str(pk) for pk, count, lease, _, mine, withdrawn in comparisons
                   if count >= study.ratings_per_item or (lease is not None and lease > now) or mine or withdrawn]
    if len(unavailable) == len(comparisons):
        return None, None, None
    has_separability = any(c[3] is not None for c in comparisons)
    policy = study.item_choice if has_separability else Study.ItemChoice.UNIFORM
    candidates = [str(c[0]) for c in comparisons]
    separability = [c[3] if c[3] is not None else 0.0 for c in comparisons]
    chosen = int(choose_items(candidates, separability, unavailable, 1, policy=policy,
                              temperature=study.item_choice_temperature, seed=rng.randrange(2**31))[0])
    chance = None if policy == Study.ItemChoice.UNIFORM else selection_probability(
        candidates, separability, unavailable, str(chosen), policy=policy, temperature=study.item_choice_temperature)
    return chosen, next(c[2] for c in comparisons if c[0] == chosen), chance


def hit_release(*, assignment: Assignment, skipped: bool = False) -> bool:
    """Give a live lease back to the pool (the annotator skipped it or left); False if not live.

    ``skipped``: the annotator chose not to judge it; the assignment is kept as SKIPPED and
    its comparison is never served to that annotator again.
    """
    state = Assignment.State.SKIPPED if skipped else Assignment.State.EXPIRED
    if assignment.kind != JudgementKind.REAL:
        from .checks import check_release

        return check_release(assignment=assignment, state=state)
    return _release(assignment.pk, state)


@retry_transient
def _release(assignment_id: int, state: str) -> bool:
    with transaction.atomic():
        pair_id = Comparison.objects.filter(assignments__pk=assignment_id).values_list("pair_id", flat=True).first()
        PairState.objects.select_for_update().filter(pk=pair_id).first()
        return _expire_locked(assignment_id, state)


def hit_flag(*, assignment: Assignment, annotator: Annotator, reason: str, note: str = "") -> ItemFlag:
    """Record the annotator's report of a problem with the HIT's item and skip the HIT.

    Precondition: ``assignment`` is ``annotator``'s. The flag is for researchers (admin);
    the item stays in the study until a researcher withdraws it (services.item_withdraw).
    """
    if assignment.annotator_id != annotator.pk:
        raise HitError("this HIT belongs to another annotator")
    if assignment.check_item_id is not None:
        # A check looks like any HIT; a report of one is not an item's problem, so it only skips.
        # (A repeat's report is its comparison's, as for the original.)
        if reason not in ItemFlag.Reason.values:
            raise HitError(f"reason: {reason!r} is not a valid choice")
        hit_release(assignment=assignment, skipped=True)
        return ItemFlag(reason=reason, note=note.strip(), annotator=annotator)
    item_id = Comparison.objects.filter(pk=assignment.comparison_id).values_list("item_id", flat=True).get()
    flag = ItemFlag(item_id=item_id, assignment=assignment, annotator=annotator, reason=reason, note=note.strip())
    try:
        flag.full_clean(exclude=["item", "assignment", "annotator"])
    except ValidationError as exc:
        raise HitError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
    flag.save()
    hit_release(assignment=assignment, skipped=True)
    return flag


def _expire_locked(assignment_id: int, state: str = Assignment.State.EXPIRED) -> bool:
    """Mark a LEASED assignment ``state`` (expired or skipped) and free its comparison; call
    holding its pair's lock."""
    assignment = Assignment.objects.filter(pk=assignment_id, state=Assignment.State.LEASED).first()
    if assignment is None:
        return False
    Assignment.objects.filter(pk=assignment_id).update(state=state)
    comparison = Comparison.objects.get(pk=assignment.comparison_id)
    Comparison.objects.filter(pk=comparison.pk).update(lease_expires_at=None)
    PairState.objects.filter(pk=comparison.pair_id).update(leased=F("leased") - 1)
    return True


@retry_transient
def leases_reclaim(*, study: Study) -> int:
    """Give expired leases of the study back to the pool; returns how many."""
    now = timezone.now()
    pairs = set(Comparison.objects.filter(study=study, lease_expires_at__lt=now).values_list("pair_id", flat=True))
    return sum(_reclaim_pair(pair_id, now) for pair_id in pairs)


def _reclaim_pair(pair_id: int, now) -> int:
    with transaction.atomic():
        PairState.objects.select_for_update().filter(pk=pair_id).first()
        # Repeats hold no counter (services/checks.py): they simply lapse.
        expired = list(Assignment.objects.filter(comparison__pair_id=pair_id, state=Assignment.State.LEASED,
                                                 kind=JudgementKind.REAL, expires_at__lt=now)
                       .values_list("id", flat=True))
        return sum(_expire_locked(pk) for pk in expired)


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
    judgement unchanged. An answer sooner than the study's ``min_seconds_per_hit`` after the
    HIT was issued (``issued_at``, when it was first rendered) is refused, and so is any answer
    of a worker excluded from the study. The judgement stores the client's
    ``seconds_on_task`` and the server's own ``server_seconds`` (issue to answer). A live lease is
    always accepted while its pair's round is open. A
    lease that expired is accepted only if its comparison is free and its pair's round still
    needs a judgement that no live lease will bring. Otherwise HitError, and the lease is
    dead for good (never served again). A submit that fills the pair's round schedules the
    round close after commit.
    """
    if shown_value not in (-1, 0, 1):
        raise HitError(f"answer must be -1, 0 or 1, got {shown_value!r}")
    if not idempotency_key or len(idempotency_key) > 64:
        raise HitError("a submit needs an idempotency key of at most 64 characters")
    if assignment.annotator_id != annotator.pk:
        raise HitError("this HIT belongs to another annotator")
    if assignment.kind != JudgementKind.REAL:  # a check or a repeat: never the protocol's
        from .checks import check_submit

        # A check is a HIT like any other to the worker: it keeps the study's minimum time too.
        _refuse_too_soon(assignment, (assignment.check_item if assignment.check_item_id
                                      else assignment.comparison).study, idempotency_key)
        return check_submit(assignment=assignment, annotator=annotator, shown_value=shown_value,
                            idempotency_key=idempotency_key, seconds_on_task=seconds_on_task)
    if not Assignment._meta.get_field("comparison").is_cached(assignment):
        assignment = Assignment.objects.select_related("comparison__study", "comparison__item").get(pk=assignment.pk)
    _refuse_too_soon(assignment, assignment.comparison.study, idempotency_key)
    outcome = _submit(assignment, annotator.pk, shown_value, idempotency_key, seconds_on_task)
    if isinstance(outcome, HitError):
        raise outcome
    return outcome


def _refuse_too_soon(assignment: Assignment, study: Study, idempotency_key: str) -> None:
    """HitError for an answer sooner than ``study.min_seconds_per_hit`` after the HIT was
    issued (a repeated submit of an answer already stored is no new answer)."""
    minimum = study.min_seconds_per_hit
    if minimum and timezone.now() - assignment.issued_at < timedelta(seconds=minimum):
        if not Judgement.objects.filter(idempotency_key=idempotency_key, assignment_id=assignment.pk).exists():
            raise HitError(f"please read both texts: this study asks for at least {minimum} seconds per comparison")


# The columns a submit writes of a new Judgement (its primary key comes back).
JUDGEMENT_COLUMNS = ("comparison_id", "check_item_id", "annotator_id", "assignment_id", "value", "seconds_on_task",
                     "server_seconds", "kind", "idempotency_key", "source", "created_at")


class _Refused(Exception):
    """Raised inside a submit's transaction to roll it back; the message is the refusal."""


@retry_transient
def _submit(assignment: Assignment, annotator_id: int, shown_value: int, key: str,
            seconds_on_task: float | None) -> Judgement | HitError:
    try:
        with transaction.atomic():
            return _submit_locked(assignment, annotator_id, shown_value, key, seconds_on_task)
    except IntegrityError:
        # Rolled back whole (no savepoint: nothing before the insert needs keeping).
        return HitError("this submission key was already used for another HIT")
    except _Refused as refused:
        return HitError(str(refused))


def _submit_locked(assignment: Assignment, annotator_id: int, shown_value: int, key: str,
                   seconds_on_task: float | None) -> Judgement | HitError:
    """The submit's transaction (the caller holds it open). Precondition: ``assignment.comparison``
    and its ``study`` and ``item`` are loaded.

    A refusal that must stay dead (a live lease of a pair no longer open, or of a comparison the
    annotator judged) is returned and committed; a refusal with nothing to keep raises _Refused.
    """
    comparison = assignment.comparison
    study = comparison.study
    row = protocol_state.pair_row_locked(comparison.pair_id)
    # Whether the worker is excluded is read here, under the pair's lock, in a statement of its
    # own (on PostgreSQL a statement's snapshot predates the lock wait of the statement that
    # took it): a re-decision (services/quality.py) that locks the pair after this commits sees
    # this judgement, and one that locked it before made this read see the exclusion.
    is_excluded = sql.one(f'SELECT 1 FROM {sql.EXCLUSION} WHERE "study_id" = %s AND "annotator_id" = %s '
                          'AND "excluded" LIMIT 1', [study.pk, annotator_id]) is not None
    done = sql.rows(f'SELECT "assignment_id", "idempotency_key", "annotator_id" FROM {sql.JUDGEMENT} '
                    'WHERE "comparison_id" = %s', [comparison.pk])
    for assignment_id, earlier_key, _ in done:
        if assignment_id == assignment.pk:
            if earlier_key == key:  # the same submit again (a retry, or a double click)
                return Judgement.objects.get(assignment_id=assignment.pk)
            return HitError("this HIT was already answered")
    pair = protocol_state.pair_state_of(row)
    refusal = None
    if is_excluded:
        refusal = "your answers are no longer needed in this study; thank you for your time"
    elif pair.status != adaptive.OPEN:
        refusal = "this comparison is no longer needed: its pair was decided or its round is full"
    elif any(by == annotator_id for *_, by in done):
        refusal = "you have already judged this comparison"
    if refusal is not None:
        # Committed (not rolled back with an exception): the dead lease is never served again.
        _expire_locked(assignment.pk)
        return HitError(refusal)
    value = -shown_value if assignment.shown_swapped else shown_value
    # The server's own measure of time on task: the lease is made when the HIT is rendered
    # (the POST that ends the previous HIT, or the start link), so issued_at is render time.
    now = timezone.now()
    server_seconds = max((now - assignment.issued_at).total_seconds(), 0.0)
    judgement = Judgement(comparison_id=comparison.pk, annotator_id=annotator_id, assignment_id=assignment.pk,
                          value=value, seconds_on_task=seconds_on_task, server_seconds=server_seconds,
                          idempotency_key=key, created_at=now)
    # Field validation only: the references were just read under the lock, and uniqueness
    # is the database's (a query per constraint would double the submit's cost).
    judgement.full_clean(exclude=["comparison", "annotator", "assignment"], validate_unique=False,
                         validate_constraints=False)
    sql.insert(judgement, JUDGEMENT_COLUMNS)
    # The lease is held when the assignment is still LEASED (under the pair's lock): one
    # conditional write both checks and ends it.
    holds_lease = sql.execute(f'UPDATE {sql.ASSIGNMENT} SET "state" = %s WHERE "id" = %s AND "state" = %s',
                              [Assignment.State.SUBMITTED, assignment.pk, Assignment.State.LEASED]) == 1
    if not holds_lease:
        # An expired lease (taken over, reclaimed or skipped): accepted only if its comparison is
        # free and the round still needs a judgement that no live lease will bring.
        judgement_count, lease_expires_at = sql.one(
            f'SELECT "judgement_count", "lease_expires_at" FROM {sql.COMPARISON} WHERE "id" = %s', [comparison.pk])
        if lease_expires_at is not None or judgement_count >= study.ratings_per_item or row.quota_left <= row.leased:
            raise _Refused("this HIT expired and its comparison is no longer needed")
        sql.execute(f'UPDATE {sql.ASSIGNMENT} SET "state" = %s WHERE "id" = %s',
                    [Assignment.State.SUBMITTED, assignment.pk])
    sql.execute(f'UPDATE {sql.COMPARISON} SET "judgement_count" = "judgement_count" + 1'
                + (', "lease_expires_at" = NULL' if holds_lease else "") + ' WHERE "id" = %s', [comparison.pk])
    if holds_lease:
        row.leased -= 1
    one_pair = adaptive.ProtocolState(protocol_state.protocol_settings(study), (pair,), study.protocol_closes)
    recorded = adaptive.record_judgement(one_pair, *pair.key, comparison.item.external_id, value,
                                         probability=assignment.draw_probability).pairs[0]
    protocol_state.pair_write(row, recorded)
    protocol_state.pair_row_save(row, also=("leased",))
    if recorded.status == adaptive.FILLED:
        transaction.on_commit(lambda: rounds.schedule_close(study.pk))
    return judgement
