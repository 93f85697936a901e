"""Answer scales declared once (protocol/scales.py, issue 40): a criterion's scale reaches the
bundle reader, the HIT page and its keys (data attributes annotate.js reads), the submit and the
export from its one declaration. A 7-point scale is one ``register_scale`` here."""
from __future__ import annotations

import gzip
import json
import re

import pytest
from django.test import Client

from annotation.models import Judgement
from annotation.selectors.exports import study_export
from annotation.services.studies import study_import
from protocol.bundle import BundleError
from protocol.scales import PLAIN, STRENGTH, AnswerScale, register_scale, unregister_scale
from tests.builders.bundles import bundle_bytes
from tests.builders.crowd import current_hit, start_worker

pytestmark = pytest.mark.django_db(transaction=True)

SEVEN = AnswerScale("seven", ((3, "A is much better"), (2, "A is better"), (1, "A is slightly better"),
                              (0, "About the same"), (-1, "B is slightly better"), (-2, "B is better"),
                              (-3, "B is much better")), words={3: "much", 2: "clearly", 1: "slightly"})


@pytest.fixture(params=["plain", "strength", "seven"])
def scale(request):
    """Each built-in scale, and a 7-point one registered for the test."""
    if request.param == "seven":
        register_scale(SEVEN)
        yield SEVEN
        unregister_scale(SEVEN.name)
    else:
        yield {"plain": PLAIN, "strength": STRENGTH}[request.param]


def scale_rows(scale: AnswerScale, *, strength: int | None = None) -> list[dict]:
    """A two-criterion rubric study of systems A and B whose first criterion takes ``scale``;
    one imported answer of annotator e1 on it, of ``strength`` (its strongest by default)."""
    top = max(scale.strengths, default=0) if strength is None else strength
    rows = [{"kind": "study", "name": "Scales", "batch_size": 5, "budget": 40,
             "criteria": [{"name": "quality", "label": "Which is better?", "scale": scale.name},
                          {"name": "style", "label": "Which reads better?"}]}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"Question {n}"} for n in range(6)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": f"{s} answers {n}"} for n in range(6) for s in "AB"]
    rows += [{"kind": "human_preference", "item": "i0", "first": "A", "second": "B", "preference": 1,
              "annotator": "e1", "criterion": "quality", **({"strength": top} if top else {})},
             {"kind": "human_preference", "item": "i0", "first": "A", "second": "B", "preference": 0,
              "annotator": "e1", "criterion": "style"}]
    return rows


def test_a_scale_goes_from_the_bundle_to_the_page_the_submit_and_the_export(scale, tmp_path):
    study = study_import(source=bundle_bytes(scale_rows(scale)))
    client = Client()
    start_worker(client, study.slug, "w1")
    hit, _ = current_hit(client, study.slug)
    page = client.get(f"/s/{study.slug}/annotate/")
    body = page.content.decode()
    assert page.context["assignment"] == hit
    # the page: each answer with its key, the keys for annotate.js in a data attribute
    shown = re.findall(r'name="criterion-quality" value="(-?\d)" data-key="(\d)"', body)
    assert shown == [(str(value), str(key)) for key, value in enumerate(scale.values, 1)]
    assert f'data-keys="{"".join(str(k) for k in range(1, len(scale.values) + 1))}"' in body
    for _, text in scale.points:
        assert text in body

    strongest_b = scale.values[-1]  # B's strongest answer, the last key
    response = client.post(f"/s/{study.slug}/hits/{hit.pk}/", {
        "key": page.context["key"], "answer": "rubric", "criterion-quality": str(strongest_b),
        "criterion-style": "0"})
    assert response.status_code == 302  # saved: on to the next HIT
    judgement = Judgement.objects.get(assignment=hit)
    sign = 1 if hit.shown_swapped else -1  # B is the right text, the first system when swapped
    assert judgement.answers["quality"] == {"value": sign, **({"strength": -strongest_b} if scale.graded else {})}

    path = tmp_path / "scales.jsonl.gz"
    study_export(study=study, path=path)
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    assert rows[0]["criteria"][0]["scale"] == scale.name
    answered = [r for r in rows if r["kind"] == "human_preference" and r["criterion"] == "quality"]
    assert sorted(r.get("strength", 0) for r in answered) == sorted([max(scale.strengths, default=0)] * 2)
    again = study_import(source=path, slug="scales-again")
    assert sorted(json.dumps(j.answers, sort_keys=True) for j in Judgement.objects.filter(comparison__study=again)) \
        == sorted(json.dumps(j.answers, sort_keys=True) for j in Judgement.objects.filter(comparison__study=study))


def test_a_strength_beyond_the_criterions_scale_is_refused(scale):
    beyond = max(scale.strengths, default=0) + 1
    expected = "has no strength scale" if not scale.graded else f"takes a strength of 1 to {beyond - 1}, got {beyond}"
    with pytest.raises(BundleError, match=expected):
        study_import(source=bundle_bytes(scale_rows(scale, strength=beyond)))


def test_a_scale_must_be_registered_and_well_formed():
    with pytest.raises(BundleError, match="'scale' must be one of \"plain\", \"strength\""):
        study_import(source=bundle_bytes(scale_rows(SEVEN)))
    with pytest.raises(ValueError, match="symmetric about 0"):
        AnswerScale("lopsided", ((2, "A"), (0, "="), (-1, "B")), words={1: "a bit", 2: "a lot"})
