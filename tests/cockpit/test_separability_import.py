"""Separability is computed at import when outputs have several samples (inline or as a task)."""
import numpy as np
import pytest

from annotation.models import Comparison, PairState, Study
from annotation.services.studies import study_import
from protocol.bundle import read_bundle
from protocol.separability import bundle_separability
from tests.builders.bundles import BUNDLES, bundle_bytes

pytestmark = pytest.mark.django_db


def test_inline_separability_matches_the_library_on_real_data():
    path = BUNDLES / "separability_prefs.jsonl.gz"
    seen = []
    study = study_import(source=path, separability="inline", progress=lambda s, d, t: seen.append((s, d, t)))
    assert study.separability_status == "done"
    assert study.separability_done == study.separability_total > 0
    assert any(stage == "separability" for stage, _, _ in seen)
    expected = bundle_separability(read_bundle(path), "rouge1")
    stored = {(c.item.external_id, c.first.name, c.second.name): c.separability
              for c in Comparison.objects.filter(study=study).select_related("item", "first", "second")}
    assert len(stored) == len(expected.comparisons)
    got = np.array([stored[key] for key in expected.comparisons])
    np.testing.assert_allclose(got, expected.separability, atol=1e-12)
    # Only the compared pairs get a protocol state.
    assert PairState.objects.filter(study=study).count() == len({(f, s) for _, f, s in expected.comparisons})


def test_background_task_runs_on_commit(toy_rows, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        study = study_import(source=bundle_bytes(toy_rows), separability="background")
    assert len(callbacks) == 1
    study.refresh_from_db()
    assert study.separability_status == "done"
    values = list(study.comparisons.values_list("separability", flat=True))
    assert len(values) == 6 and all(v is not None and -1 <= v <= 1 for v in values)


def test_single_sample_studies_have_no_separability(toy_rows):
    rows = [r for r in toy_rows if r.get("sample", 0) == 0]
    study = study_import(source=bundle_bytes(rows), separability="inline")
    assert study.separability_status == "none"
    assert not study.comparisons.exclude(separability=None).exists()
    with pytest.raises(ValueError, match="separability must be"):
        study_import(source=bundle_bytes(rows), slug="x", separability="later")
    assert Study.objects.count() == 1


def test_the_bundle_chooses_the_similarity_separability_is_scored_with(toy_rows):
    """``separability_similarity`` (a study setting read at import, issue 40): the study line
    chooses one of protocol.similarity's, the scores are that similarity's, the export writes it
    back, and a similarity the library does not know is refused by name."""
    from annotation.selectors.exports import study_export_rows
    from protocol.bundle import BundleError

    rows = [{**toy_rows[0], "separability_similarity": "token_jaccard"}, *toy_rows[1:]]
    study = study_import(source=bundle_bytes(rows), separability="inline")
    assert (study.separability_similarity, study.separability_status) == ("token_jaccard", "done")
    expected = bundle_separability(read_bundle(bundle_bytes(rows)), "token_jaccard")
    stored = {(c.item.external_id, c.first.name, c.second.name): c.separability
              for c in Comparison.objects.filter(study=study).select_related("item", "first", "second")}
    np.testing.assert_allclose([stored[key] for key in expected.comparisons], expected.separability, atol=1e-12)
    assert next(study_export_rows(study=study))["separability_similarity"] == "token_jaccard"
    with pytest.raises(BundleError, match="study setting 'separability_similarity' must be one of \"rouge1\""):
        study_import(source=bundle_bytes([{**toy_rows[0], "separability_similarity": "spacy"}, *toy_rows[1:]]),
                     slug="unknown-similarity")
