"""The protocol's runtime inside the app: start, round close, re-decision and sweep.

A submit that fills a pair's round only schedules a close (``jobs.rounds_close``, after its
commit); the close runs elsewhere — a Celery task with a broker, a background thread of the
web process without one (``settings.EVALAPP_BACKGROUND_WORK``, annotation/jobs.py) — so no
annotator waits for a decision. ``rounds_close`` reads a snapshot of the filled pairs with no lock held (only they, the
waiting pairs when the budget can open rounds, and totals of the others summed in SQL, for a
study whose design asks for no pairs after a close; the pairs with labels or a round, and the
neighbours its fit asks for, under the active design: ``protocol_state.study_close_snapshot``),
runs the batched decision, then takes the study lock for the few milliseconds it needs to apply the
results compare-and-set (a pair whose row changed since the snapshot is recomputed in the next
pass) and to open the next rounds within the budget. Many rounds filling at once coalesce
into one close. ``protocol_sweep`` (periodic) closes any filled round a lost task left behind,
gives expired leases back to the pool, applies the studies' exclusion rules and finishes any
re-decision a lost task left behind; a close runs a pending re-decision first.

A re-decision (``protocol_redecide``) follows an exclusion or re-inclusion (services/quality.py):
like a close it reads a snapshot with no lock held, re-decides every pair whose protocol state
no longer matches the counted judgements with ``protocol.adaptive.rebuild_pairs``, opens rounds
within the budget for pairs that are no longer decided, and applies the result compare-and-set
under the study's lock.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import timedelta

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from protocol import active_ranking, adaptive, ranking_design, rubric
from protocol.control_variate import features_of

from ..models import Comparison, Judgement, JudgementKind, PairState, Study
from ..rubrics import study_rubric
from ..selectors.quality import counted_judgements, excluded_annotators
from ..selectors.studies import (study_design_kinds, study_draw_chances, study_judgement_answers,
                                 study_pair_capacities)
from ..serving import protocol_state
from ..serving.metric_labels import lane_label_sources
from ..serving.process_cache import ProcessCache
from .hits import leases_reclaim
from .judges import judge_runs_resume
from .planner import plan_jobs_resume
from .quality import exclusion_rules_apply
from .transactions import retry_transient

log = logging.getLogger(__name__)
CLOSE_PASSES = 5
REDECIDE_PASSES = 10


def protocol_start(*, study: Study) -> rubric.RubricState:
    """Build the protocol state of a freshly imported study and open its first rounds.

    Call inside the import's transaction, after comparisons, pair rows and imported
    judgements are stored. Judgements imported with the bundle are recorded as each pair's
    round 0 and decided, so a pair they settle is never served; the protocol's budget counts
    them on top of the study's budget of live judgements. A rubric study starts one lane per
    criterion, each with its criterion's metric (the first criterion: the study's metric
    unless it names its own).
    """
    rows = list(PairState.objects.filter(study=study))
    capacities = study_pair_capacities(study=study)
    criteria = study_rubric(study)
    # Each lane's labels counted from the scores, and computed per pair only when it needs them
    # (the codec's formula: metric_labels), not built per (pair, item) here.
    metrics, counts = protocol_state.start_labels(study, sorted(capacities))
    existing = study_judgement_answers(study=study, criteria=criteria)
    for key, labels in existing.items():
        # Imported labels beyond ratings_per_item still count: the pair has them all.
        capacities[key] = max(capacities.get(key, 0), len(labels))
    study.protocol_imported_judgements = sum(len(v) for v in existing.values())
    study.save(update_fields=["protocol_imported_judgements"])
    design = study.design
    if design.orders_systems:
        names = sorted({name for key in capacities for name in key})
        source = lane_label_sources(study)[0]
        start = ranking_design.start_order(len(names), seed=study.protocol_seed,
                                           scores=None if source is None else source.system_scores(names))
        study.ranking_order = [names[i] for i in start]
        study.save(update_fields=["ranking_order"])
    state = rubric.start(protocol_state.protocol_settings(study), [c.name for c in criteria], capacities, metrics,
                         counts)
    closed = rubric.seed_judgements(state, existing) if existing else None
    started = closed or state
    started = design.start(started, study.ranking_order, study.active_settings, **_prepare_for(study))
    opened = rubric.open_rounds(metrics_combined(study=study, state=started))
    protocol_state.study_state_first_save(study, rows, opened, closed=closed)
    return opened


def metrics_combined(*, study: Study, state: rubric.RubricState,
                     opening: tuple[frozenset[int], ...] | None = None) -> rubric.RubricState:
    """The state with each lane's pairs about to open (``opening``, by default
    ``rubric.opening``'s: a design that opens its rounds itself names its own) predicted from every
    metric the study combines for its criterion (Study.combined_metrics; a rubric names each
    criterion's): the calibration cross-fitted on the other pairs' human labels of that
    criterion so far (protocol.adaptive.calibrated; for a partial state those of the pairs it
    leaves out summed by the codec), as ``python -m protocol.simulate --metric A,B`` does
    before every opening; the state itself when the study combines none. Call just before
    opening rounds: a round's steps and centre use the prediction it opened with, and a pair
    that waits keeps its last one until it opens (then refitted from the labels of then), so
    a close that opens nothing reads and writes no waiting pair for it."""
    if not study.combined_metrics.strip():
        return state
    lanes, combined = list(state.lanes), False
    opening = rubric.opening(state) if opening is None else opening
    for index, lane in enumerate(state.lanes):
        sources = protocol_state.combined_sources(study, index)
        if sources and opening[index]:
            features = features_of([{key: source.pair(*key) for key in state.keys} for source in sources])
            lanes[index], combined = adaptive.calibrated(lane, features, only=opening[index]), True
    return replace(state, lanes=tuple(lanes)) if combined else state


def _prepare_for(study: Study) -> dict:
    """The keyword arguments of the study's design's ``start`` / ``advance``: for a design that
    opens its rounds itself (``PairDesign.opens_rounds``), ``prepare``, which calibrates the
    pairs it funds from the study's combined metrics (``metrics_combined``) just before; for the
    others none, the caller calibrating what ``rubric.open_rounds`` is about to open."""
    if not study.design.opens_rounds:
        return {}
    return {"prepare": lambda state, opening: metrics_combined(study=study, state=state, opening=opening)}


# The active design's last fit of each study, as this process's last close left it: the next
# close's solver starts from it (active_ranking.LastFit; only a start, so a close of another
# process in between leaves the fit the same, in a few more iterations).
_last_fits: ProcessCache[active_ranking.LastFit] = ProcessCache()


def _advance_options(study: Study) -> dict:
    """The keyword arguments of the study's design's ``advance``: ``_prepare_for``'s, and the
    study's ``LastFit`` for a design that keeps one (``PairDesign.keeps_last_fit``)."""
    options = _prepare_for(study)
    if study.design.keeps_last_fit:
        options["last_fit"] = _last_fits.get((study.pk, study.created_at), active_ranking.LastFit)
    return options


def rounds_opened(*, study: Study, state: rubric.RubricState, more=None) -> rubric.RubricState:
    """The state with rounds opened within the budget: the design's pairs (``design_advance``),
    predicted from the metrics the study combines (``metrics_combined``)."""
    return rubric.open_rounds(metrics_combined(study=study, state=design_advance(study=study, state=state,
                                                                                  more=more)))


def design_advance(*, study: Study, state: rubric.RubricState, more=None) -> rubric.RubricState:
    """The state with the pairs the study's design asks for now (protocol.designs: waiting for a
    round under the sort, with their rounds open under the active design, the state itself
    under the all-pairs design). Call before opening rounds, after every close or re-decision.
    ``more``: for a partial state, the pairs it left out that the design asks for
    (``PairDesign.advances_from_labelled``; the result then holds them)."""
    if not study.design.advances:
        return state  # (no read of the items' kinds either)
    return study.design.advance(state, study.ranking_order, study.active_settings,
                                kinds=study_design_kinds(study=study), more=more, **_advance_options(study))


def protocol_ensure_started(*, study: Study) -> bool:
    """Start the protocol of a study imported before it started at import (older databases).

    A write for commands (demo_setup, protocol_sweep); True when it started one. A draft is
    left alone: it starts when a researcher launches it (services.studies.study_launch).
    """
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status == Study.Status.DRAFT:
            return False
        if not PairState.objects.filter(study=study, state={}).exists():
            return False
        protocol_start(study=study)
        return True


def rounds_close(*, study_id: int) -> int:
    """Close every filled round of the study and open the next rounds; returns pairs closed.

    Call outside any transaction. One closer per study at a time, across processes: a close
    asked for while another runs leaves it to that one (which closes once more before it lets
    go) and returns 0. The state is read and decided with no lock held, and only the rows
    written are checked and written under the study's lock (compare-and-set on their
    versions; a pass that finds one moved starts again from a fresh snapshot), so a close
    that outlived its hold (CLOSER_SECONDS) or a re-decision running beside it is still safe;
    safe again after a crash (the hold lapses; the sweep closes what was left).
    Why the rows of open pairs need no check: opening rounds shares out the budget left,
    budget - (spent + reserved), and a submit moves one judgement from reserved to spent.
    """
    # Three web processes each closing the rounds its own submits filled undid each other's
    # work: on PostgreSQL "rounds moved under 5 close passes" 12 times in a 40-s load run.
    until = _closer_until()
    while not _closer_take(study_id, until):
        if _closer_ask_again(study_id):
            return 0
        until = _closer_until()  # the closer let go meanwhile
    closed = 0
    try:
        while True:
            closed += _rounds_close_passes(study_id)
            if _closer_let_go(study_id, until):
                return closed
            renewed = _closer_until()  # asked again while closing: once more
            if not _closer_renew(study_id, until, renewed):
                return closed  # held past CLOSER_SECONDS: another closer took over
            until = renewed
    except BaseException:
        _closer_let_go(study_id, until, even_if_asked_again=True)
        raise


# A closer that died holds its study's closes this long at most (then a close or the sweep
# takes over); a close takes about a second at 50 systems.
CLOSER_SECONDS = 30


def _closer_until():
    """The end of a new hold: also its token (each statement below names the hold it means)."""
    return timezone.now() + timedelta(seconds=CLOSER_SECONDS)


# Each of these is one statement in autocommit, retried after a transient error (a hold left
# by a close whose connection was cut stopped a study's closes for CLOSER_SECONDS); a retry
# after a reply that was lost finds its own token.

@retry_transient
def _closer_take(study_id: int, until) -> bool:
    """Hold the study's closes until ``until``; False when another closer holds them."""
    taken = Study.objects.filter(pk=study_id).filter(
        Q(protocol_closer_until__isnull=True) | Q(protocol_closer_until__lt=timezone.now())).update(
        protocol_closer_until=until, protocol_close_again=False)
    return bool(taken) or Study.objects.filter(pk=study_id, protocol_closer_until=until).exists()


@retry_transient
def _closer_ask_again(study_id: int) -> bool:
    """Ask the closer holding the study to close once more; False when none holds it."""
    return bool(Study.objects.filter(pk=study_id, protocol_closer_until__gte=timezone.now()).update(
        protocol_close_again=True))


@retry_transient
def _closer_let_go(study_id: int, until, *, even_if_asked_again: bool = False) -> bool:
    """Let go of the hold ``until``, unless a close was asked for meanwhile (then False, and the
    hold is kept)."""
    held = Study.objects.filter(pk=study_id, protocol_closer_until=until)
    if not even_if_asked_again:
        held = held.filter(protocol_close_again=False)
    return bool(held.update(protocol_closer_until=None))


@retry_transient
def _closer_renew(study_id: int, until, renewed) -> bool:
    """Move the hold ``until`` to ``renewed`` for one more close and clear the request; False
    when the hold was lost."""
    kept = Study.objects.filter(pk=study_id, protocol_closer_until=until).update(
        protocol_closer_until=renewed, protocol_close_again=False)
    return bool(kept) or Study.objects.filter(pk=study_id, protocol_closer_until=renewed).exists()


def _rounds_close_passes(study_id: int) -> int:
    """Close the filled rounds from a fresh snapshot, again while what it read moves."""
    for _ in range(CLOSE_PASSES):
        study = Study.objects.get(pk=study_id)
        if redecide_pending(study):
            # An exclusion or re-inclusion asked for a re-decision (services/quality.py).
            protocol_redecide(study_id=study_id)
            study = Study.objects.get(pk=study_id)
        # the pairs it closes or opens and totals of the others (issue 41), or every pair
        snapshot = protocol_state.study_close_snapshot(study)
        if snapshot is None:
            return 0
        read_at, before = snapshot
        after_close = rubric.close_rounds(before)  # the expensive part: no transaction, no lock
        read_in: list = []  # pairs the snapshot left out that the design asked for

        def more(keys, study=study, read_at=read_at, read_in=read_in):
            more_at, pairs = protocol_state.study_pairs_read(study, keys)
            read_at.update(more_at)
            read_in.extend(pairs)
            return pairs
        try:
            opened = rounds_opened(study=study, state=after_close, more=more)
        except protocol_state.PairsMoved:
            continue  # a re-decision opened a pair the snapshot left out: a fresh snapshot
        if read_in:  # parked with no HIT: the close left them as they are
            before, after_close = rubric.with_pairs(before, read_in), rubric.with_pairs(after_close, read_in)
        if settings.EVALAPP_FAULT_PAUSE_BEFORE_APPLY:
            time.sleep(settings.EVALAPP_FAULT_PAUSE_BEFORE_APPLY)  # fault tests kill a worker here
        applied = _rounds_apply(study, read_at, before, after_close, opened)
        if applied is not None:
            return applied
    log.warning("study %s: rounds moved under %d close passes; the sweep will close them", study_id, CLOSE_PASSES)
    return 0


@retry_transient
def _rounds_apply(study: Study, read_at: dict[tuple[str, str], tuple[int, int]], before: rubric.RubricState,
                  after_close: rubric.RubricState, opened: rubric.RubricState) -> int | None:
    """Write a close computed from a snapshot, unless what it read has moved (then None).

    ``read_at``: each pair's (row id, version) in the snapshot ``before``.
    """
    keys = opened.keys
    writes = [read_at[keys[index]] for index in rubric.changed_pairs(before, opened)]
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        if (locked.budget, locked.protocol_closes, locked.protocol_lost_judgements) != \
                (study.budget, study.protocol_closes, study.protocol_lost_judgements):
            return None  # another close, a budget change or a re-decision came first
        targets = list(PairState.objects.select_for_update().filter(pk__in=[pk for pk, _ in writes]))
        versions = dict(writes)
        if len(targets) != len(writes) or any(versions[row.pk] != row.version for row in targets):
            return None
        protocol_state.study_state_save(locked, targets, opened, before=before, closed=after_close)
    return sum(before.status(i) != after_close.status(i) for i in rubric.changed_pairs(before, after_close))


def protocol_sweep() -> dict:
    """Periodic repair: close filled rounds left behind, return expired leases to the pool, apply
    the studies' exclusion rules, finish re-decisions left behind (finished studies too) and
    resume planner jobs and judge runs whose process ended."""
    closed = reclaimed = excluded = 0
    # A finished study serves nothing, but a researcher may still exclude a worker there: finish
    # a re-decision whose task was lost.
    for study in Study.objects.filter(status=Study.Status.FINISHED).exclude(
            protocol_redecide_requested=F("protocol_redecide_done")):
        closed += rounds_close(study_id=study.pk)
    for study in Study.objects.filter(status__in=[Study.Status.RUNNING, Study.Status.PAUSED]):
        reclaimed += leases_reclaim(study=study)
        excluded += len(exclusion_rules_apply(study=study))
        study.refresh_from_db()
        if redecide_pending(study) or PairState.objects.filter(study=study, status=adaptive.FILLED).exists():
            closed += rounds_close(study_id=study.pk)
    return {"pairs_closed": closed, "leases_reclaimed": reclaimed, "workers_excluded": excluded,
            "plans_resumed": plan_jobs_resume(), "judge_runs_resumed": judge_runs_resume()}


# --- Re-decision after exclusions (moved from services/quality.py) -----------------------

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
        criteria = study_rubric(study)
        labels = study_judgement_answers(study=study, criteria=criteria)
        lost = Judgement.objects.filter(comparison__study=study, kind=JudgementKind.REAL,
                                        annotator_id__in=excluded_annotators(study=study)).count()
        before = protocol_state.study_rubric_load(study, rows)
        changed = {}
        for index, key in enumerate(before.keys):
            mine = labels.get(key, [])
            votes: dict[str, int] = {}
            for item, answer in mine:
                votes[item] = votes.get(item, 0) + answer[criteria[0].name]
            if before.hits[index] != len(mine) or dict(before.primary.pairs[index].votes) != votes:
                changed[key] = ([i for i, _ in mine], [a for _, a in mine])
        settings = protocol_state.protocol_settings(study)
        budget = study.budget + study.protocol_imported_judgements - lost
        resized = rubric.with_settings(before, replace(settings, budget=budget))
        rebuilt = rubric.rebuild_pairs(resized, changed, study_draw_chances(study=study))
        opened = rounds_opened(study=study, state=rebuilt)
        applied = _redecide_apply(study, rows, before, rebuilt, opened, lost=lost)
        if applied is not None:
            return applied
    log.warning("study %s: pairs moved under %d re-decision passes; the sweep will retry", study_id, REDECIDE_PASSES)
    return 0


@retry_transient
def _redecide_apply(study: Study, rows: list[PairState], before: rubric.RubricState,
                    rebuilt: rubric.RubricState, opened: rubric.RubricState, *, lost: int) -> int | None:
    """Write a re-decision computed from a snapshot, unless what it read has moved (then None)."""
    keys = opened.keys
    writes = {keys[index] for index in rubric.changed_pairs(before, opened)}
    targets = [row for row in rows if (row.state["first"], row.state["second"]) in writes]
    recounted = {key for index, key in enumerate(before.keys) if rebuilt.hits[index] != before.hits[index]
                 or dict(rebuilt.primary.pairs[index].votes) != dict(before.primary.pairs[index].votes)}
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
    counted = dict(counted_judgements(study=study).filter(comparison__pair_id__in=pair_ids)
                   .values_list("comparison_id").annotate(n=Count("id")).values_list("comparison_id", "n"))
    stale = []
    for comparison in Comparison.objects.filter(pair_id__in=pair_ids).only("id", "judgement_count"):
        if comparison.judgement_count != counted.get(comparison.pk, 0):
            comparison.judgement_count = counted.get(comparison.pk, 0)
            stale.append(comparison)
    Comparison.objects.bulk_update(stale, ["judgement_count"])
