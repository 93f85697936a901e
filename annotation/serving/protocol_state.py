"""The one codec between PairState rows and ``protocol.adaptive`` state.

Nothing else reads or writes ``PairState.state`` or the columns that mirror it. Every load
validates (``adaptive.ProtocolState.from_dict`` / ``PairState.from_dict``), every write sets
the JSON and its mirror columns together and bumps the row's ``version``.

The protocol's settings are not stored with the pairs: they are a function of the Study row
(``protocol_settings``). The protocol's budget counts the judgements imported with the bundle
(they seed round 0) on top of the study's budget of live judgements, less the judgements of
excluded workers (``Study.protocol_lost_judgements``).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

from django.utils import timezone

from protocol import adaptive

from . import store
from ..models import PairState, PairStateHistory, Study

MIRRORED = ["state", "status", "decision", "theta", "round", "quota_left", "version", "updated_at"]
MIRRORED_COLUMNS = tuple(MIRRORED)


def decision_options(study: Study) -> dict:
    """The ProtocolSettings fields that make the study's decision rule (policy, rule, looks,
    family control across pairs): the protocol run by the app and the planner's replays both
    take them from here, so a plan simulates the rule the study decides with."""
    return {"policy": study.allocation_policy, "rule": study.protocol_rule, "strict": study.protocol_strict,
            "family": study.family_control}


def protocol_settings(study: Study) -> adaptive.ProtocolSettings:
    """The protocol's settings, derived from the study (the one place they are stated)."""
    return adaptive.ProtocolSettings(
        # Judgements of excluded workers stay spent (services/quality.py): they leave the
        # protocol's counts and its budget together.
        budget=study.budget + study.protocol_imported_judgements - study.protocol_lost_judgements,
        batch=study.batch_size,
        gamma=study.gamma,
        seed=study.protocol_seed,
        **decision_options(study),
    )


def pair_state_of(row: PairState) -> adaptive.PairState:
    """The protocol state of one pair row (validated); ValueError when the row holds none."""
    if not row.state:
        raise ValueError(f"pair {row.pk} of study {row.study_id} has no protocol state (protocol not started)")
    return adaptive.PairState.from_dict(row.state)


def pair_row_save(row: PairState, *, leases_change: int = 0) -> None:
    """Write back a row (locked by ``store.pair_row_locked``) that ``pair_write`` filled: its
    JSON, mirror columns and version, and its live-lease counter moved by ``leases_change``."""
    row.updated_at = timezone.now()
    store.pair_save(row, MIRRORED_COLUMNS, leases_change=leases_change)


def study_state_load(study: Study, rows: Iterable[PairState]) -> adaptive.ProtocolState:
    """The whole protocol state from the study row and all its pair rows (validated).

    ``rows``: every PairState of the study, e.g. locked with ``select_for_update`` by a caller
    that will write back with ``study_state_save``.
    """
    blobs = sorted((row.state for row in rows), key=lambda blob: (blob.get("first", ""), blob.get("second", "")))
    if not blobs or not all(blobs):
        raise ValueError(f"study {study.slug!r} has pairs without protocol state (protocol not started)")
    return adaptive.ProtocolState.from_dict(
        {"settings": asdict(protocol_settings(study)), "closes": study.protocol_closes, "pairs": blobs})


# Pairs already parsed by this process, by row id: ((version, updated_at), pair). A round close
# reads the whole study, but between two closes only the pairs judged since have moved (every
# write bumps the version), so the others are neither fetched (their JSON) nor parsed again.
# updated_at is part of the key because a row id can come back after a rollback (SQLite).
_parsed: dict[int, tuple[tuple, adaptive.PairState]] = {}
PARSED_MAX = 50_000


def study_state_snapshot(study: Study) -> tuple[dict[tuple[str, str], tuple[int, int]], adaptive.ProtocolState] | None:
    """The whole protocol state (validated) and each pair's (row id, version) it was read at, or
    None when no pair's round is filled (nothing to close). No lock: for a caller that writes
    back compare-and-set on the versions (services/runtime.rounds_close).

    Reads every row's version and status, then the JSON of the rows this process has not parsed
    at that version yet.
    """
    heads = list(PairState.objects.filter(study=study).values_list("pk", "version", "updated_at", "status"))
    if not any(status == adaptive.FILLED for *_, status in heads):
        return None
    stale = [pk for pk, version, updated_at, _ in heads if _parsed.get(pk, (None,))[0] != (version, updated_at)]
    if len(_parsed) + len(stale) > PARSED_MAX:
        _parsed.clear()
    for pk, version, updated_at, blob in (PairState.objects.filter(pk__in=stale)
                                          .values_list("pk", "version", "updated_at", "state")):
        if not blob:
            raise ValueError(f"study {study.slug!r} has pairs without protocol state (protocol not started)")
        _parsed[pk] = ((version, updated_at), adaptive.PairState.from_dict(blob))
    read = {pk: _parsed[pk] for pk, *_ in heads}  # a row that moved meanwhile: its newer version
    state = adaptive.ProtocolState.from_pairs(protocol_settings(study), [pair for _, pair in read.values()],
                                              study.protocol_closes)
    return {pair.key: (pk, version) for pk, ((version, _), pair) in read.items()}, state


def pair_write(row: PairState, pair: adaptive.PairState) -> None:
    """Put ``pair`` into ``row`` (JSON and mirror columns) and bump its version; no save."""
    row.state = pair.to_dict()
    row.status = pair.status
    row.decision = pair.decision
    row.theta = pair.theta[-1] if pair.theta else None
    row.round = pair.round
    row.quota_left = pair.quota
    row.version += 1


def study_state_save(
    study: Study,
    rows: Iterable[PairState],
    state: adaptive.ProtocolState,
    *,
    before: adaptive.ProtocolState,
    closed: adaptive.ProtocolState | None = None,
) -> list[PairState]:
    """Write the pairs of ``state`` that differ from ``before``; returns the rows written.

    ``before`` is the state loaded from ``rows`` (not parsed again here); ``rows`` must
    include the row of every pair that differs. Call inside a transaction that holds the
    locks of those rows — or has checked, under the study's lock, that their versions are
    the ones ``before`` was loaded from — and of the study when its closes counter moves.
    ``closed``: the state right after ``close_rounds`` (before new rounds opened) — a history
    row is written for every pair it closed, with the closed round's number.
    """
    by_key = {(row.state.get("first"), row.state.get("second")): row for row in rows if row.state}
    earlier = {p.key: p for p in before.pairs}
    closed_pairs = {p.key: p for p in closed.pairs} if closed is not None else {}
    changed, history = [], []
    for pair in state.pairs:
        old = earlier[pair.key]
        was_closed = closed_pairs.get(pair.key)
        if was_closed is not None and len(was_closed.theta) > len(old.theta):
            history.append(_history_row(by_key[pair.key], was_closed))
        if pair != old:
            row = by_key[pair.key]
            pair_write(row, pair)
            changed.append(row)
    PairState.objects.bulk_update(changed, MIRRORED)
    PairStateHistory.objects.bulk_create(history)
    if study.protocol_closes != state.closes:
        study.protocol_closes = state.closes
        study.save(update_fields=["protocol_closes"])
    return changed


def _history_row(row: PairState, pair: adaptive.PairState) -> PairStateHistory:
    return PairStateHistory(
        pair_state=row, round=pair.round, decision=pair.decision, theta=pair.theta[-1],
        counts={"paired": [list(r) for r in pair.paired], "human_only": list(pair.human_only),
                "metric_only": list(pair.metric_only), "status": pair.status},
        judgements=pair.judgements)


def study_state_first_save(study: Study, rows: Iterable[PairState], state: adaptive.ProtocolState, *,
                           closed: adaptive.ProtocolState | None = None) -> None:
    """Write a freshly started protocol into rows that hold no state yet (and its history)."""
    by_key = {(row.first.name, row.second.name): row for row in rows}
    closed_pairs = {p.key: p for p in closed.pairs} if closed is not None else {}
    history = []
    for pair in state.pairs:
        row = by_key[pair.key]
        pair_write(row, pair)
        was_closed = closed_pairs.get(pair.key)
        if was_closed is not None and was_closed.theta:
            history.append(_history_row(row, was_closed))
    PairState.objects.bulk_update(list(by_key.values()), MIRRORED)
    PairStateHistory.objects.bulk_create(history)
    study.protocol_closes = state.closes
    study.save(update_fields=["protocol_closes"])
