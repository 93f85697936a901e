"""Reads of the serving loop and the annotator's screens: the HIT shown, the worker's session,
whether there is work, and the audit of serving's invariants."""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Exists, Min, OuterRef, Q
from django.utils import timezone

from protocol import adaptive

from ..models import Annotator, Assignment, CheckItem, Comparison, Judgement, PairState, Study
from ..models import CrowdSession as CrowdEntry  # the name CrowdSession is the session dataclass below
from ..rendering import word_diff
from ..rubrics import rubric_screen
from ..serving import protocol_state, store
from ..serving.protocol_state import pair_state_of
from .quality import counted_judgements
from .studies import ACTIVE_PAIR_STATUSES


def hit_current(*, study: Study, annotator: Annotator) -> Assignment | None:
    """The annotator's live lease in the study (a check's too, when the study has checks), if any."""
    return store.lease_current(study.pk, annotator.pk, timezone.now(),
                               with_checks=bool(study.check_every or study.onboarding_checks))


def hit_current_and_done(*, study: Study, annotator: Annotator) -> tuple[Assignment | None, int]:
    """``hit_current`` and ``annotator_judgement_count``, in one statement (every screen of an
    annotator shows both)."""
    return store.lease_current_and_judgement_count(study.pk, annotator.pk, timezone.now(),
                                                   with_checks=bool(study.check_every or study.onboarding_checks))


def hit_of_study(*, study: Study, assignment_id: int) -> Assignment | None:
    """The HIT ``assignment_id`` of ``study`` (a comparison's or a check's), or None.

    A comparison's HIT comes with its comparison (``study`` attached) and the item's external
    id loaded, as a submit needs them: one statement.
    """
    return store.hit_of_study(study, assignment_id)


def hit_display(*, assignment, study: Study | None = None, done: int | None = None) -> dict:
    """What the annotator sees for a HIT: input, the two outputs in screen order, and a rubric
    study's criteria with their scales (``criteria``; [] for one criterion: annotation/rubrics.py).
    ``left``/``right`` are the raw texts, ``left_html``/``right_html`` (and the item's
    ``input_html``/``reference_html``) what a markdown study rendered at import ("" in a plain
    study: annotation/rendering.py shown_html).

    ``done``: the annotator's judgements in the study, when the caller has counted them already.
    """

    if assignment.check_item_id is not None:
        # A check looks like any HIT (services/checks.py): its input and its two texts.
        check = CheckItem.objects.select_related("study").get(pk=assignment.check_item_id)
        first, second = (check.first, check.first_html), (check.second, check.second_html)
        left, right = (second, first) if assignment.shown_swapped else (first, second)
        if done is None:
            done = annotator_judgement_count(study=study or check.study, annotator=assignment.annotator_id)
        return {"assignment": assignment, "item": check, "left": left[0], "right": right[0], "done": done,
                "left_messages": None, "right_messages": None, "left_html": left[1], "right_html": right[1],
                "criteria": rubric_screen(study or check.study)}
    # The comparison, its item and the outputs of its two systems in one statement (the serving
    # store: this read is on every HIT's path), unless the lease read them with its write.
    shown = store.lease_texts(assignment) or store.hit_texts(assignment.comparison_id)
    item, first_id, second_id = shown.item, shown.first_id, shown.second_id
    study = study or Study.objects.get(pk=item.study_id)
    texts: dict[int, tuple[str, list | None, str]] = {}
    # The study's shown sample of each output, else its lowest sample.
    for system_id, sample, text, messages, html in shown.outputs:
        if system_id not in texts or sample == study.shown_sample:
            texts[system_id] = (text, messages, html)
    first, second = texts[first_id], texts[second_id]
    left, right = (second, first) if assignment.shown_swapped else (first, second)
    if done is None:
        done = annotator_judgement_count(study=study, annotator=assignment.annotator_id)
    return {"assignment": assignment, "item": item, "left": left[0], "right": right[0], "done": done,
            "left_messages": left[1], "right_messages": right[1], "left_html": left[2], "right_html": right[2],
            "criteria": rubric_screen(study)}


def hit_word_diff(*, assignment, study: Study) -> tuple | None:
    """The word diff of the HIT's two texts as the annotator sees them (left, right), or None
    when a text is too long to compare (rendering.word_diff). Computed when asked for (the
    worker opens it), never with the HIT."""
    shown = hit_display(assignment=assignment, study=study, done=0)
    return word_diff(shown["left"] or "", shown["right"] or "")


def annotator_judgement_count(*, study: Study, annotator) -> int:
    """Real judgements of ``annotator`` (an Annotator or its id) in ``study`` (their session's
    work: checks and repeats are not comparisons of the study)."""
    return store.annotator_judgement_count(study.pk, getattr(annotator, "pk", annotator))


def study_of_slug(*, slug: str) -> Study | None:
    """The study at ``slug``: the first read of every annotator request (the serving store)."""
    return store.study_of_slug(slug)


def study_serving_audit(*, study: Study, acknowledged_keys: list[str] | None = None) -> dict:
    """Check serving's invariants from the database (for the load harness and the tests).

    duplicates          comparisons judged beyond ``ratings_per_item`` plus (comparison,
                        annotator) pairs judged twice
    lost                ``acknowledged_keys`` (submits the server answered as stored) with no
                        judgement
    counters_consistent every serving counter equals what it counts
    protocol_consistent the protocol state loads and validates, each pair's recorded
                        judgements equal its stored ones, no pair has live leases beyond its
                        open quota, live judgements stay within the budget
    """

    judgements = counted_judgements(study=study)
    # Imported judgements, and a re-included worker's (their comparisons were served again
    # while they were excluded), may exceed ratings_per_item by design.
    beyond_by_design = Judgement.objects.filter(comparison__study=study).filter(
        Q(source=Judgement.Source.IMPORT) | Q(annotator__exclusions__study=study)).values("comparison_id")
    over = (judgements.exclude(comparison_id__in=beyond_by_design).values("comparison_id")
            .annotate(n=Count("id")).filter(n__gt=study.ratings_per_item).count())
    twice = judgements.values("comparison_id", "annotator_id").annotate(n=Count("id")).filter(n__gt=1).count()
    lost = 0
    if acknowledged_keys:
        stored = set()
        for start in range(0, len(acknowledged_keys), 500):
            chunk = acknowledged_keys[start:start + 500]
            stored.update(Judgement.objects.filter(comparison__study=study, idempotency_key__in=chunk).values_list("idempotency_key", flat=True))
        lost = len(set(acknowledged_keys) - stored)
    problems = []
    counted = dict(judgements.values_list("comparison_id").annotate(n=Count("id")).values_list("comparison_id", "n"))
    leased_rows = dict(Assignment.objects.filter(comparison__study=study, state=Assignment.State.LEASED, kind="real")
                       .values_list("comparison_id").annotate(n=Count("id")).values_list("comparison_id", "n"))
    for pk, count, lease in Comparison.objects.filter(study=study).values_list(
            "id", "judgement_count", "lease_expires_at"):
        if count != counted.get(pk, 0):
            problems.append(f"comparison {pk}: judgement_count {count}, judgements {counted.get(pk, 0)}")
        if (lease is not None) != (leased_rows.get(pk, 0) == 1) or leased_rows.get(pk, 0) > 1:
            problems.append(f"comparison {pk}: lease column {lease}, {leased_rows.get(pk, 0)} live leases")
    rows = list(PairState.objects.filter(study=study))
    live_by_pair = dict(Comparison.objects.filter(study=study, lease_expires_at__isnull=False)
                        .values_list("pair_id").annotate(n=Count("id")).values_list("pair_id", "n"))
    stored_by_pair = dict(judgements.values_list("comparison__pair_id").annotate(n=Count("id"))
                          .values_list("comparison__pair_id", "n"))
    for row in rows:
        row.live, row.stored = live_by_pair.get(row.pk, 0), stored_by_pair.get(row.pk, 0)
    consistent = True
    try:
        state = protocol_state.study_state_load(study, rows)
    except ValueError as error:
        problems.append(f"protocol state does not load: {error}")
        state, consistent = None, False
    for row in rows:
        if row.leased != row.live:
            problems.append(f"pair {row.pk}: leased {row.leased}, live leases {row.live}")
        if row.leased > row.quota_left:
            problems.append(f"pair {row.pk}: {row.leased} live leases beyond its open quota {row.quota_left}")
            consistent = False
        recorded = protocol_state.pair_hits_of(study, row) if row.state else 0
        if recorded != row.stored:
            problems.append(f"pair {row.pk}: protocol recorded {recorded}, stored {row.stored}")
            consistent = False
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    if live + study.protocol_lost_judgements > study.budget:
        problems.append(f"{live} live judgements and {study.protocol_lost_judgements} lost to exclusions "
                        f"beyond the budget {study.budget}")
        consistent = False
    return {
        "judgements": judgements.count(),
        "live_judgements": live,
        "duplicates": over + twice,
        "lost": lost,
        "counters_consistent": not any("comparison" in p or "leased" in p for p in problems),
        "protocol_consistent": consistent and state is not None,
        "pairs_filled_waiting_for_close": sum(r.status == "filled" for r in rows),
        "problems": problems[:20],
    }


@dataclass(frozen=True)
class CrowdSession:
    """One worker's session in a study: their judgements and leases there.

    An Annotator is one platform worker id, so their work in a study is their session.
    """

    done: int                      # judgements given in the study
    hits_min: int                  # needed for the completion code (at least 1)
    hits_max: int                  # most judgements served; 0 = no limit
    started_at: datetime | None    # their first HIT in the study
    ends_at: datetime | None       # when the session time limit is up (None = no limit)
    time_up: bool

    @property
    def target(self) -> int:
        """The HIT's progress bar's end: the maximum, else the minimum when it is above 1 (0 = none).
        The text says "Comparison N of M" for a maximum only; a minimum is "M needed for your
        completion code" (and ": done" past it), as the worker may go on."""
        return self.hits_max or (self.hits_min if self.hits_min > 1 else 0)

    @property
    def share_done(self) -> bool:
        return bool(self.hits_max) and self.done >= self.hits_max

    @property
    def may_lease(self) -> bool:
        return not (self.share_done or self.time_up)

    @property
    def minimum_met(self) -> bool:
        return self.done >= self.hits_min

    @property
    def code_due(self) -> bool:
        """The completion code rule: the code pays for the work the study asks, its minimum
        (``session_hits_min``), whatever the screen. A worker the study cannot serve enough
        (paused, finished, no work right now, time up) gets no code: their screen says what to
        do (docs/crowd.md). crowd.csv's ``minimum_met`` is this rule."""
        return self.minimum_met


def crowd_session(*, study: Study, annotator, now: datetime | None = None, done: int | None = None) -> CrowdSession:
    """The worker's session in ``study`` (two small queries). ``done``: the worker's judgement
    count (``annotator_judgement_count``), when the caller has just read it."""
    now = now or timezone.now()
    if done is None:
        done = annotator_judgement_count(study=study, annotator=annotator)
    started_at = ends_at = None
    time_up = False
    if study.session_minutes:
        in_study = Comparison.objects.filter(pk=OuterRef("comparison_id"), study=study)
        started_at = Assignment.objects.filter(Exists(in_study), annotator=annotator).aggregate(
            first=Min("issued_at"))["first"]
        if started_at is not None:
            ends_at = started_at + timedelta(minutes=study.session_minutes)
            time_up = now >= ends_at
    return CrowdSession(done=done, hits_min=max(study.session_hits_min, 1), hits_max=study.session_hits_max,
                        started_at=started_at, ends_at=ends_at, time_up=time_up)


def study_work_left(*, study: Study) -> bool:
    """Whether any pair of the study has a round open or about to close (more HITs may come)."""
    return PairState.objects.filter(study=study, status__in=ACTIVE_PAIR_STATUSES).exists()


def crowd_entry_of(*, study: Study, platform: str, worker_id: str, platform_session_id: str) -> Annotator | None:
    """The Annotator of this worker id if they entered ``study`` from this platform session
    before, else None (a new entry: it counts against the client's limit on new crowd workers).
    Includes a worker bound before sessions named annotators (their Annotator has no session)."""
    entry = (CrowdEntry.objects.select_related("annotator")
             .filter(study=study, annotator__platform=platform, annotator__external_id=(worker_id or "").strip(),
                     platform_session_id=(platform_session_id or "").strip()).first())
    return entry.annotator if entry is not None else None


# A code's own part: 16 characters of Crockford's base32 (digits and capitals without I, L, O
# and U, which a worker could misread or mistype), 5 bits each: 80 bits of an HMAC-SHA256.
CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_CHARS = 16


def worker_completion_code(*, study: Study, platform: str, worker_id: str, session_id: str,
                           legacy_mac: str = "") -> str:
    """A crowd worker's own completion code: the study's code and a MAC of study, platform,
    worker id and platform session, keyed by the study's own random ``completion_secret``, so
    a code passed on to another worker does not match their submission and nobody computes one
    from the link; "" when the study has no code. The fields are a JSON list (no separator a
    worker id could contain makes two entries one). ``legacy_mac``: an entry from before
    migration 0021 keeps the code it had (CrowdSession.legacy_code_mac). Researchers verify
    submissions against study_crowd_sessions (crowd.csv)."""
    if not study.completion_code:
        return ""
    if legacy_mac:
        return f"{study.completion_code}-{legacy_mac}"
    if not study.completion_secret:
        raise ValueError(f"study {study.slug!r} has no completion secret")
    fields = json.dumps(["evalapp.completion-code.v2", study.pk, platform, worker_id, session_id])
    number = int.from_bytes(hmac.new(study.completion_secret.encode(), fields.encode(), hashlib.sha256).digest()[:10], "big")
    mac = "".join(CODE_ALPHABET[(number >> 5 * k) & 31] for k in reversed(range(CODE_CHARS)))
    return f"{study.completion_code}-{mac}"


def crowd_completion_code(*, study: Study, annotator) -> str:
    """``annotator``'s completion code in ``study`` (worker_completion_code); the study's
    code for a logged-in member (the platforms pay crowd workers only)."""
    if annotator.platform not in (Annotator.Platform.PROLIFIC, Annotator.Platform.MTURK):
        return study.completion_code
    entry_session, legacy_mac = (CrowdEntry.objects.filter(study=study, annotator=annotator)
                                 .values_list("platform_session_id", "legacy_code_mac").first() or ("", ""))
    return worker_completion_code(study=study, platform=annotator.platform, worker_id=annotator.external_id,
                                  session_id=annotator.session_id or entry_session, legacy_mac=legacy_mac)


# Columns of crowd.csv: what a researcher matches with the platform's submission list.
CROWD_SESSION_COLUMNS = ("platform", "worker_id", "session_id", "entered_at", "judgements", "minimum_met",
                         "completion_code")


def study_crowd_sessions(*, study: Study) -> list[dict]:
    """Every crowd worker's entry into ``study`` with their judgements and their own
    completion code, oldest first: a platform submission is genuine when its worker id,
    session id and code appear here together (docs/crowd.md)."""
    counts = dict(Judgement.objects.filter(comparison__study=study, kind="real").values("annotator_id")
                  .annotate(n=Count("id")).values_list("annotator_id", "n"))
    hits_min = max(study.session_hits_min, 1)
    rows = []
    for entry in CrowdEntry.objects.filter(study=study).select_related("annotator").order_by("created_at", "pk"):
        annotator = entry.annotator
        done = counts.get(annotator.pk, 0)
        rows.append({"platform": annotator.platform, "worker_id": annotator.external_id,
                     "session_id": entry.platform_session_id, "entered_at": entry.created_at.isoformat(),
                     "judgements": done, "minimum_met": done >= hits_min,
                     "completion_code": worker_completion_code(study=study, platform=annotator.platform,
                                                               worker_id=annotator.external_id,
                                                               session_id=entry.platform_session_id,
                                                               legacy_mac=entry.legacy_code_mac)})
    return rows


def annotator_has_work(*, study: Study, annotator, skipped_too: bool = False) -> bool:
    """Could ``annotator`` be leased a comparison now? (A read; the lease itself decides.)

    An open round with quota beyond its live leases holds a comparison with fewer than
    ``ratings_per_item`` judgements, no live lease, an item not withdrawn, and no judgement or
    skip by this annotator. ``skipped_too``: their skipped comparisons count as work (whether
    it was their skips that emptied their queue: the completion code does not pay for those).
    """
    now = timezone.now()
    annotator_id = getattr(annotator, "pk", annotator)
    return any(store.pair_items(study.pk, pair, annotator_id, ratings_per_item=study.ratings_per_item, now=now,
                                one_at_random=True, skips_free=skipped_too)
               for pair in store.open_pairs(study.pk, adaptive.OPEN))


def protocol_pair_of(study: Study, row: PairState):
    """The protocol's state of one pair row (protocol.adaptive.PairState), None before the start.

    Decoded by the one codec (serving/protocol_state.py), validated.
    """

    return pair_state_of(study, row) if row.state else None
