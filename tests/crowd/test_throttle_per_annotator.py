"""Crowd pages are limited per annotator, the crowd worker's Annotator (worker id + platform
session bound by the start link), not per cookie session (issue 36, findings 2 and 3): three
cookie jars entering one worker made 360 submits a minute of a 120/minute limit, and the HIT
page itself had no limit (12 parallel GETs of one session made another visitor's login wait
19.4 s)."""
import pytest
from django.conf import settings
from django.test import Client

from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.crowd import served_hits
from tests.builders.throttling import assert_throttled, rates

pytestmark = pytest.mark.django_db(transaction=True)


def jars_of_one_worker(study, n, pid="w1", session="sess-1"):
    """``n`` clients (cookie jars) that each entered the study as the same worker session."""
    jars = [Client() for _ in range(n)]
    for jar in jars:
        response = jar.get(f"/s/{study.slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=x&SESSION_ID={session}")
        assert response.status_code == 302
    return jars


def test_three_cookie_jars_of_one_worker_share_one_submit_limit(settings):
    rates(settings, submit="4/minute")
    study = study_import(source=bundle_bytes(crowd_rows()))
    jars = jars_of_one_worker(study, 3)
    statuses = [jars[n % 3].post(f"/s/{study.slug}/next/").status_code for n in range(6)]
    assert statuses[:4] == [302] * 4 and statuses[4:] == [429, 429], statuses
    assert_throttled(jars[0].post(f"/s/{study.slug}/next/"))
    # Another worker (another platform session of the same worker id too) has a count of their own.
    other, = jars_of_one_worker(study, 1, session="sess-2")
    assert other.post(f"/s/{study.slug}/next/").status_code == 302


def test_answers_from_three_jars_of_one_worker_count_once(settings):
    rates(settings, submit="3/minute")
    study = study_import(source=bundle_bytes(crowd_rows()))
    jars = jars_of_one_worker(study, 3)
    statuses = []
    for n, (assignment, context) in enumerate(served_hits(jars[0], study.slug, 5)):
        statuses.append(jars[n % 3].post(f"/s/{study.slug}/hits/{assignment.pk}/",
                                         {"answer": "left", "key": context["key"]}).status_code)
    assert statuses.count(429) >= 1 and statuses.index(429) == 3, statuses


def test_a_flood_of_page_gets_from_one_session_meets_429_with_retry_after():
    """At the default rate: the page scope is a rate a worker never reaches."""
    limit = int(settings.EVALAPP_THROTTLE_RATES.get("page", "120/minute").split("/")[0])
    study = study_import(source=bundle_bytes(crowd_rows()))
    jar, second_jar = jars_of_one_worker(study, 2)
    statuses = [jar.get(f"/s/{study.slug}/annotate/").status_code for _ in range(limit)]
    assert statuses == [200] * limit
    assert_throttled(jar.get(f"/s/{study.slug}/annotate/"))
    assert_throttled(second_jar.get(f"/s/{study.slug}/annotate/"))  # the same worker from another jar
    other, = jars_of_one_worker(study, 1, pid="w2", session="s2")
    assert other.get(f"/s/{study.slug}/annotate/").status_code == 200


def test_a_fast_worker_reloading_before_every_answer_never_meets_a_limit():
    """The default rates and a minute of a worker faster than any reader: 40 answers (one
    every 1.5 s) without JavaScript (after each answer the page again), the page reloaded
    before each answer too, all within the limits' minute: no 429."""
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=90)))
    jar, = jars_of_one_worker(study, 1)
    answered = 0
    for assignment, context in served_hits(jar, study.slug, 40):
        assert jar.get(f"/s/{study.slug}/annotate/").status_code == 200  # a reload
        response = jar.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "left", "key": context["key"]})
        assert response.status_code == 302, response.status_code
        answered += 1
    assert answered == 40
    assert jar.get(f"/s/{study.slug}/annotate/").status_code == 200


def test_a_request_that_names_no_annotator_counts_per_client_address(settings):
    """No login and no crowd entry in the session: counted per client IP before the view."""
    rates(settings, page="3/minute", submit="2/minute")
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert [Client().get(f"/s/{study.slug}/annotate/").status_code for _ in range(4)] == [302, 302, 302, 429]
    assert [Client().post(f"/s/{study.slug}/next/").status_code for _ in range(3)] == [403, 403, 429]
    assert Client(REMOTE_ADDR="10.0.0.9").get(f"/s/{study.slug}/annotate/").status_code == 302
