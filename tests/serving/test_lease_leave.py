"""A worker who leaves the page gives the HIT's lease back at once; the page shown again keeps
it (issue 36, 10). Through the services, and over HTTP for the endpoints the page calls."""
import pytest
from django.test import Client

from annotation.errors import HitError
from annotation.models import Assignment, Judgement
from annotation.selectors.serving import study_serving_audit
from annotation.services import hits
from annotation.services.studies import study_import
from tests.builders.annotating import workers_of
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.crowd import start_worker
from tests.builders.throttling import assert_throttled, clear_throttle_counts, rates

pytestmark = pytest.mark.django_db(transaction=True)


def one_item_study(slug="leave"):
    """One item, three systems: three comparisons, one per pair, each pair's round asks for one."""
    return study_import(source=bundle_bytes(crowd_rows(items=1, batch=1, budget=3)), slug=slug)


def assert_consistent(study):
    audit = study_serving_audit(study=study)
    assert audit["problems"] == [] and audit["counters_consistent"] and audit["protocol_consistent"], audit


def state(hit) -> str:
    return Assignment.objects.get(pk=hit.pk).state


def test_a_page_left_gives_its_lease_back_at_once_and_it_is_no_skip():
    study = one_item_study()
    w = workers_of(["w", "o1", "o2", "o3"])
    mine = hits.hit_next_for_annotator(study=study, annotator=w["w"])
    others = [hits.hit_next_for_annotator(study=study, annotator=w[n]) for n in ("o1", "o2")]
    assert all(others) and hits.hit_next_for_annotator(study=study, annotator=w["o3"]) is None  # all held
    assert hits.hit_leave(assignment=mine, annotator=w["w"], lease=hits.lease_token(mine.expires_at))
    assert state(mine) == Assignment.State.EXPIRED  # not SKIPPED
    taken = hits.hit_next_for_annotator(study=study, annotator=w["o3"])
    assert taken.comparison_id == mine.comparison_id  # at once, not after the lease timeout
    assert_consistent(study)
    # no skip: once o3 leaves it too, the worker who left first is served it again
    assert hits.hit_leave(assignment=taken, annotator=w["o3"], lease=hits.lease_token(taken.expires_at))
    again = hits.hit_next_for_annotator(study=study, annotator=w["w"])
    assert again.comparison_id == mine.comparison_id and again.pk != mine.pk
    assert_consistent(study)


def test_leaving_is_idempotent_and_leaves_a_submitted_or_renewed_lease_alone():
    study = one_item_study()
    w = workers_of(["w", "x"])
    hit = hits.hit_next_for_annotator(study=study, annotator=w["w"])
    token = hits.lease_token(hit.expires_at)
    with pytest.raises(HitError):
        hits.hit_leave(assignment=hit, annotator=w["x"], lease=token)  # not theirs
    assert hits.hit_leave(assignment=hit, annotator=w["w"], lease="2000-01-01T00:00:00+00:00") is False
    assert state(hit) == Assignment.State.LEASED  # another page's token: nothing
    # The page is shown again (a reload): the lease is held anew; the release the page before
    # sends late, with the old token, does nothing.
    kept = hits.hit_keep(study=study, assignment=hit, annotator=w["w"])
    assert kept and kept != token
    assert hits.hit_leave(assignment=hit, annotator=w["w"], lease=token) is False
    assert state(hit) == Assignment.State.LEASED
    hits.judgement_submit(assignment=hit, annotator=w["w"], shown_value=1, idempotency_key="k1")
    assert hits.hit_leave(assignment=hit, annotator=w["w"], lease=kept) is False  # answered: nothing
    assert state(hit) == Assignment.State.SUBMITTED and Judgement.objects.count() == 1
    second = hits.hit_next_for_annotator(study=study, annotator=w["w"])
    token = hits.lease_token(second.expires_at)
    assert hits.hit_leave(assignment=second, annotator=w["w"], lease=token)
    assert hits.hit_leave(assignment=second, annotator=w["w"], lease=token) is False  # twice: once
    assert_consistent(study)


def test_a_reload_takes_back_the_lease_its_old_page_released_unless_someone_took_it():
    """A reload's old page sends its release after the new page was read: the new page keeps
    the HIT, taking its lease back, unless another worker was served the comparison meanwhile."""
    study = one_item_study()
    w = workers_of(["w", "o1", "o2", "o3"])
    hit = hits.hit_next_for_annotator(study=study, annotator=w["w"])
    hits.hit_next_for_annotator(study=study, annotator=w["o1"])
    hits.hit_next_for_annotator(study=study, annotator=w["o2"])
    assert hits.hit_leave(assignment=hit, annotator=w["w"], lease=hits.lease_token(hit.expires_at))
    kept = hits.hit_keep(study=study, assignment=hit, annotator=w["w"])
    assert kept and state(hit) == Assignment.State.LEASED
    assert hits.hit_next_for_annotator(study=study, annotator=w["o3"]) is None  # it is the worker's again
    assert_consistent(study)
    judgement = hits.judgement_submit(assignment=hit, annotator=w["w"], shown_value=1, idempotency_key="k1")
    assert judgement.assignment_id == hit.pk
    # Taken by another worker between the release and the page shown again: not taken back.
    study = one_item_study("leave-taken")
    w = workers_of(["w2", "p1", "p2", "p3"])
    mine = hits.hit_next_for_annotator(study=study, annotator=w["w2"])
    hits.hit_next_for_annotator(study=study, annotator=w["p1"])
    hits.hit_next_for_annotator(study=study, annotator=w["p2"])
    assert hits.hit_leave(assignment=mine, annotator=w["w2"], lease=hits.lease_token(mine.expires_at))
    taken = hits.hit_next_for_annotator(study=study, annotator=w["p3"])
    assert taken.comparison_id == mine.comparison_id
    assert hits.hit_keep(study=study, assignment=mine, annotator=w["w2"]) is None
    assert state(mine) == Assignment.State.EXPIRED and state(taken) == Assignment.State.LEASED
    assert_consistent(study)


def test_the_release_and_keep_endpoints_take_only_the_workers_own_hit_and_count_as_submits(settings):
    study = study_import(source=bundle_bytes(crowd_rows(items=6, batch=2, budget=6)), slug="leave-http")
    worker, stranger = Client(), Client()
    start_worker(worker, study.slug, "owner")
    start_worker(stranger, study.slug, "stranger")
    hit = worker.get(f"/s/{study.slug}/annotate/").context["assignment"]
    token = hits.lease_token(hit.expires_at)
    assert stranger.post(f"/s/{study.slug}/hits/{hit.pk}/release/", {"lease": token}).status_code == 404
    assert stranger.post(f"/s/{study.slug}/hits/{hit.pk}/keep/").status_code == 404
    assert state(hit) == Assignment.State.LEASED
    kept = worker.post(f"/s/{study.slug}/hits/{hit.pk}/keep/")
    assert kept.status_code == 200 and kept.json()["lease"] != token
    assert worker.post(f"/s/{study.slug}/hits/{hit.pk}/release/", {"lease": token}).status_code == 204
    assert state(hit) == Assignment.State.LEASED  # the old page's token
    released = worker.post(f"/s/{study.slug}/hits/{hit.pk}/release/", {"lease": kept.json()["lease"]})
    assert released.status_code == 204 and state(hit) == Assignment.State.EXPIRED
    assert worker.get(f"/s/{study.slug}/hits/{hit.pk}/release/").status_code == 405
    clear_throttle_counts()
    rates(settings, submit="2/minute")
    statuses = [worker.post(f"/s/{study.slug}/hits/{hit.pk}/keep/").status_code for _ in range(2)]
    assert statuses in ([200, 200], [200, 409], [409, 409])
    assert_throttled(worker.post(f"/s/{study.slug}/hits/{hit.pk}/release/", {"lease": "x"}))
