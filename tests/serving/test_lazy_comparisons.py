"""A pair's comparison of an item is stored when it is first used, not at import (issue 22:
one row per item and pair was 2.45 M rows at 50 systems x 2,000 prompts)."""
import pytest

from annotation.models import Comparison, Judgement
from annotation.selectors.serving import study_serving_audit
from annotation.selectors.studies import study_pair_capacities
from annotation.services import hits
from annotation.services.studies import study_import
from tests.builders.annotating import worker
from tests.builders.bundles import bundle_bytes, crowd_rows, one_pair_rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_import_stores_no_comparison_yet_counts_every_item_of_every_pair():
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=0)))
    assert not Comparison.objects.filter(study=study).exists()
    assert study_pair_capacities(study=study) == {("A", "B"): 40, ("A", "C"): 40, ("B", "C"): 40}
    assert study.budget == 120  # the default budget: every item of every pair once


def test_an_items_first_lease_stores_its_comparison_and_later_leases_reuse_it():
    rows = one_pair_rows(items=1, batch=2, budget=2)
    rows[0]["ratings_per_item"] = 2
    study = study_import(source=bundle_bytes(rows))
    first, second = worker("w1"), worker("w2")
    lease = hits.hit_next_for_annotator(study=study, annotator=first)
    stored = Comparison.objects.get(study=study)
    assert lease.comparison_id == stored.pk and stored.lease_expires_at is not None
    hits.judgement_submit(assignment=lease, annotator=first, shown_value=1, idempotency_key="k1")
    assert hits.hit_next_for_annotator(study=study, annotator=first) is None  # judged it already
    again = hits.hit_next_for_annotator(study=study, annotator=second)
    assert again.comparison_id == stored.pk and Comparison.objects.filter(study=study).count() == 1
    hits.judgement_submit(assignment=again, annotator=second, shown_value=-1, idempotency_key="k2")
    assert Comparison.objects.get(pk=stored.pk).judgement_count == 2 == Judgement.objects.count()
    audit = study_serving_audit(study=study)
    assert audit["duplicates"] == 0 and audit["counters_consistent"] and audit["protocol_consistent"]


def test_every_item_of_a_pair_is_served_once_with_no_comparison_stored_beforehand():
    study = study_import(source=bundle_bytes(one_pair_rows(items=6, batch=6, budget=6)))
    seen = []
    for n in range(8):
        lease = hits.hit_next_for_annotator(study=study, annotator=worker(f"w{n}"))
        if lease is None:
            break
        seen.append(lease.comparison.item.external_id)
        hits.judgement_submit(assignment=lease, annotator=lease.annotator, shown_value=1, idempotency_key=f"k{n}")
    assert sorted(seen) == [f"i{n:02d}" for n in range(6)]
    assert Comparison.objects.filter(study=study).count() == 6


def test_a_lease_looks_beyond_the_first_open_pairs_when_none_of_them_serves_the_worker():
    """A lease tries the open pairs closest to full first (hits.OPEN_PAIRS_TRIED_FIRST of
    them), then all: here the one pair left for the worker is the farthest from full."""
    systems = [f"S{n}" for n in range(8)]  # 28 pairs, one item each
    rows = [{"kind": "study", "name": "Many pairs", "batch_size": 2, "budget": 56, "ratings_per_item": 2},
            {"kind": "item", "id": "i0", "input": "Input"}]
    rows += [{"kind": "output", "item": "i0", "system": s, "text": f"{s} answer"} for s in systems]
    study = study_import(source=bundle_bytes(rows))
    who = worker("w")
    pairs = set()
    for n in range(28):
        lease = hits.hit_next_for_annotator(study=study, annotator=who)
        assert lease is not None, f"lease {n + 1} of 28 found no pair"
        pairs.add(lease.comparison.pair_id)
        hits.judgement_submit(assignment=lease, annotator=who, shown_value=1, idempotency_key=f"k{n}")
    assert len(pairs) == 28 > hits.OPEN_PAIRS_TRIED_FIRST
    assert hits.hit_next_for_annotator(study=study, annotator=who) is None
