"""The protocol's rounds inside the app: start, close off the hot path, sweep.

A submit that fills a pair's round only schedules a close (``schedule_close``, after its
commit); the close runs elsewhere — a Celery task with a broker, a background thread of the
web process without one (``settings.EVALAPP_ROUND_CLOSE``) — so no annotator waits for a
decision. ``rounds_close`` reads a snapshot of the filled pairs with no lock held, runs the
batched decision, then takes the study lock for the few milliseconds it needs to apply the
results compare-and-set (a pair whose row changed since the snapshot is recomputed in the next
pass) and to open the next rounds within the budget. Many rounds filling at once coalesce
into one close. ``protocol_sweep`` (periodic) closes any filled round a lost task left behind,
gives expired leases back to the pool, applies the studies' exclusion rules and finishes any
re-decision (services/quality.py) a lost task left behind; a close runs a pending re-decision
first.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, connection, transaction
from django.db.models import F

from protocol import adaptive

from .. import selectors
from ..models import PairState, Study
from . import protocol_state
from .transactions import retry_transient

log = logging.getLogger(__name__)
CLOSE_PASSES = 5
QUEUED_KEY = "evalapp:rounds-close-queued:{}"


def protocol_start(*, study: Study) -> adaptive.ProtocolState:
    """Build the protocol state of a freshly imported study and open its first rounds.

    Call inside the import's transaction, after comparisons, pair rows and imported
    judgements are stored. Judgements imported with the bundle are recorded as each pair's
    round 0 and decided, so a pair they settle is never served; the protocol's budget counts
    them on top of the study's budget of live judgements.
    """
    rows = list(PairState.objects.filter(study=study).select_related("first", "second"))
    capacities = selectors.study_pair_capacities(study=study)
    metric = selectors.study_metric_labels(study=study)
    existing = selectors.study_judgement_labels(study=study)
    for key, labels in existing.items():
        # Imported labels beyond ratings_per_item still count: the pair has them all.
        capacities[key] = max(capacities.get(key, 0), len(labels))
    study.protocol_imported_judgements = sum(len(v) for v in existing.values())
    study.save(update_fields=["protocol_imported_judgements"])
    state = adaptive.start(protocol_state.protocol_settings(study), capacities, metric)
    closed = _seed_judgements(state, existing) if existing else None
    opened = adaptive.open_rounds(closed or state)
    protocol_state.study_state_first_save(study, rows, opened, closed=closed)
    return opened


def protocol_ensure_started(*, study: Study) -> bool:
    """Start the protocol of a study imported before it started at import (older databases).

    A write for commands (demo_setup, protocol_sweep); True when it started one. A draft is
    left alone: it starts when a researcher launches it (services.study_launch).
    """
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status == Study.Status.DRAFT:
            return False
        if not PairState.objects.filter(study=study, state={}).exists():
            return False
        protocol_start(study=study)
        return True


def _seed_judgements(state: adaptive.ProtocolState, existing: dict) -> adaptive.ProtocolState:
    """Record judgements collected before the protocol started as one closed round per pair."""
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


def rounds_close(*, study_id: int) -> int:
    """Close every filled round of the study and open the next rounds; returns pairs closed.

    Call outside any transaction: the state is read and decided with no lock held, and
    only the rows written are checked and written under the study's lock (compare-and-set
    on their versions; a pass that finds one moved starts again from a fresh snapshot).
    Safe to run concurrently with serving, with itself and again after a crash.
    Why the rows of open pairs need no check: opening rounds shares out the budget left,
    budget - (spent + reserved), and a submit moves one judgement from reserved to spent.
    """
    from . import quality

    for _ in range(CLOSE_PASSES):
        study = Study.objects.get(pk=study_id)
        if quality.redecide_pending(study):
            # An exclusion or re-inclusion asked for a re-decision (services/quality.py).
            quality.protocol_redecide(study_id=study_id)
            study = Study.objects.get(pk=study_id)
        snapshot = protocol_state.study_state_snapshot(study)
        if snapshot is None:
            return 0
        read_at, before = snapshot
        after_close = adaptive.close_rounds(before)  # the expensive part: no transaction, no lock
        opened = adaptive.open_rounds(after_close)
        if settings.EVALAPP_FAULT_PAUSE_BEFORE_APPLY:
            time.sleep(settings.EVALAPP_FAULT_PAUSE_BEFORE_APPLY)  # fault tests kill a worker here
        applied = _rounds_apply(study, read_at, before, after_close, opened)
        if applied is not None:
            return applied
    log.warning("study %s: rounds moved under %d close passes; the sweep will close them", study_id, CLOSE_PASSES)
    return 0


@retry_transient
def _rounds_apply(study: Study, read_at: dict[tuple[str, str], tuple[int, int]], before: adaptive.ProtocolState,
                  after_close: adaptive.ProtocolState, opened: adaptive.ProtocolState) -> int | None:
    """Write a close computed from a snapshot, unless what it read has moved (then None).

    ``read_at``: each pair's (row id, version) in the snapshot ``before``.
    """
    earlier = {p.key: p for p in before.pairs}
    writes = [read_at[p.key] for p in opened.pairs if p != earlier[p.key]]
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
    return sum(p.status != a.status for p, a in zip(before.pairs, after_close.pairs))


# --- Where a close runs -------------------------------------------------------------------

_executor: ThreadPoolExecutor | None = None
_pending: set[int] = set()
_guard = threading.Lock()


def schedule_close(study_id: int) -> None:
    """Have the study's filled rounds closed soon, off this request; call after commit."""
    mode = settings.EVALAPP_ROUND_CLOSE
    if mode == "inline":
        rounds_close(study_id=study_id)
    elif mode == "celery":
        # Coalesce a burst of filled rounds into one task (the task closes all of them).
        if cache.add(QUEUED_KEY.format(study_id), 1, timeout=1):
            from ..tasks import rounds_close_task

            rounds_close_task.delay(study_id)
    else:
        global _executor
        with _guard:
            if study_id in _pending:
                return
            _pending.add(study_id)
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalapp-rounds")
        _executor.submit(_close_in_thread, study_id)
        sweeper_ensure()


def _close_in_thread(study_id: int) -> None:
    with _guard:
        # Cleared before the close runs: a round that fills meanwhile schedules another close.
        _pending.discard(study_id)
    try:
        rounds_close(study_id=study_id)
    except Exception:  # a background thread has nobody to raise to; the sweep retries
        log.exception("closing the rounds of study %s failed", study_id)
    finally:
        connection.close()


def protocol_sweep() -> dict:
    """Periodic repair: close filled rounds left behind, return expired leases to the pool, apply
    the studies' exclusion rules, finish re-decisions left behind (finished studies too) and
    resume planner jobs whose process ended."""
    from .hits import leases_reclaim

    from . import quality

    closed = reclaimed = excluded = 0
    # A finished study serves nothing, but a researcher may still exclude a worker there: finish
    # a re-decision whose task was lost.
    for study in Study.objects.filter(status=Study.Status.FINISHED).exclude(
            protocol_redecide_requested=F("protocol_redecide_done")):
        closed += rounds_close(study_id=study.pk)
    for study in Study.objects.filter(status__in=[Study.Status.RUNNING, Study.Status.PAUSED]):
        reclaimed += leases_reclaim(study=study)
        excluded += len(quality.exclusion_rules_apply(study=study))
        study.refresh_from_db()
        if quality.redecide_pending(study) or PairState.objects.filter(study=study, status=adaptive.FILLED).exists():
            closed += rounds_close(study_id=study.pk)
    from .planner import plan_jobs_resume

    return {"pairs_closed": closed, "leases_reclaimed": reclaimed, "workers_excluded": excluded,
            "plans_resumed": plan_jobs_resume()}


_sweeper: threading.Thread | None = None


def sweeper_ensure() -> None:
    """Start this process's sweep thread (embedded mode, no broker) unless it runs already."""
    global _sweeper
    if settings.EVALAPP_ROUND_CLOSE != "thread" or (_sweeper is not None and _sweeper.is_alive()):
        return
    with _guard:
        if _sweeper is None or not _sweeper.is_alive():
            _sweeper = threading.Thread(target=_sweep_forever, name="evalapp-sweep", daemon=True)
            _sweeper.start()


def _sweep_forever() -> None:
    """Sweep every EVALAPP_SWEEP_SECONDS while round closes run in threads; a process whose
    mode changes (the test suite switches it per test) stops its sweeper rather than sweep
    behind the back of a test that runs closes another way."""
    while True:
        waited = 0.0
        while waited < settings.EVALAPP_SWEEP_SECONDS:
            if settings.EVALAPP_ROUND_CLOSE != "thread":
                return
            step = min(1.0, settings.EVALAPP_SWEEP_SECONDS - waited)
            time.sleep(step)
            waited += step
        if settings.EVALAPP_ROUND_CLOSE != "thread":
            return
        try:
            close_old_connections()
            protocol_sweep()
        except Exception:
            log.exception("protocol sweep failed")
        finally:
            connection.close()
