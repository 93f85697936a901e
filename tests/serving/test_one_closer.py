"""One closer of a study's rounds at a time, across processes (services/runtime.rounds_close).

Each web process closes the rounds its own submits filled; closing at once, they undid each
other's work (the compare-and-set kept the state right, but the loser decided the whole study
again: on PostgreSQL "rounds moved under 5 close passes" 12 times in a 40-s load run)."""
import threading
import time
from datetime import timedelta

import pytest
from django.db import OperationalError, connection

from annotation.models import PairState, Study
from annotation.services import runtime
from protocol import adaptive, rubric
from tests.builders.studies import first_rounds_filled_unclosed

pytestmark = pytest.mark.django_db(transaction=True)


def _filled_study(settings):
    settings.EVALAPP_BACKGROUND_WORK = "celery"  # no close runs in the submits' requests
    return first_rounds_filled_unclosed("c")


def test_a_close_asked_for_while_another_runs_is_left_to_it(settings, monkeypatch):
    study = _filled_study(settings)
    decided = []
    real_close = rubric.close_rounds
    monkeypatch.setattr(rubric, "close_rounds", lambda state: decided.append(1) or real_close(state))
    # The first closer pauses between deciding and applying; the second arrives meanwhile.
    settings.EVALAPP_FAULT_PAUSE_BEFORE_APPLY = 1.0
    results = {}

    def close(name):
        try:
            results[name] = runtime.rounds_close(study_id=study.pk)
        finally:
            connection.close()

    first = threading.Thread(target=close, args=("first",))
    first.start()
    deadline = time.monotonic() + 30
    while not decided and time.monotonic() < deadline:  # the first has decided, and pauses
        time.sleep(0.01)
    second = threading.Thread(target=close, args=("second",))
    second.start()
    second.join(30)
    first.join(30)
    assert results == {"first": 3, "second": 0}
    assert len(decided) == 1  # the study decided once, not again by a rival
    after = Study.objects.get(pk=study.pk)
    assert after.protocol_closes == 1 and after.protocol_closer_until is None and not after.protocol_close_again
    assert not PairState.objects.filter(study=study, status=adaptive.FILLED).exists()


def test_a_hold_left_by_a_dead_closer_lapses(settings):
    study = _filled_study(settings)
    held = runtime._closer_until()
    assert runtime._closer_take(study.pk, held)
    assert runtime.rounds_close(study_id=study.pk) == 0  # asked the holder to close again
    assert Study.objects.get(pk=study.pk).protocol_close_again
    # The holder died: once its hold lapses the next close (or the sweep) takes over.
    Study.objects.filter(pk=study.pk).update(protocol_closer_until=held - timedelta(
        seconds=2 * runtime.CLOSER_SECONDS))
    assert runtime.rounds_close(study_id=study.pk) == 3
    assert Study.objects.get(pk=study.pk).protocol_closer_until is None


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="cuts a PostgreSQL connection")
def test_a_close_whose_connection_is_cut_lets_go_of_its_hold(settings, monkeypatch):
    """A close whose connection is terminated under it lets go of its hold on a fresh one: a
    hold left behind stopped the study's closes for CLOSER_SECONDS, and the PostgreSQL fault
    test's annotators ran out of open rounds."""
    study = _filled_study(settings)

    def cut_under_the_close(study_id):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()

        def terminate():
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            finally:
                connection.close()

        killer = threading.Thread(target=terminate)
        killer.start()
        killer.join(10)
        Study.objects.count()  # on the terminated connection: OperationalError
        raise AssertionError("the connection was not cut")

    monkeypatch.setattr(runtime, "_rounds_close_passes", cut_under_the_close)
    with pytest.raises(OperationalError):
        runtime.rounds_close(study_id=study.pk)
    connection.close()
    assert Study.objects.get(pk=study.pk).protocol_closer_until is None
