"""Issue 22: reads that grow with what is asked for, not with items x pairs."""
import random

import numpy as np
import pytest

from annotation.selectors.studies import study_metric_labels
from annotation.services import study_import
from tests.factories import bundle_bytes

pytestmark = pytest.mark.django_db

SYSTEMS = ("s1", "s2", "s10", "s3")


def _rows(items=30, missing=("i03", "s2")):
    rng = random.Random(3)
    rows = [{"kind": "study", "name": "Scale labels", "batch_size": 5, "budget": 40, "metric": "m"}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} {n}"}
             for n in range(items) for s in SYSTEMS]
    # Scores on a coarse grid so that ties (within the margin) occur.
    rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": "m",
              "score": rng.choice([0.0, 0.25, 0.5, 0.75])}
             for n in range(items) for s in SYSTEMS if (f"i{n:02d}", s) != missing]
    return rows


def _reference(rows) -> dict:
    """sign(first - second) per item from the bundle's own rows, for items both systems scored."""
    score = {(r["item"], r["system"]): r["score"] for r in rows if r["kind"] == "metric_score"}
    items = [r["id"] for r in rows if r["kind"] == "item"]
    out = {}
    for a in SYSTEMS:
        for b in SYSTEMS:
            if a < b:
                out[(a, b)] = {i: int(np.sign(score[(i, a)] - score[(i, b)])) for i in items
                               if (i, a) in score and (i, b) in score}
    return out


def test_metric_labels_are_the_signs_of_the_score_differences_and_one_pair_reads_alone():
    rows = _rows()
    study = study_import(source=bundle_bytes(rows))
    labels = study_metric_labels(study=study)
    assert labels == _reference(rows)
    assert "i03" not in labels[("s1", "s2")] and "i03" in labels[("s1", "s3")]
    assert any(v == 0 for pair in labels.values() for v in pair.values())  # ties are labelled 0
    for pair in labels:
        assert study_metric_labels(study=study, pair=pair) == {pair: labels[pair]}
    assert study_metric_labels(study=study, pair=("s2", "s1")) == {}  # not canonical: no such pair
