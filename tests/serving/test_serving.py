"""Serving HITs and the protocol inside the app, through the HTTP interface."""

import datetime

import pytest
from django.contrib.auth.models import User

from annotation.services import hits
from annotation.serving import protocol_state
from annotation.models import Annotator, Assignment, Comparison, Judgement, PairState, PairStateHistory, Study
from annotation.services.members import study_membership_set
from annotation.services.quality import annotator_exclude
from annotation.services.studies import study_import
from tests.builders.bundles import BUNDLES, bundle_bytes, crowd_rows
from tests.builders.crowd import current_hit, expire, start_worker, truthful_answer

pytestmark = pytest.mark.django_db(transaction=True)


def test_crowd_worker_flow_respects_budget_and_decisions(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    workers = []
    for n in range(4):
        c = client.__class__()
        start_worker(c, study.slug, f"pid{n}")
        workers.append(c)
    submitted = 0
    for _ in range(200):
        progressed = False
        for c in workers:
            assignment, context = current_hit(c, study.slug)
            if assignment is None:
                continue
            answer = truthful_answer(context["left"], context["right"])
            response = c.post(f"/s/{study.slug}/hits/{assignment.pk}/",
                              {"answer": answer, "key": context["key"], "seconds": "3.5"})
            assert response.status_code == 302, response.content[:500]
            submitted += 1
            progressed = True
        if not progressed:
            break
    study.refresh_from_db()
    live = Judgement.objects.filter(comparison__study=study).count()
    assert live == submitted <= study.budget
    # Stored values are canonical: A beats B and C, whichever side they were shown on.
    ab = Judgement.objects.filter(comparison__first__name="A", comparison__second__name="B")
    assert set(ab.values_list("value", flat=True)) == {1}
    states = {(p.first.name, p.second.name): p for p in PairState.objects.filter(study=study).select_related(
        "first", "second")}
    assert states[("A", "B")].decision == 1 and states[("A", "B")].status == "decided"
    # A decided pair never received judgements after the round that decided it.
    for pair in states.values():
        decided_rounds = [h.round for h in pair.history.all() if h.decision != 0]
        if decided_rounds:
            count = Judgement.objects.filter(comparison__first=pair.first, comparison__second=pair.second).count()
            assert count == pair.history.get(round=decided_rounds[0]).judgements
    assert PairStateHistory.objects.filter(pair_state__study=study).exists()
    # When the work is done, the worker sees the completion code and the Prolific link.
    _, context = current_hit(workers[0], study.slug)
    page = workers[0].get(f"/s/{study.slug}/annotate/").content.decode()
    assert "C0DE42" in page and "prolific.com/submissions/complete?cc=C0DE42" in page
    # A pair row says when its state was last written, by a re-decision too (the stores write
    # the mirrored columns as set, and only a submit set it: one place does now, pair_write)
    long_ago = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    PairState.objects.filter(study=study).update(updated_at=long_ago)
    annotator = Judgement.objects.filter(comparison__study=study).first().annotator
    annotator_exclude(study=study, annotator=annotator, reason="a test of the rows' time")
    before = {p.pk: p.version for p in states.values()}
    after = {pk: (version, at) for pk, version, at in PairState.objects.filter(study=study).values_list(
        "pk", "version", "updated_at")}
    rewritten = [pk for pk, (version, _) in after.items() if version != before[pk]]
    assert rewritten, "the exclusion re-decided no pair"
    assert all(after[pk][1] > long_ago for pk in rewritten)


def test_submit_is_idempotent_and_screen_order_is_undone(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    start_worker(client, study.slug, "pid-x")
    assignment, context = current_hit(client, study.slug)
    data = {"answer": "left", "key": context["key"], "seconds": "2"}
    for _ in range(3):
        assert client.post(f"/s/{study.slug}/hits/{assignment.pk}/", data).status_code == 302
    judgements = Judgement.objects.filter(assignment=assignment)
    assert judgements.count() == 1
    assert judgements.get().value == (-1 if assignment.shown_swapped else 1)
    assert judgements.get().seconds_on_task == 2.0
    state = PairState.objects.get(study=study, first=assignment.comparison.first, second=assignment.comparison.second)
    assert state.state["judgements"] == 1


def test_reload_returns_the_same_lease_and_expired_leases_return_to_the_pool(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    start_worker(client, study.slug, "pid-y")
    first, _ = current_hit(client, study.slug)
    again, _ = current_hit(client, study.slug)
    assert first.pk == again.pk
    pair = PairState.objects.get(pk=first.comparison.pair_id)
    assert pair.leased == 1
    expire(first)
    # The sweep gives an expired lease back to the pool...
    assert hits.leases_reclaim(study=study) == 1
    assert Assignment.objects.get(pk=first.pk).state == Assignment.State.EXPIRED
    assert Comparison.objects.get(pk=first.comparison_id).lease_expires_at is None
    assert PairState.objects.get(pk=pair.pk).leased == 0
    # ...and it is not served again, not even to its annotator.
    later, _ = current_hit(client, study.slug)
    assert later.pk != first.pk


def test_an_expired_lease_is_taken_over_by_the_next_lease_of_its_comparison():
    rows = crowd_rows(items=1, batch=1, budget=3)  # one item: three pairs of one comparison each
    study = study_import(source=bundle_bytes(rows))
    a, b = (Annotator.objects.create(platform="prolific", external_id=n) for n in ("a", "b"))
    leases = [hits.hit_next_for_annotator(study=study, annotator=a)]
    expire(leases[0])
    taken = [hits.hit_next_for_annotator(study=study, annotator=b) for _ in range(1)]
    # b's lease may land on another pair; lease until b takes over a's comparison or runs out.
    while taken[-1] is not None and taken[-1].comparison_id != leases[0].comparison_id:
        hits.judgement_submit(assignment=taken[-1], annotator=b, shown_value=1,
                              idempotency_key=hits.new_idempotency_key())
        taken.append(hits.hit_next_for_annotator(study=study, annotator=b))
    assert taken[-1] is not None and taken[-1].comparison_id == leases[0].comparison_id
    assert Assignment.objects.get(pk=leases[0].pk).state == Assignment.State.EXPIRED
    assert PairState.objects.get(pk=taken[-1].comparison.pair_id).leased == 1
    assert hits.leases_reclaim(study=study) == 0


def test_bad_answers_and_foreign_hits_are_refused(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    start_worker(client, study.slug, "pid-a")
    assignment, context = current_hit(client, study.slug)
    response = client.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "maybe", "key": context["key"]})
    assert response.status_code == 409 and "answer must be -1, 0 or 1" in response.content.decode()
    intruder = client.__class__()
    start_worker(intruder, study.slug, "pid-b")
    response = intruder.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "left", "key": "k" * 10})
    assert response.status_code == 409 and "belongs to another annotator" in response.content.decode()
    assert not Judgement.objects.exists()
    anonymous = client.__class__()
    response = anonymous.get(f"/s/{study.slug}/annotate/")  # not a worker of the study: log in first
    assert response.status_code == 302 and response["Location"] == f"/accounts/login/?next=/s/{study.slug}/annotate/"
    assert anonymous.get(f"/s/{study.slug}/start/?PROLIFIC_PID=").status_code == 400


def test_logged_in_member_annotates_and_htmx_gets_the_partial(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    user = User.objects.create_user("ann", password="pw-ann-1234")
    study_membership_set(study=study, user=user, role="annotator")
    client.force_login(user)
    assignment, context = current_hit(client, study.slug)
    response = client.post(f"/s/{study.slug}/hits/{assignment.pk}/",
                           {"answer": "tie", "key": context["key"]}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and '<section id="hit"' in body and "<html" not in body
    assert Annotator.objects.get(user=user).judgements.count() == 1


def test_imported_judgements_seed_the_protocol():
    # The paper's rule decides from round 0 at level γ (the e-process's decisions at import:
    # tests/cockpit/test_imported_judgements_decide.py).
    study = study_import(source=BUNDLES / "pandalm.jsonl.gz", metric="gpt35", slug="pandalm",
                         study_settings={"allocation_policy": "paper", "protocol_rule": "bayes"})
    # The protocol starts at import: its state is there before any page is read.
    study.refresh_from_db()
    state = protocol_state.study_state_load(study, PairState.objects.filter(study=study))
    assert state.spent == 2997
    assert sum(p.decision != 0 for p in state.pairs) >= 3
    assert PairStateHistory.objects.filter(pair_state__study=study).count() == 10
    assert Study.objects.get(pk=study.pk).protocol_closes == 1
