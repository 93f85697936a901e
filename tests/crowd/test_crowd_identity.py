"""A crowd worker is one platform session of a worker id (issue 21, finding 4): no squatting,
the platform's study checked, new workers per client limited, a code of one's own."""
import csv
import io
import json
import threading

import pytest
from django.db import connection
from django.test import Client

from annotation.access import session_annotator_key
from annotation.models import Annotator, Assignment, CrowdSession
from annotation.selectors.exports import study_export_rows
from annotation.services.studies import study_import
from protocol.bundle import parse_bundle_lines
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)


def enter(client, slug, query):
    return client.get(f"/s/{slug}/start/?{query}")


def test_an_earlier_visitor_with_a_workers_id_does_not_lock_the_genuine_worker_out():
    """Whoever types a real worker's id first works as their own session: the genuine worker,
    arriving with the platform's session, gets in (it was a 403) and keeps their own work and code."""
    study = study_import(source=bundle_bytes(crowd_rows()))
    squatter = Client()
    assert enter(squatter, study.slug, "PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=invented").status_code == 302
    lease = squatter.get(f"/s/{study.slug}/annotate/").context["assignment"]
    genuine = Client()
    assert enter(genuine, study.slug, "PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=sess-real").status_code == 302
    own = genuine.get(f"/s/{study.slug}/annotate/").context["assignment"]
    assert own is not None and own.pk != lease.pk and own.annotator_id != lease.annotator_id
    # Neither may answer the other's HIT.
    assert genuine.post(f"/s/{study.slug}/hits/{lease.pk}/", {"answer": "left", "key": "k" * 8}).status_code == 409
    assert Assignment.objects.get(pk=lease.pk).state == Assignment.State.LEASED
    assert sorted(CrowdSession.objects.filter(study=study).values_list("platform_session_id", flat=True)) == [
        "invented", "sess-real"]
    # The same platform session (a reload, another browser of it) continues the same work.
    again = Client()
    assert enter(again, study.slug, "PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID=sess-real").status_code == 302
    assert again.get(f"/s/{study.slug}/annotate/").context["assignment"].pk == own.pk


def test_mturk_assignments_are_sessions_and_a_session_id_is_required():
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert enter(Client(), study.slug, "workerId=W1&assignmentId=A1&turkSubmitTo=https://x").status_code == 302
    assert enter(Client(), study.slug, "workerId=W1&assignmentId=A2&turkSubmitTo=https://x").status_code == 302
    assert Annotator.objects.filter(external_id="W1").count() == 2
    missing = enter(Client(), study.slug, "PROLIFIC_PID=p2&STUDY_ID=x")
    assert missing.status_code == 400 and "SESSION_ID" in missing.content.decode()
    assert not CrowdSession.objects.filter(annotator__external_id="p2").exists()


def test_a_prolific_link_of_another_study_is_refused():
    rows = crowd_rows()
    rows[0]["prolific_study_id"] = "64f0aa"
    study = study_import(source=bundle_bytes(rows))
    for query in ("PROLIFIC_PID=p1&STUDY_ID=other&SESSION_ID=s1", "PROLIFIC_PID=p1&SESSION_ID=s1"):
        response = enter(Client(), study.slug, query)
        assert response.status_code == 400 and "STUDY_ID is not this study" in response.content.decode()
    assert not CrowdSession.objects.exists()
    assert enter(Client(), study.slug, "PROLIFIC_PID=p1&STUDY_ID=64f0aa&SESSION_ID=s1").status_code == 302


def test_a_prolific_study_refuses_the_mturk_form_of_its_link():
    """The MTurk form (?workerId=) skipped the STUDY_ID check of a Prolific study (issue 36,
    finding 6): a study that names its Prolific study takes entries from Prolific only."""
    rows = crowd_rows()
    rows[0]["prolific_study_id"] = "64f0aa"
    study = study_import(source=bundle_bytes(rows))
    for query in ("workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https://www.mturk.com",
                  "workerId=W1&assignmentId=A1&STUDY_ID=64f0aa"):
        response = enter(Client(), study.slug, query)
        assert response.status_code == 400, query
        assert "runs on Prolific" in response.content.decode()
    assert not CrowdSession.objects.exists() and not Annotator.objects.filter(platform="mturk").exists()
    # A study without a Prolific study id takes both forms.
    other = study_import(source=bundle_bytes(crowd_rows()), slug="open")
    assert enter(Client(), other.slug, "workerId=W1&assignmentId=A1").status_code == 302


def test_new_workers_per_client_are_limited_and_a_forged_header_does_not_help(settings):
    """12 invented ids submitted 2,463 counted judgements before: a client may start only so
    many new workers; a returning worker's reload is not a new one."""
    settings.EVALAPP_THROTTLE_RATES = {**settings.EVALAPP_THROTTLE_RATES, "crowd_new": "3/hour"}
    study = study_import(source=bundle_bytes(crowd_rows()))
    statuses = [enter(Client(HTTP_X_FORWARDED_FOR=f"198.51.100.{n}"), study.slug,
                      f"PROLIFIC_PID=inv{n}&STUDY_ID=x&SESSION_ID=s{n}").status_code for n in range(5)]
    assert statuses == [302, 302, 302, 429, 429]
    assert enter(Client(), study.slug, "PROLIFIC_PID=inv0&STUDY_ID=x&SESSION_ID=s0").status_code == 302
    assert CrowdSession.objects.count() == 3


def test_each_worker_gets_their_own_code_and_crowd_csv_lists_it(admin_client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    codes = {}
    for pid, sid in (("p1", "s1"), ("p2", "s2")):
        worker = Client()
        assert enter(worker, study.slug, f"PROLIFIC_PID={pid}&STUDY_ID=x&SESSION_ID={sid}").status_code == 302
        hit = worker.get(f"/s/{study.slug}/annotate/").context
        worker.post(f"/s/{study.slug}/hits/{hit['assignment'].pk}/", {"answer": "left", "key": hit["key"]})
        page = worker.get(f"/s/{study.slug}/annotate/?finish=1")
        assert page.context["code_due"]
        codes[pid] = page.context["completion_code"]
        assert f"cc={codes[pid]}" in page.content.decode()
    assert codes["p1"] != codes["p2"] and all(c.startswith("C0DE42-") for c in codes.values())
    listed = list(csv.DictReader(io.StringIO(admin_client.get(f"/s/{study.slug}/export/crowd.csv").content.decode())))
    assert [(r["worker_id"], r["session_id"], r["judgements"], r["minimum_met"], r["completion_code"])
            for r in listed] == [("p1", "s1", "1", "1", codes["p1"]), ("p2", "s2", "1", "1", codes["p2"])]


def test_a_session_from_before_the_binding_is_not_enough():
    """The Django session alone (an annotator id without a binding to this study) gives no access."""
    study = study_import(source=bundle_bytes(crowd_rows()))
    other = study_import(source=bundle_bytes(crowd_rows()), slug="other")
    client = Client()
    assert enter(client, other.slug, "PROLIFIC_PID=p3&SESSION_ID=s3").status_code == 302
    session = client.session
    session[session_annotator_key(study)] = session[session_annotator_key(other)]
    session.save()
    assert client.get(f"/s/{study.slug}/annotate/").status_code == 403


def test_two_sessions_of_one_worker_id_export_as_two_annotators():
    """Both sessions may judge the same comparison: the exported bundle names each session, so
    it reads back without a duplicate human_preference."""
    rows = [{"kind": "study", "name": "One pair", "batch_size": 2, "budget": 2, "ratings_per_item": 2},
            {"kind": "item", "id": "i1", "input": "Input"},
            {"kind": "output", "item": "i1", "system": "A", "text": "a"},
            {"kind": "output", "item": "i1", "system": "B", "text": "b"}]
    study = study_import(source=bundle_bytes(rows))
    for session in ("s1", "s2"):
        worker = Client()
        assert enter(worker, study.slug, f"PROLIFIC_PID=p1&STUDY_ID=x&SESSION_ID={session}").status_code == 302
        hit = worker.get(f"/s/{study.slug}/annotate/").context
        assert worker.post(f"/s/{study.slug}/hits/{hit['assignment'].pk}/",
                           {"answer": "left", "key": hit["key"]}).status_code == 302
    exported = list(study_export_rows(study=study))
    labels = sorted(r["annotator"] for r in exported if r["kind"] == "human_preference")
    assert labels == ["prolific:p1:s1", "prolific:p1:s2"]
    assert len(parse_bundle_lines((n, json.dumps(r)) for n, r in enumerate(exported, 1)).human_preferences) == 2


def test_one_worker_entering_twice_at_once_is_one_annotator_bound_once():
    """The start link's writes are upserts, read outside their transaction (services/crowd.py):
    two entries of one platform session at once (a double click, two tabs) meet on the
    Annotator's and the CrowdSession's constraints and both work as the one worker."""
    study = study_import(source=bundle_bytes(crowd_rows()))
    both = threading.Barrier(2)
    statuses, annotators = [], []

    def enter_once():
        client = Client()
        try:
            both.wait(10)
            statuses.append(enter(client, study.slug, "PROLIFIC_PID=twice&STUDY_ID=x&SESSION_ID=s1").status_code)
            annotators.append(client.session[session_annotator_key(study)])
        finally:
            connection.close()

    threads = [threading.Thread(target=enter_once) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert statuses == [302, 302] and len(set(annotators)) == 1
    assert Annotator.objects.filter(external_id="twice").count() == 1
    assert CrowdSession.objects.filter(study=study, annotator_id=annotators[0]).count() == 1
