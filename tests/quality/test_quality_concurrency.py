"""Exclusions while annotators submit at once: the re-decision's compare-and-set keeps every
invariant (threads, real database; SQLite and, with DATABASE_URL, PostgreSQL)."""
import threading
import time

import pytest
from django.db import connection

from annotation.models import Annotator, Judgement, PairState
from annotation.selectors.quality import counted_judgements
from annotation.selectors.serving import study_serving_audit
from annotation.serving import protocol_state
from annotation.services import quality, runtime
from annotation.services.studies import study_import
from tests.builders.annotating import annotate_concurrently
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("round_close", ["inline", "thread"])
def test_excluding_and_reincluding_during_submits_keeps_every_invariant(settings, round_close):
    settings.EVALAPP_BACKGROUND_WORK = round_close
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=150)))
    outcome = {}

    def crowd_run():
        try:
            outcome.update(annotate_concurrently(study, threads=8))
        finally:
            # This thread's own connection (it creates the annotators): left open, PostgreSQL
            # could not drop the test database at the end of the run ("2 other sessions").
            connection.close()

    crowd = threading.Thread(target=crowd_run)
    crowd.start()
    toggles = 0
    try:
        deadline = time.monotonic() + 30
        while not Annotator.objects.filter(external_id="t0").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        target = Annotator.objects.get(external_id="t0")
        while Judgement.objects.filter(annotator=target).count() < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        for _ in range(3):
            toggles += quality.annotator_exclude(study=study, annotator=target, reason="concurrency")
            time.sleep(0.15)
            toggles += quality.annotator_include(study=study, annotator=target)
            time.sleep(0.15)
        toggles += quality.annotator_exclude(study=study, annotator=target, reason="final")
    finally:
        crowd.join(120)
        connection.close()
    assert toggles == 7 and outcome["errors"] == []
    # Closes and re-decisions left pending by a lost pass finish in the sweep.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        runtime.protocol_sweep()
        study.refresh_from_db()
        if not runtime.redecide_pending(study) and not PairState.objects.filter(study=study,
                                                                                 status="filled").exists():
            break
        time.sleep(0.2)
    study.refresh_from_db()
    assert not runtime.redecide_pending(study)
    audit = study_serving_audit(study=study, acknowledged_keys=outcome["acknowledged"])
    assert audit["protocol_consistent"] and audit["counters_consistent"], audit["problems"]
    assert audit["lost"] == 0 and audit["duplicates"] == 0
    assert study.protocol_lost_judgements == Judgement.objects.filter(annotator=target).count() > 0
    state = protocol_state.study_state_load(study, PairState.objects.filter(study=study))
    assert state.spent == counted_judgements(study=study).count()
