"""Regression tests for the two serving bugs of issue 14 (both failed on the old serving code)."""
from collections import Counter
import numpy as np
import pytest

from annotation.models import Assignment, Comparison, Judgement, PairState, Study
from annotation.services import hits
from annotation.services.studies import study_import
from tests.builders.annotating import worker
from tests.builders.bundles import bundle_bytes, one_pair_rows
from tests.builders.crowd import expire
from tests.builders.studies import comparisons_stored

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lease_that_can_no_longer_be_submitted_is_never_served_again():
    study = study_import(source=bundle_bytes(one_pair_rows()))
    late, current = worker("late"), worker("current")
    stale = hits.hit_next_for_annotator(study=study, annotator=late)
    expire(stale)
    lease = hits.hit_next_for_annotator(study=study, annotator=current)
    assert lease is not None and lease.pk != stale.pk
    # The late worker answers after their lease expired; whatever the server decides about it,
    # the current worker's lease must either be accepted or be dead for good.
    for who, hit in ((late, stale), (current, lease)):
        try:
            hits.judgement_submit(assignment=hit, annotator=who, shown_value=1,
                                  idempotency_key=hits.new_idempotency_key())
        except hits.HitError:
            pass
    for _ in range(3):
        again = hits.hit_next_for_annotator(study=study, annotator=current)
        assert again is None or again.pk != lease.pk, "a HIT whose submit failed was served again"


def test_stratified_choice_spreads_one_item_per_hit_over_the_strata():
    """Drawn one per HIT, each separability stratum gets its share (4 bins: 1/4 each)."""
    study = study_import(source=bundle_bytes(one_pair_rows(items=40, batch=10, budget=400)))
    Study.objects.filter(pk=study.pk).update(item_choice=Study.ItemChoice.STRATIFIED)
    study.refresh_from_db()
    comparisons = comparisons_stored(study)
    for n, c in enumerate(comparisons):  # δ spread evenly over [0, 1): 10 items per bin
        c.separability = n / len(comparisons)
    Comparison.objects.bulk_update(comparisons, ["separability"])
    stratum = {c.pk: min(int(4 * c.separability), 3) for c in comparisons}
    draws = 400
    seen = Counter()
    for n in range(draws):
        hit = hits.hit_next_for_annotator(study=study, annotator=worker(f"w{n}"))
        seen[stratum[hit.comparison_id]] += 1
        hits.hit_release(assignment=hit)  # back to the pool: every draw sees all 40 items
    shares = np.array([seen[s] for s in range(4)]) / draws
    # Binomial sd of a share 1/4 over 400 draws is 0.0217; 4.5 sd is a false alarm 1 in 10^5.
    assert np.all(np.abs(shares - 0.25) < 4.5 * np.sqrt(0.25 * 0.75 / draws)), shares


def test_a_key_used_for_another_hit_is_refused_and_leaves_nothing_behind():
    study = study_import(source=bundle_bytes(one_pair_rows(budget=3, batch=3)))
    annotator = worker("reuser")
    first = hits.hit_next_for_annotator(study=study, annotator=annotator)
    hits.judgement_submit(assignment=first, annotator=annotator, shown_value=1, idempotency_key="k-reused")
    second = hits.hit_next_for_annotator(study=study, annotator=annotator)
    with pytest.raises(hits.HitError, match="already used for another HIT"):
        hits.judgement_submit(assignment=second, annotator=annotator, shown_value=1, idempotency_key="k-reused")
    # The whole submit was rolled back: the lease is still live and counted, nothing recorded.
    second.refresh_from_db()
    assert second.state == Assignment.State.LEASED
    assert Comparison.objects.get(pk=second.comparison_id).judgement_count == 0
    assert Comparison.objects.get(pk=second.comparison_id).lease_expires_at is not None
    pair = PairState.objects.get(pk=second.comparison.pair_id)
    assert pair.leased == 1 and pair.state["judgements"] == 1
    # The lease can still be answered with its own key.
    hits.judgement_submit(assignment=second, annotator=annotator, shown_value=-1, idempotency_key="k-own")
    assert Judgement.objects.filter(assignment=second).count() == 1


def test_a_reclaimed_lease_answered_late_counts_while_its_round_still_needs_it():
    study = study_import(source=bundle_bytes(one_pair_rows(items=2, budget=1, batch=1)))
    late = worker("late")
    stale = hits.hit_next_for_annotator(study=study, annotator=late)
    expire(stale)
    assert hits.leases_reclaim(study=study) == 1
    judgement = hits.judgement_submit(assignment=stale, annotator=late, shown_value=1,
                                      idempotency_key=hits.new_idempotency_key())
    assert judgement.assignment_id == stale.pk
    assert Assignment.objects.get(pk=stale.pk).state == Assignment.State.SUBMITTED
    assert Comparison.objects.get(pk=stale.comparison_id).judgement_count == 1
    pair = PairState.objects.get(pk=stale.comparison.pair_id)
    assert pair.leased == 0 and pair.state["judgements"] == 1


def test_a_reclaimed_lease_whose_comparison_was_leased_again_is_refused_and_changes_nothing():
    study = study_import(source=bundle_bytes(one_pair_rows(items=1, budget=1, batch=1)))
    late, current = worker("late"), worker("current")
    stale = hits.hit_next_for_annotator(study=study, annotator=late)
    expire(stale)
    assert hits.leases_reclaim(study=study) == 1
    lease = hits.hit_next_for_annotator(study=study, annotator=current)
    assert lease is not None and lease.comparison_id == stale.comparison_id
    with pytest.raises(hits.HitError, match="expired"):
        hits.judgement_submit(assignment=stale, annotator=late, shown_value=1,
                              idempotency_key=hits.new_idempotency_key())
    assert not Judgement.objects.filter(assignment=stale).exists()
    assert Assignment.objects.get(pk=stale.pk).state == Assignment.State.EXPIRED
    assert Assignment.objects.get(pk=lease.pk).state == Assignment.State.LEASED
    assert Comparison.objects.get(pk=lease.comparison_id).judgement_count == 0
    pair = PairState.objects.get(pk=lease.comparison.pair_id)
    assert pair.leased == 1 and pair.state["judgements"] == 0
    hits.judgement_submit(assignment=lease, annotator=current, shown_value=1,
                          idempotency_key=hits.new_idempotency_key())
    assert PairState.objects.get(pk=pair.pk).state["judgements"] == 1
