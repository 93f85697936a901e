"""Many annotators leasing and submitting at once on a real study (threads, real database).

Runs on SQLite and, with DATABASE_URL, on PostgreSQL. Bounded: 20 threads, at most 60 s.
"""
import threading
import time

import pytest
from django.db import connection

from annotation.models import Annotator, Judgement, PairState
from annotation.selectors.serving import study_serving_audit
from annotation.services import hits
from annotation.services.studies import study_import
from tests.builders.annotating import annotate_concurrently
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("round_close", ["inline", "thread"])
def test_twenty_annotators_at_once_keep_every_invariant(settings, round_close):
    settings.EVALAPP_BACKGROUND_WORK = round_close
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=150)))
    outcome = annotate_concurrently(study)
    assert outcome["errors"] == []
    # Background closes finish (bounded wait), then every invariant holds.
    deadline = time.monotonic() + 30
    while PairState.objects.filter(study=study, status="filled").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    audit = study_serving_audit(study=study, acknowledged_keys=outcome["acknowledged"])
    assert audit["problems"] == [] and audit["duplicates"] == 0 and audit["lost"] == 0, audit
    assert audit["protocol_consistent"] and audit["counters_consistent"]
    stored = Judgement.objects.filter(comparison__study=study).count()
    assert stored == len(set(outcome["acknowledged"])) > 0
    assert audit["pairs_filled_waiting_for_close"] == 0


@pytest.mark.parametrize("same_key", [True, False])
def test_the_same_hit_submitted_twice_at_once_is_stored_once(same_key):
    """Two submits of one HIT race (a double click, a retried request): one judgement is
    stored; the same key gets the same judgement back, another key a clear refusal."""
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=60)))
    annotator = Annotator.objects.create(platform=Annotator.Platform.PROLIFIC, external_id="double")
    for round_ in range(10):
        hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
        keys = [hits.new_idempotency_key()] * 2 if same_key else [hits.new_idempotency_key() for _ in range(2)]
        results, barrier = [None, None], threading.Barrier(2)

        def submit(n):
            barrier.wait()
            try:
                results[n] = hits.judgement_submit(assignment=hit, annotator=annotator, shown_value=1,
                                                   idempotency_key=keys[n])
            except hits.HitError as error:
                results[n] = error
            finally:
                connection.close()

        racers = [threading.Thread(target=submit, args=(n,)) for n in range(2)]
        for r in racers:
            r.start()
        for r in racers:
            r.join(30)
        stored = Judgement.objects.filter(assignment=hit)
        assert stored.count() == 1, results
        judgements = [r for r in results if isinstance(r, Judgement)]
        if same_key:
            assert [j.pk for j in judgements] == [stored.get().pk] * 2, results
        else:
            assert len(judgements) == 1 and judgements[0].pk == stored.get().pk, results
            assert "already answered" in str(next(r for r in results if isinstance(r, hits.HitError)))
    audit = study_serving_audit(study=study)
    assert audit["problems"] == [] and audit["duplicates"] == 0, audit


def test_the_sweeper_thread_stops_when_closes_no_longer_run_in_threads(settings):
    """A test in thread mode starts this process's sweeper; once the mode is switched back it
    must stop, or it sweeps (closes rounds) behind the back of later tests — the PostgreSQL
    fault test once saw its filled rounds closed by it."""
    from annotation import jobs

    settings.EVALAPP_BACKGROUND_WORK = "thread"
    settings.EVALAPP_SWEEP_SECONDS = 0.2
    jobs.sweeper_ensure()
    sweeper = jobs._sweeper
    assert sweeper is not None and sweeper.is_alive()
    settings.EVALAPP_BACKGROUND_WORK = "inline"
    sweeper.join(timeout=10)
    assert not sweeper.is_alive()
