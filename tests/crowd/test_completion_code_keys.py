"""A worker's completion code cannot be computed from what is public (issue 36, finding 7).

It was the study's code and 10 hex characters of an HMAC keyed by the server's SECRET_KEY (a
fixed public value in the demo and dev settings) over "study:platform:worker:session", so a
worker could compute their own code without working, two entries whose ids differ by where a
":" falls had one code, and 40 bits is little. Now a random key of each study, the fields
encoded unambiguously, 80 bits; entries made before keep the code they could have been given.
"""
import csv
import io

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils.crypto import salted_hmac

from annotation.models import Annotator, CrowdSession, Study
from annotation.selectors.serving import crowd_completion_code, study_crowd_sessions
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.clients import researcher_client

pytestmark = pytest.mark.django_db(transaction=True)

#: Crockford's base32: digits and capitals without I, L, O and U (nothing to misread)
CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def enter(study, pid, session):
    client = Client()
    response = client.get(f"/s/{study.slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=x&SESSION_ID={session}")
    assert response.status_code == 302, response.content[:200]
    return Annotator.objects.get(platform="prolific", external_id=pid, session_id=session)


def code_of(study, pid, session):
    return crowd_completion_code(study=study, annotator=enter(study, pid, session))


def secret_key_code(study, pid, session):
    """The code as it was made before: computable by anyone who knows the SECRET_KEY."""
    mac = salted_hmac("evalapp.completion-code", f"{study.pk}:prolific:{pid}:{session}").hexdigest()
    return f"{study.completion_code}-{mac[:10].upper()}"


def test_a_code_is_not_computable_from_the_secret_key_and_carries_80_bits():
    study = study_import(source=bundle_bytes(crowd_rows()))
    code = code_of(study, "p1", "s1")
    assert code != secret_key_code(study, "p1", "s1")
    prefix, mac = code.rsplit("-", 1)
    assert prefix == "C0DE42" and len(mac) == 16 and set(mac) <= set(CODE_ALPHABET)  # 16 x 5 bits


def test_codes_differ_between_two_studies_with_the_same_code_prefix_and_worker():
    first = study_import(source=bundle_bytes(crowd_rows()), slug="first")
    second = study_import(source=bundle_bytes(crowd_rows()), slug="second")
    assert first.completion_secret != second.completion_secret and len(first.completion_secret) == 64
    assert code_of(first, "p1", "s1") != code_of(second, "p1", "s1")
    # The code depends on the study's key: with another key, another code.
    before = code_of(first, "p1", "s1")
    Study.objects.filter(pk=first.pk).update(completion_secret="0" * 64)
    first.refresh_from_db()
    assert code_of(first, "p1", "s1") != before


def test_ids_that_join_to_the_same_text_get_different_codes():
    """"a:b" + "c" and "a" + "b:c" were one MAC input ("...:a:b:c")."""
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert code_of(study, "a:b", "c") != code_of(study, "a", "b:c")


def test_crowd_csv_lists_each_workers_code_and_never_the_key():
    study = study_import(source=bundle_bytes(crowd_rows()))
    codes = {pid: code_of(study, pid, f"s-{pid}") for pid in ("p1", "p2")}
    researcher = researcher_client(Client(), study)
    body = researcher.get(f"/s/{study.slug}/export/crowd.csv").content.decode()
    assert {r["worker_id"]: r["completion_code"] for r in csv.DictReader(io.StringIO(body))} == codes
    assert study.completion_secret not in body
    assert study.completion_secret not in researcher.get(f"/s/{study.slug}/settings/").content.decode()
    assert study.completion_secret not in str(researcher.get(f"/api/studies/{study.slug}/").content)


def test_an_old_running_studys_issued_codes_still_verify_and_new_entries_get_new_codes():
    """Migration 0021 on a study that ran before it: every entry keeps the code it was given
    (the worker's page and crowd.csv agree), a new entry gets a code of the study's new key."""
    executor = MigrationExecutor(connection)
    before = [("annotation", "0020_active_resolved_to_resolution")]
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        OldStudy, OldAnnotator, OldEntry = (apps.get_model("annotation", name)
                                            for name in ("Study", "Annotator", "CrowdSession"))
        old = OldStudy.objects.create(slug="running", name="Running", completion_code="OLD7", status="running")
        for pid, session, platform in (("p1", "s1", "prolific"), ("a:b", "c", "prolific"), ("W9", "A9", "mturk")):
            annotator = OldAnnotator.objects.create(platform=platform, external_id=pid, session_id=session)
            OldEntry.objects.create(study=old, annotator=annotator, platform_session_id=session)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    study = Study.objects.get(slug="running")
    assert len(study.completion_secret) == 64
    issued = {}
    for entry in CrowdSession.objects.filter(study=study).select_related("annotator"):
        a = entry.annotator
        mac = salted_hmac("evalapp.completion-code", f"{study.pk}:{a.platform}:{a.external_id}:{a.session_id}")
        issued[a.external_id] = f"OLD7-{mac.hexdigest()[:10].upper()}"
        assert crowd_completion_code(study=study, annotator=a) == issued[a.external_id]
    assert {row["worker_id"]: row["completion_code"] for row in study_crowd_sessions(study=study)} == issued
    new = code_of(study, "p2", "s2")
    assert new != secret_key_code(study, "p2", "s2") and len(new.rsplit("-", 1)[1]) == 16
