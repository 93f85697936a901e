"""Serving HITs: leases and submits (writes), lock-light.

No study-wide lock on this path. A lease locks one pair row (on PostgreSQL with
``skip_locked``, so concurrent annotators spread over the open pairs), a submit locks the
pair row of its comparison; on SQLite every write transaction is short and ``IMMEDIATE``.
Serving reads counters kept up to date on write instead of aggregating per request:

- ``PairState.quota_left`` (judgements the pair's open round still needs) and
  ``PairState.leased`` (its live leases): a pair is served while ``quota_left > leased``;
- ``Comparison.judgement_count`` and ``Comparison.lease_expires_at`` (one live lease at most).

Every function here keeps serving's invariants under the pair's row lock; they are stated once,
in docs/architecture.md, "Serving invariants".

A submit that fills its pair's round schedules the round close after commit
(annotation/jobs.py, services/runtime.py); it never waits for a decision.

Every statement of a lease, a submit, a release and a reclaim is a named function of the
serving store (annotation/serving/store.py, docs/serving.md: the ORM's building them was two
thirds of the loop's CPU); the rarer paths (checks, repeats, stratified choice) keep the ORM.
"""
from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Mapping
from datetime import timedelta
from datetime import timezone as dt_timezone

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from protocol import adaptive, rubric
from protocol.allocation import choose_one, kind_turn

from .. import jobs
from ..errors import HitError
from ..models import (
    Annotator,
    Assignment,
    Comparison,
    ItemFlag,
    Judgement,
    JudgementKind,
    Study,
)
from ..rubrics import answers_from_screen, is_rubric, lane_values, study_rubric
from ..selectors.quality import annotator_is_excluded
from ..selectors.serving import crowd_session, hit_current
from ..serving import protocol_state, store
from ..serving.process_cache import ProcessCache
from .checks import check_release, check_submit, check_turn
from .transactions import retry_transient


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
    return store.annotator_of_worker(platform, worker_id, session_id, timezone.now())


# ``hit_next_for_annotator``'s ``current`` when the caller has not read the live lease.
UNREAD = object()


def hit_next_for_annotator(*, study: Study, annotator: Annotator, current: Assignment | None | object = UNREAD
                           ) -> Assignment | None:
    """The annotator's live lease, or a new one; None when there is no work for them now.

    A live lease is returned again (a reload does not skip work), also while the study is
    paused; a study that is not running leases nothing new. A new lease goes to an open
    round whose quota exceeds its live leases, the round closest to full first (a full round
    is decided sooner than many half-full ones), and to a comparison of that pair that has
    fewer than ``ratings_per_item`` judgements, no live lease, no judgement or skip by this
    annotator and an item that is not withdrawn, chosen by the study's item choice. A worker
    who reached the study's ``session_hits_max`` or whose ``session_minutes`` are up gets
    nothing new (selectors.serving.crowd_session). Retried as a whole after a transient database
    error, so a lease whose commit was cut off is found as the current lease.

    ``current``: the annotator's live lease (or None) as the caller read it just before
    (``selectors.serving.hit_current_and_done``: a screen reads it with the worker's count, a
    statement fewer); a retry reads it again.
    """
    return _hit_next(study, annotator, [] if current is UNREAD else [current])


@retry_transient
def _hit_next(study: Study, annotator: Annotator, read: list) -> Assignment | None:
    """``hit_next_for_annotator``; ``read``: the live lease the caller read, taken by the first
    attempt only (a retry reads it: a lease whose commit was cut off is then found)."""
    if study.exclusions_active and annotator_is_excluded(study=study, annotator=annotator):
        return None
    current = read.pop() if read else hit_current(study=study, annotator=annotator)
    if current is not None:
        return current
    if study.status != Study.Status.RUNNING:
        return None
    if (study.session_hits_max or study.session_minutes) and not crowd_session(study=study, annotator=annotator).may_lease:
        return None
    if study.check_every or study.onboarding_checks or study.repeat_every:
        turn = check_turn(study=study, annotator=annotator)
        if turn is not None:
            return turn.hit  # a check, or None: the worker failed onboarding
    jobs.sweeper_ensure()
    lease = _lease(study, annotator)
    if lease is None and leases_reclaim(study=study):
        lease = _lease(study, annotator)  # expired leases went back to the pool: look again
    return lease


def _lease(study: Study, annotator: Annotator) -> Assignment | None:
    rng = random.Random(f"{study.protocol_seed}:{annotator.pk}:{timezone.now().timestamp()}")
    with transaction.atomic():
        # The round closest to full first (a full round is decided sooner than many half-full
        # ones), ties at random (the pairs' tie-breaks, drawn anew at each write of their state:
        # store.open_pairs); the first few, then, if none of them serves this annotator, all.
        # PostgreSQL tries the first one's lock in the same statement (SKIP LOCKED, as below).
        order, first_locked = store.open_pairs_first_locked(study.pk, adaptive.OPEN, first=OPEN_PAIRS_TRIED_FIRST)
        first_id = order[0].id if order else None
        if len(order) == OPEN_PAIRS_TRIED_FIRST:
            order = itertools.chain(order, _later_pairs(study, {pair.id for pair in order}))
        # SQLite: this transaction holds the database's write lock, so the rows just read are
        # current. PostgreSQL: lock the pair row, skipping rows that other leases hold. (One
        # query that picks and locks, ORDER BY ... LIMIT 1 FOR UPDATE SKIP LOCKED, saves a
        # statement but deadlocked under 20 concurrent leases and submits: its waits for a
        # busy pair ran down the sorted rows while holding the pairs already tried. The first
        # pair's lock taken with the read locks that one row by its id, skipping it if busy.)
        row_locks = connection.features.has_select_for_update
        busy = []
        for pair in order:
            if row_locks and not (first_locked if pair.id == first_id else
                                  store.pair_lock_open(pair.id, adaptive.OPEN, skip_locked=True)):
                busy.append(pair)
                continue
            lease = _lease_in_pair(study, pair, annotator, rng)
            if lease is not None:
                return lease
    # Every open pair that might serve them was locked by another lease: wait for one rather
    # than say "no work" -- each wait in a transaction of its own, holding no other pair's lock
    # (two leases that waited for each other's pair while holding the pairs they had tried
    # deadlocked on PostgreSQL). Nothing was written above: no lease, no change.
    for pair in busy[:3]:
        with transaction.atomic():
            if store.pair_lock_open(pair.id, adaptive.OPEN, skip_locked=False):
                lease = _lease_in_pair(study, pair, annotator, rng)
                if lease is not None:
                    return lease
    return None


OPEN_PAIRS_TRIED_FIRST = 24
# A uniform draw looks at this many of the study's items, drawn at random, before all of them.
UNIFORM_SAMPLE = 32


def _uniform_draw(study: Study, pair: store.OpenPair, annotator: Annotator, rng: random.Random, now) -> list:
    """One item drawn uniformly from those of the pair a lease to the annotator may take (as a
    one-row list; [] if none).

    The database draws among the free items of UNIFORM_SAMPLE of the study's items taken at
    random, and only when none of those is free among all the pair's items. Still exactly
    uniform: the sample treats every item alike, so any two free items are equally likely to be
    in it and drawn from it -- and reading 32 items by their ids replaced a scan of all of them
    (2,000 at an arena's scale; a sixth of the web processes' time under load).
    """
    items = _study_item_ids(study)
    among = rng.sample(items, UNIFORM_SAMPLE) if len(items) > UNIFORM_SAMPLE else ()
    rows = store.pair_items(study.pk, pair, annotator.pk, ratings_per_item=study.ratings_per_item, now=now,
                            one_at_random=True, among=among)
    if not rows and among:
        rows = store.pair_items(study.pk, pair, annotator.pk, ratings_per_item=study.ratings_per_item, now=now,
                                one_at_random=True)
    return rows


# (study id, created_at) -> the study's item ids, read once per process (items are stored by
# the import alone).
_item_ids: ProcessCache[list[int]] = ProcessCache()


def _study_item_ids(study: Study) -> list[int]:
    return _item_ids.get((study.pk, study.created_at), lambda: store.study_item_ids(study.pk))


# (study id, created_at) -> item id -> its kind of prompt ({} when the items have none), read
# once per process (items are stored by the import alone).
_item_kinds: ProcessCache[dict[int, str]] = ProcessCache()


def _study_item_kinds(study: Study) -> dict[int, str]:
    return _item_kinds.get((study.pk, study.created_at), lambda: store.study_item_kinds(study.pk))


def _later_pairs(study: Study, tried: set[int]):
    """The open pairs beyond the first ones tried (read only when none of those served)."""
    yield from (pair for pair in store.open_pairs(study.pk, adaptive.OPEN) if pair.id not in tried)


def _lease_in_pair(study: Study, pair: store.OpenPair, annotator: Annotator, rng: random.Random) -> Assignment | None:
    """Lease an item of ``pair`` to ``annotator`` (None if none fits), storing the pair's
    comparison of the item if this is its first lease.

    Precondition: the caller holds the pair's row lock (or SQLite's write lock).
    """
    now = timezone.now()
    kinds = _study_item_kinds(study) if study.design.uses_prompt_kinds else {}
    if kinds:
        return _lease_row(study, pair, annotator, rng, now, _kind_turn_row(study, pair, annotator, rng, now, kinds),
                          None)
    uniform = study.item_choice == Study.ItemChoice.UNIFORM
    if study.item_choice == Study.ItemChoice.STRATIFIED:
        # The strata's bins come from all the pair's items (they do not move as items are
        # judged): read them all, and exclude the unavailable ones from the draw.
        rows = store.pair_items(study.pk, pair, annotator.pk)
        unavailable = [str(r.item_id) for r in rows
                       if r.judgement_count >= study.ratings_per_item
                       or (r.lease_expires_at is not None and r.lease_expires_at > now) or r.mine or r.withdrawn]
        if len(unavailable) == len(rows):
            return None
    elif uniform:
        rows = _uniform_draw(study, pair, annotator, rng, now)
        if not rows:
            return None
    else:
        # A weighted draw depends on the available items only: read only those.
        rows = store.pair_items(study.pk, pair, annotator.pk, ratings_per_item=study.ratings_per_item, now=now)
        if not rows:
            return None
        unavailable = []
    # The decision weights each item by its draw's chance (protocol.allocation.design_weights);
    # a uniform draw needs none.
    chance = None
    if uniform:
        chosen = rows[0]
    else:
        policy = study.item_choice if any(r.separability is not None for r in rows) else Study.ItemChoice.UNIFORM
        drawn, chance = choose_one([str(r.item_id) for r in rows],
                                   [r.separability if r.separability is not None else 0.0 for r in rows],
                                   unavailable, policy=policy, temperature=study.item_choice_temperature,
                                   seed=rng.randrange(2**31))
        chosen = next(r for r in rows if str(r.item_id) == drawn)
        if policy == Study.ItemChoice.UNIFORM:
            chance = None
    return _lease_row(study, pair, annotator, rng, now, chosen, chance)


def _kind_turn_row(study: Study, pair: store.OpenPair, annotator: Annotator, rng: random.Random, now,
                   kinds: dict[int, str]) -> store.PairItem | None:
    """The pair's item to lease when its items take turns over the kinds of prompt (a design
    that uses them, protocol.allocation.kind_turn; the study's item choice is not used), or
    None when none is available. Reads all the pair's items: a kind's turn counts the items
    judged or leased in the pair."""
    rows = store.pair_items(study.pk, pair, annotator.pk)
    live = [r.lease_expires_at is not None and r.lease_expires_at > now for r in rows]
    available = [not (r.judgement_count >= study.ratings_per_item or busy or r.mine or r.withdrawn)
                 for r, busy in zip(rows, live)]
    if not any(available):
        return None
    taken = [r.judgement_count > 0 or busy for r, busy in zip(rows, live)]
    return rows[kind_turn([kinds[r.item_id] for r in rows], taken, available, rng.randrange(2**31))]


def _lease_row(study: Study, pair: store.OpenPair, annotator: Annotator, rng: random.Random, now,
               chosen: store.PairItem | None, chance: float | None) -> Assignment | None:
    """Lease the pair's item ``chosen`` (None: nothing to lease) to the annotator, its draw's
    ``chance`` recorded (None: a draw the decision treats as uniform)."""
    if chosen is None:
        return None
    expires = now + timedelta(seconds=study.lease_timeout_seconds)
    assignment = Assignment(annotator=annotator, comparison_id=chosen.comparison_id,
                            shown_swapped=rng.random() < 0.5, round=pair.round, issued_at=now, expires_at=expires,
                            draw_probability=chance)
    # Taking over an expired lease keeps the pair's live-lease count; a comparison_id of None is
    # the item's first lease in this pair (its comparison is stored with the lease).
    store.lease_write(study.pk, pair, chosen.item_id, assignment, taking_over=chosen.lease_expires_at is not None)
    return assignment


def hit_release(*, assignment: Assignment, skipped: bool = False) -> bool:
    """Give a live lease back to the pool (the annotator skipped it or left); False if not live.

    ``skipped``: the annotator chose not to judge it; the assignment is kept as SKIPPED and
    its comparison is never served to that annotator again.
    """
    state = Assignment.State.SKIPPED if skipped else Assignment.State.EXPIRED
    if assignment.kind != JudgementKind.REAL:
        return check_release(assignment=assignment, state=state)
    return _release(assignment.pk, state)


@retry_transient
def _release(assignment_id: int, state: str) -> bool:
    with transaction.atomic():
        pair_id = store.pair_of_assignment(assignment_id)
        if pair_id is None:
            return False
        store.pair_row_locked(pair_id)
        return store.lease_expire(assignment_id, state)


def lease_token(expires_at) -> str:
    """What a page that shows a HIT knows of its lease: its expiry, exact to the microsecond.
    ``hit_leave`` releases a lease only while it still has this expiry; ``hit_keep`` moves it."""
    return expires_at.astimezone(dt_timezone.utc).isoformat()


def hit_leave(*, assignment: Assignment, annotator: Annotator, lease: str) -> bool:
    """The worker left the page that showed this HIT (closed the tab, went elsewhere, or
    reloaded it): give its lease back at once, so that the comparison is served to others
    (a closed tab held it for the lease timeout: 15 minutes by default). Not a skip: the worker
    may be served it again. ``lease``: the page's ``lease_token``; a lease renewed since (a
    reload's page holds it anew: ``hit_keep``), submitted, skipped or ended otherwise is left as
    it is, so a late or repeated release does nothing. True when a lease was released.
    """
    if assignment.annotator_id != annotator.pk:
        raise HitError("this HIT belongs to another annotator")
    if assignment.kind != JudgementKind.REAL:
        return False  # a check or a repeat holds no comparison from anyone: it simply lapses
    return _leave(assignment.pk, lease)


@retry_transient
def _leave(assignment_id: int, lease: str) -> bool:
    with transaction.atomic():
        pair_id = store.pair_of_assignment(assignment_id)
        if pair_id is None:
            return False
        store.pair_row_locked(pair_id)
        held = store.lease_held(assignment_id)
        if held.state != Assignment.State.LEASED or lease_token(held.expires_at) != lease:
            return False
        return store.lease_expire(assignment_id, Assignment.State.EXPIRED)


def hit_keep(*, study: Study, assignment: Assignment, annotator: Annotator) -> str | None:
    """The worker's page shows this HIT again (a reload, a page restored by the back button):
    hold its lease anew, for the study's lease timeout from now, and return its new
    ``lease_token``. The page before sends its release when it goes (``hit_leave``, on
    ``pagehide``: a reload too, after the new page was read), so a lease released is taken back
    while its comparison is free and still needed, in the same round, and the worker holds no
    other HIT; None when it cannot be (taken by another worker, judged, skipped, the round
    closed): the page then asks for the next HIT. A later release sent with the old token
    does nothing.
    """
    if assignment.annotator_id != annotator.pk:
        raise HitError("this HIT belongs to another annotator")
    if assignment.kind != JudgementKind.REAL:  # a check or a repeat: nobody else waits for it
        live = assignment.state == Assignment.State.LEASED and assignment.expires_at > timezone.now()
        return lease_token(assignment.expires_at) if live else None
    return _keep(study, assignment.pk, annotator.pk)


@retry_transient
def _keep(study: Study, assignment_id: int, annotator_id: int) -> str | None:
    now = timezone.now()
    expires = now + timedelta(seconds=study.lease_timeout_seconds)
    with transaction.atomic():
        pair_id = store.pair_of_assignment(assignment_id)
        if pair_id is None:
            return None
        row = store.pair_row_locked(pair_id)
        held = store.lease_held(assignment_id)
        if held.state == Assignment.State.LEASED:
            store.lease_renew(assignment_id, held.comparison_id, expires)
            return lease_token(expires)
        if (held.state != Assignment.State.EXPIRED or study.status != Study.Status.RUNNING
                or row.status != adaptive.OPEN or row.round != held.round
                or store.lease_current(study.pk, annotator_id, now,
                                       with_checks=bool(study.check_every or study.onboarding_checks)) is not None
                or store.annotator_excluded(study.pk, annotator_id)):
            return None
        pair = store.OpenPair(row.pk, row.round, row.quota_left, row.leased, row.first_id, row.second_id)
        free = store.pair_items(study.pk, pair, annotator_id, ratings_per_item=study.ratings_per_item, now=now,
                                among=[held.item_id])
        if not free:
            return None
        if free[0].lease_expires_at is not None:
            # Another worker's lease past its expiry: taken over, the pair's count stays the same.
            store.leases_of_comparison_expire(held.comparison_id)
        elif row.quota_left <= row.leased:
            return None
        else:
            store.pair_leases_add(pair_id, +1)
        store.lease_resume(assignment_id, held.comparison_id, expires)
        return lease_token(expires)


def hit_flag(*, assignment: Assignment, annotator: Annotator, reason: str, note: str = "") -> ItemFlag:
    """Record the annotator's report of a problem with the HIT's item and skip the HIT.

    Precondition: ``assignment`` is ``annotator``'s. The flag is for researchers (admin);
    the item stays in the study until a researcher withdraws it (services.studies.item_withdraw).
    """
    if assignment.annotator_id != annotator.pk:
        raise HitError("this HIT belongs to another annotator")
    try:
        ProhibitNullCharactersValidator()(note)  # a model's full_clean does not check it; PostgreSQL refuses it
    except ValidationError as exc:
        raise HitError(f"note: {' '.join(exc.messages)}") from exc
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


@retry_transient
def leases_reclaim(*, study: Study) -> int:
    """Give expired leases of the study back to the pool; returns how many."""
    now = timezone.now()
    return sum(_reclaim_pair(pair_id, now) for pair_id in store.pairs_with_expired_leases(study.pk, now))


def _reclaim_pair(pair_id: int, now) -> int:
    with transaction.atomic():
        store.pair_row_locked(pair_id)
        # Repeats hold no counter (services/checks.py): they simply lapse.
        return sum(store.lease_expire(pk) for pk in store.leases_expired_of_pair(pair_id, now))


def judgement_submit(
    *,
    assignment: Assignment,
    annotator: Annotator,
    shown_value: int,
    idempotency_key: str,
    seconds_on_task: float | None = None,
    answers: Mapping[str, Mapping] | None = None,
    read_seconds: float | None = None,
) -> Judgement:
    """Store the annotator's answer for a HIT; idempotent on ``idempotency_key``.

    ``shown_value`` is in screen order: +1 = the left output is better, -1 = the right one,
    0 = tie; it is stored in canonical order. A rubric study (annotation/rubrics.py) takes
    ``answers`` instead, criterion -> {"value": screen order, -2..2 with a strength scale,
    "reason": "..."} (``shown_value`` is then ignored; ValueError naming a criterion that is
    missing, out of range or lacks a required reason). ``read_seconds``: the browser's measure
    of the time from the texts shown to the first answer chosen. Submitting the same key again returns the first
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
    if answers is None and shown_value not in (-1, 0, 1):
        raise HitError(f"answer must be -1, 0 or 1, got {shown_value!r}")
    if read_seconds is not None and not 0 <= read_seconds < 86400:
        read_seconds = None
    if not idempotency_key or len(idempotency_key) > 64:
        raise HitError("a submit needs an idempotency key of at most 64 characters")
    if assignment.annotator_id != annotator.pk:
        raise HitError("this HIT belongs to another annotator")
    real = assignment.kind == JudgementKind.REAL  # else a check or a repeat: never the protocol's
    if real and not Assignment._meta.get_field("comparison").is_cached(assignment):
        assignment = Assignment.objects.select_related("comparison__study", "comparison__item").get(pk=assignment.pk)
    study = (assignment.check_item if assignment.check_item_id else assignment.comparison).study
    canonical = None
    if is_rubric(study):
        canonical = _rubric_answers(study, answers, swapped=assignment.shown_swapped)
        # a rubric's check looks like any HIT: its first criterion, as shown, is the answer checked
        first = canonical[study_rubric(study)[0].name]["value"]
        shown_value = -first if assignment.shown_swapped else first
    elif answers is not None:
        raise HitError("this study has one criterion: answer with shown_value, not answers")
    # A check is a HIT like any other to the worker: it keeps the study's minimum time too.
    _refuse_too_soon(assignment, study, idempotency_key)
    if real:
        protocol_state.label_sources_ready(study)  # not under the pair's lock: the first load reads every score
        outcome = _submit(assignment, annotator.pk, shown_value, idempotency_key, seconds_on_task, canonical,
                          read_seconds)
        if isinstance(outcome, HitError):
            raise outcome
        return outcome
    return check_submit(assignment=assignment, annotator=annotator, shown_value=shown_value,
                        idempotency_key=idempotency_key, seconds_on_task=seconds_on_task)


def _rubric_answers(study: Study, answers: Mapping | None, *, swapped: bool) -> dict:
    try:
        return answers_from_screen(study=study, shown=answers or {}, swapped=swapped)
    except ValueError as error:
        raise HitError(str(error)) from None


def _refuse_too_soon(assignment: Assignment, study: Study, idempotency_key: str) -> None:
    """HitError for an answer sooner than ``study.min_seconds_per_hit`` after the HIT was
    issued (a repeated submit of an answer already stored is no new answer)."""
    minimum = study.min_seconds_per_hit
    if minimum and timezone.now() - assignment.issued_at < timedelta(seconds=minimum):
        if not Judgement.objects.filter(idempotency_key=idempotency_key, assignment_id=assignment.pk).exists():
            raise HitError(f"please read both texts: this study asks for at least {minimum} seconds per comparison")


class _Refused(Exception):
    """Raised inside a submit's transaction to roll it back; the message is the refusal."""


@retry_transient
def _submit(assignment: Assignment, annotator_id: int, shown_value: int, key: str,
            seconds_on_task: float | None, answers: dict | None, read_seconds: float | None) -> Judgement | HitError:
    try:
        with transaction.atomic():
            return _submit_locked(assignment, annotator_id, shown_value, key, seconds_on_task, answers, read_seconds)
    except IntegrityError:
        # Rolled back whole (no savepoint: nothing before the insert needs keeping).
        return HitError("this submission key was already used for another HIT")
    except _Refused as refused:
        return HitError(str(refused))


def _submit_locked(assignment: Assignment, annotator_id: int, shown_value: int, key: str,
                   seconds_on_task: float | None, answers: dict | None = None,
                   read_seconds: float | None = None) -> Judgement | HitError:
    """The submit's transaction (the caller holds it open). Precondition: ``assignment.comparison``
    and its ``study`` and ``item`` are loaded.

    A refusal that must stay dead (a live lease of a pair no longer open, or of a comparison the
    annotator judged) is returned and committed; a refusal with nothing to keep raises _Refused.
    """
    comparison = assignment.comparison
    study = comparison.study
    row = store.pair_row_locked(comparison.pair_id)
    # Whether the worker is excluded, and the comparison's judgements, are read here, under the
    # pair's lock, in a statement of their own (on PostgreSQL a statement's snapshot predates the
    # lock wait of the statement that took it): a re-decision (services/quality.py) that locks
    # the pair after this commits sees this judgement, and one that locked it before made this
    # read see the exclusion.
    is_excluded, done = store.submit_reads(study.pk, annotator_id, comparison.pk)
    for earlier in done:
        if earlier.assignment_id == assignment.pk:
            if earlier.idempotency_key == key:  # the same submit again (a retry, or a double click)
                return Judgement.objects.get(assignment_id=assignment.pk)
            return HitError("this HIT was already answered")
    refusal = None
    if is_excluded:
        refusal = "your answers are no longer needed in this study; thank you for your time"
    elif row.status != adaptive.OPEN:  # the row's mirror of its protocol state's (serving) status
        refusal = "this comparison is no longer needed: its pair was decided or its round is full"
    elif any(earlier.annotator_id == annotator_id for earlier in done):
        refusal = "you have already judged this comparison"
    if refusal is not None:
        # Committed (not rolled back with an exception): the dead lease is never served again.
        store.lease_expire(assignment.pk)
        return HitError(refusal)
    criteria = study_rubric(study)
    # canonical order (answers arrive canonical: annotation/rubrics.answers_from_screen)
    value = answers[criteria[0].name]["value"] if answers is not None else \
        -shown_value if assignment.shown_swapped else shown_value
    # The server's own measure of time on task: the lease is made when the HIT is rendered
    # (the POST that ends the previous HIT, or the start link), so issued_at is render time.
    now = timezone.now()
    server_seconds = max((now - assignment.issued_at).total_seconds(), 0.0)
    judgement = Judgement(comparison_id=comparison.pk, annotator_id=annotator_id, assignment_id=assignment.pk,
                          value=value, answers=answers, seconds_on_task=seconds_on_task,
                          read_seconds=read_seconds, server_seconds=server_seconds, idempotency_key=key, created_at=now)
    # Field validation only: the references were just read under the lock, and uniqueness
    # is the database's (a query per constraint would double the submit's cost).
    judgement.full_clean(exclude=["comparison", "annotator", "assignment"], validate_unique=False,
                         validate_constraints=False)
    # The codec runs before the writes, so that they go in one statement on PostgreSQL
    # (store.judgement_submit_write): the pair row's new state is one of them.
    needs_more = row.quota_left > row.leased  # as locked, before the codec moves the quota
    state = protocol_state.pair_rubric_of(study, row)
    recorded = rubric.record_judgements(
        state, *state.keys[0], [comparison.item.external_id], [lane_values(criteria=criteria, value=value, answers=answers)],
        probabilities=[assignment.draw_probability])
    protocol_state.pair_write(study, row, recorded)
    expired = store.judgement_submit_write(judgement, row, protocol_state.MIRRORED_COLUMNS)
    if expired is not None:
        # An expired lease (taken over, reclaimed or skipped): accepted only if its comparison was
        # free and the round still needs a judgement that no live lease will bring; else every
        # write above is rolled back.
        if expired.lease_expires_at is not None or expired.judgement_count >= study.ratings_per_item \
                or not needs_more:
            raise _Refused("this HIT expired and its comparison is no longer needed")
        store.assignment_submitted(assignment.pk, only_if_leased=False)
    if recorded.status(0) == adaptive.FILLED:
        transaction.on_commit(lambda: jobs.rounds_close(study.pk))
    return judgement
