"""A uniform lease draws each free item of the pair with the same chance (services/hits.py).

The draw looks at 32 of the study's items taken at random before all of them; the decision
rule's validity under uniform choice rests on every free item being equally likely."""
import collections

import pytest
from scipy.stats import chisquare

from annotation.models import Annotator, Item
from annotation.services import hits
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, one_pair_rows

pytestmark = pytest.mark.django_db


def test_every_free_item_is_drawn_equally_often_when_few_are_free():
    study = study_import(source=bundle_bytes(one_pair_rows(items=100, batch=8, budget=8)))
    # 10 free items of 100, spread out; the sample of 32 misses them all about once in 50 draws.
    free = [f"i{n:02d}" for n in range(5, 100, 10)]
    Item.objects.filter(study=study).exclude(external_id__in=free).update(withdrawn=True)
    annotator = Annotator.objects.create(platform=Annotator.Platform.PROLIFIC, external_id="uniform")
    drawn = collections.Counter()
    for _ in range(1000):
        hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
        drawn[hit.comparison.item.external_id] += 1
        assert hits.hit_release(assignment=hit)
    assert set(drawn) == set(free)
    # 1,000 draws over 10 items: a fair draw fails this once in 10,000 studies.
    assert chisquare([drawn[item] for item in free]).pvalue > 1e-4, drawn
