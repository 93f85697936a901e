"""The serving loop's plain SQL (annotation/serving/store.py) writes what the ORM would, and reads it back.

The loop's statements are hand-written for speed; these tests read what they wrote through
the ORM (datetimes, JSON, booleans on SQLite and PostgreSQL alike) and check that PostgreSQL
prepares them (server-side parameters, docs/serving.md).
"""
import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from annotation.models import Annotator, Assignment, Comparison, Judgement, MetricScore, Output, PairState
from annotation import selectors
from annotation.serving import protocol_state, store
from annotation.services import hits
from annotation.services.studies import study_import
from annotation.serving.store import pair_row_locked
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.crowd import start_worker

pytestmark = pytest.mark.django_db(transaction=True)
FORM = re.compile(r'<form method="post" action="([^"]+/hits/\d+/)"')
KEY = re.compile(r'name="key" value="([^"]+)"')


def _study():
    return study_import(source=bundle_bytes(crowd_rows(items=20, batch=4, budget=60)))


def test_an_imports_outputs_and_metric_scores_read_back_through_the_orm_as_the_bundle_has_them():
    rows = crowd_rows(items=6)
    rows[7]["sample"] = 3  # a sample index, stored as given
    study = study_import(source=bundle_bytes(rows))
    outputs = {(o.item.external_id, o.system.name): o for o in Output.objects.filter(item__study=study)
               .select_related("item", "system")}
    assert {key: (o.text, o.sample, o.messages, o.html) for key, o in outputs.items()} == {
        (r["item"], r["system"]): (r["text"], r.get("sample", 0), None, "") for r in rows if r["kind"] == "output"}
    # a text's messages are SQL NULL, not JSON null
    assert Output.objects.filter(item__study=study, messages__isnull=True).count() == len(outputs)
    scores = {(s.output.item.external_id, s.output.system.name, s.metric.name): s.value
              for s in MetricScore.objects.filter(metric__study=study).select_related("output__item", "output__system",
                                                                                       "metric")}
    assert scores == {(r["item"], r["system"], r["metric"]): r["score"] for r in rows if r["kind"] == "metric_score"}


def test_a_lease_reads_back_through_the_orm_as_it_was_made():
    study = _study()
    annotator = hits.annotator_for_worker(platform=Annotator.Platform.PROLIFIC, worker_id="w1")
    before = timezone.now()
    lease = hits.hit_next_for_annotator(study=study, annotator=annotator)
    stored = Assignment.objects.get(pk=lease.pk)
    assert (stored.issued_at, stored.expires_at, stored.shown_swapped, stored.round, stored.state) == (
        lease.issued_at, lease.expires_at, lease.shown_swapped, lease.round, Assignment.State.LEASED)
    assert before <= stored.issued_at <= timezone.now() and timezone.is_aware(stored.issued_at)
    comparison = Comparison.objects.get(pk=lease.comparison_id)
    assert comparison.lease_expires_at == lease.expires_at
    assert PairState.objects.get(pk=comparison.pair_id).leased == 1
    # Read back by the loop's own statement: the same lease, aware datetimes.
    current = selectors.serving.hit_current(study=study, annotator=annotator)
    assert (current.pk, current.issued_at, current.expires_at, current.shown_swapped) == (
        lease.pk, lease.issued_at, lease.expires_at, lease.shown_swapped)


def _texts(shown: store.HitTexts) -> tuple:
    item = shown.item
    return ((item.pk, item.study_id, item.external_id, item.input, item.input_messages, item.reference,
             item.input_html, item.reference_html), shown.first_id, shown.second_id, shown.outputs)


def test_a_lease_returns_the_texts_its_hit_shows_on_postgresql():
    """On PostgreSQL the lease's write statement returns the HIT's texts (a round trip fewer per
    cycle, docs/serving.md "Round trips"): the same as the HIT's own read, for a comparison's first
    lease, a comparison leased again and an expired lease taken over; on SQLite the HIT reads them."""
    study = _study()
    workers = [hits.annotator_for_worker(platform=Annotator.Platform.PROLIFIC, worker_id=f"w{n}") for n in range(4)]
    first = hits.hit_next_for_annotator(study=study, annotator=workers[0])
    expired = hits.hit_next_for_annotator(study=study, annotator=workers[1])
    hits.hit_release(assignment=first)
    past = timezone.now() - timedelta(minutes=1)
    Assignment.objects.filter(pk=expired.pk).update(expires_at=past)
    Comparison.objects.filter(pk=expired.comparison_id).update(lease_expires_at=past)
    leases = [first, expired]
    for worker, earlier, taking_over in ((workers[2], first, False), (workers[3], expired, True)):
        comparison = Comparison.objects.get(pk=earlier.comparison_id)
        row = PairState.objects.get(pk=comparison.pair_id)
        pair = store.OpenPair(row.pk, row.round, row.quota_left, row.leased, row.first_id, row.second_id)
        now = timezone.now()
        lease = Assignment(annotator=worker, comparison_id=comparison.pk, shown_swapped=True, round=row.round,
                           issued_at=now, expires_at=now + timedelta(minutes=5))
        with transaction.atomic():
            pair_row_locked(pair.id)
            store.lease_write(study.pk, pair, comparison.item_id, lease, taking_over=taking_over)
        assert lease.comparison_id == comparison.pk
        leases.append(lease)
    for lease in leases:
        shown = store.lease_texts(lease)
        if connection.vendor == "postgresql":
            assert shown is not None and _texts(shown) == _texts(store.hit_texts(lease.comparison_id))
            assert {system_id for system_id, *_ in shown.outputs} == {shown.first_id, shown.second_id}
        else:
            assert shown is None
    # A lease read again (the annotate page, a retry) reads its texts: the same screen.
    again = selectors.serving.hit_current(study=study, annotator=workers[3])
    assert again.pk == leases[-1].pk and store.lease_texts(again) is None
    shown, read = (selectors.serving.hit_display(assignment=a, study=study, done=0) for a in (leases[-1], again))
    assert (shown["left"], shown["right"], shown["item"].input) == (read["left"], read["right"], read["item"].input)


def test_a_submit_writes_its_judgement_counters_and_protocol_state_as_the_orm_reads_them():
    study = _study()
    annotator = hits.annotator_for_worker(platform=Annotator.Platform.PROLIFIC, worker_id="w1")
    lease = hits.hit_next_for_annotator(study=study, annotator=annotator)
    pair_id = Comparison.objects.get(pk=lease.comparison_id).pair_id
    version = PairState.objects.get(pk=pair_id).version
    judgement = hits.judgement_submit(assignment=selectors.serving.hit_of_study(study=study, assignment_id=lease.pk),
                                      annotator=annotator, shown_value=1, idempotency_key="k1", seconds_on_task=7.5)
    stored = Judgement.objects.get(pk=judgement.pk)
    assert (stored.value, stored.seconds_on_task, stored.idempotency_key, stored.kind, stored.source) == (
        -1 if lease.shown_swapped else 1, 7.5, "k1", "real", "live")
    assert timezone.is_aware(stored.created_at) and stored.created_at == judgement.created_at
    assert stored.server_seconds == pytest.approx((stored.created_at - lease.issued_at).total_seconds())
    assert Assignment.objects.get(pk=lease.pk).state == Assignment.State.SUBMITTED
    comparison = Comparison.objects.get(pk=lease.comparison_id)
    assert (comparison.judgement_count, comparison.lease_expires_at) == (1, None)
    row = PairState.objects.get(pk=pair_id)
    assert (row.leased, row.version) == (0, version + 1)
    # The JSON is an object (not a string of one), valid for the codec, and holds the judgement.
    pair = protocol_state.pair_state_of(row.study, row)
    assert isinstance(row.state, dict) and pair.judgements >= 1
    assert row.quota_left == pair.quota and row.status == pair.status
    with transaction.atomic():
        locked = pair_row_locked(pair_id)
    assert (locked.state, locked.version, locked.updated_at, locked.leased) == (
        row.state, row.version, row.updated_at, row.leased)
    # The same key again: the same judgement, nothing written twice.
    again = hits.judgement_submit(assignment=selectors.serving.hit_of_study(study=study, assignment_id=lease.pk),
                                  annotator=annotator, shown_value=1, idempotency_key="k1")
    assert again.pk == judgement.pk and Judgement.objects.filter(assignment_id=lease.pk).count() == 1


def test_a_hit_of_another_study_is_not_found():
    study, other = _study(), study_import(source=bundle_bytes(crowd_rows(items=10, batch=4, budget=30)), slug="other")
    annotator = hits.annotator_for_worker(platform=Annotator.Platform.PROLIFIC, worker_id="w1")
    lease = hits.hit_next_for_annotator(study=study, annotator=annotator)
    assert selectors.serving.hit_of_study(study=other, assignment_id=lease.pk) is None
    found = selectors.serving.hit_of_study(study=study, assignment_id=lease.pk)
    assert found.comparison.study is study and found.comparison.item.external_id.startswith("i")


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="prepared statements are PostgreSQL's")
def test_the_serving_loop_runs_prepared_statements_on_postgresql(client):
    study = _study()
    start_worker(client, study.slug, "prepared")
    body = client.get(f"/s/{study.slug}/annotate/").content.decode()
    for _ in range(4):  # a statement is prepared after EVALAPP_PG_PREPARE_THRESHOLD (2) runs
        response = client.post(FORM.search(body).group(1), {"key": KEY.search(body).group(1), "answer": "left"},
                               HTTP_HX_REQUEST="true")
        body = response.content.decode()
        assert response.status_code == 200 and FORM.search(body)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [statement for (statement,) in cursor.fetchall()]
    for table in ("annotation_judgement", "annotation_pairstate", "annotation_assignment"):
        assert any(f'INSERT INTO "{table}"' in s or f'UPDATE "{table}"' in s for s in prepared), (table, prepared)


def test_an_expired_leases_answer_taken_while_its_comparison_is_free_leaves_every_counter_right():
    """The submit's writes are one statement on PostgreSQL (store.judgement_submit_write): a lease
    that expired and was reclaimed ends nothing, so the answer moves neither the comparison's
    lease nor the pair's live-lease count, and the assignment is marked submitted after all."""
    study = _study()
    annotator = hits.annotator_for_worker(platform=Annotator.Platform.PROLIFIC, worker_id="w1")
    lease = hits.hit_next_for_annotator(study=study, annotator=annotator)
    pair_id = Comparison.objects.get(pk=lease.comparison_id).pair_id
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timezone.timedelta(seconds=1))
    Comparison.objects.filter(pk=lease.comparison_id).update(lease_expires_at=timezone.now() - timezone.timedelta(seconds=1))
    assert hits.leases_reclaim(study=study) == 1
    version = PairState.objects.get(pk=pair_id).version
    judgement = hits.judgement_submit(assignment=selectors.serving.hit_of_study(study=study, assignment_id=lease.pk),
                                      annotator=annotator, shown_value=1, idempotency_key="late")
    assert Judgement.objects.get(pk=judgement.pk).assignment_id == lease.pk
    assert Assignment.objects.get(pk=lease.pk).state == Assignment.State.SUBMITTED
    comparison = Comparison.objects.get(pk=lease.comparison_id)
    assert (comparison.judgement_count, comparison.lease_expires_at) == (1, None)
    row = PairState.objects.get(pk=pair_id)
    assert (row.leased, row.version) == (0, version + 1)
    assert selectors.serving.study_serving_audit(study=study)["counters_consistent"]


def test_a_pairs_tie_break_is_drawn_at_the_start_and_anew_at_each_write_of_its_state():
    """Open pairs equally close to full are leased in the order of their ``tie`` (store.open_pairs
    reads them in the serving index's order): drawn by the database for every pair when the
    protocol starts and again whenever the codec writes the pair, so the order among ties is
    random and a pair whose next round opens takes a new place in it."""
    study = _study()
    ties = dict(PairState.objects.filter(study=study).values_list("pk", "tie"))
    assert len(set(ties.values())) == len(ties) == 3
    who = Annotator.objects.create(platform="prolific", external_id="tie")
    lease = hits.hit_next_for_annotator(study=study, annotator=who)
    pair_id = lease.comparison.pair_id
    hits.judgement_submit(assignment=lease, annotator=who, shown_value=1, idempotency_key="k")
    after = dict(PairState.objects.filter(study=study).values_list("pk", "tie"))
    assert after[pair_id] != ties[pair_id]
    assert {pk: tie for pk, tie in after.items() if pk != pair_id} == \
        {pk: tie for pk, tie in ties.items() if pk != pair_id}
    order = store.open_pairs(study.pk, "open")
    assert [pair.id for pair in order] == [pk for _, _, pk in sorted(
        (row.quota_left - row.leased, row.tie, row.pk) for row in PairState.objects.filter(study=study, status="open")
        if row.quota_left > row.leased)]
