"""The futility level is a study setting (issue 38; protocol/study_settings.py ``futility``): the
app's protocol stops a hard pair where the study says, not at a constant.

Three one-pair studies with the same humans, a hard pair (A wins 3 of every 5 judgements in the
order they are served, too few items for an e-process at γ = 0.05 to decide it): at futility 0
the pair is never given up and takes every item; at the default 0.05 it is given up after some
judgements; at 0.5 (the most the setting allows) sooner. Before the setting every study stopped at 0.05 (and a bundle naming it was
refused). The setting round-trips through the bundle's export and import, the draft page and the
API's import and study representation.
"""
import re

import pytest

from annotation.forms import HUMAN_ONLY
from annotation.models import PairState, Study
from annotation.selectors.exports import study_export_rows
from annotation.serving import protocol_state
from annotation.services.studies import study_import
from tests.builders.annotating import answer_hits, workers_of
from tests.builders.bundles import bundle_bytes, one_pair_rows
from tests.builders.clients import api_for, api_upload, group_researcher_client

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS = 60
PATTERN = (1, 1, -1, 1, -1)  # A wins 3 of every 5 judgements, in the order they are served


def near_tie_study(slug: str, futility: float | None) -> Study:
    rows = one_pair_rows(items=ITEMS, batch=5, budget=ITEMS)
    if futility is not None:
        rows[0]["futility"] = futility
    return study_import(source=bundle_bytes(rows), slug=slug)


def run_to_the_end(study: Study) -> PairState:
    served = {"n": 0}

    def three_to_two(first, second, name):
        served["n"] += 1
        return PATTERN[(served["n"] - 1) % len(PATTERN)]

    answer_hits(study, workers_of([f"{study.slug}-w1", f"{study.slug}-w2"]), three_to_two)
    return PairState.objects.get(study=study)


def test_a_higher_futility_level_gives_a_hard_pair_up_sooner_and_0_never():
    ends = {}
    for slug, futility in (("fut-never", 0.0), ("fut-default", None), ("fut-eager", 0.5)):
        study = near_tie_study(slug, futility)
        pair = run_to_the_end(study)
        ends[slug] = (pair.status, pair.state["judgements"])
    assert Study.objects.get(slug="fut-default").futility == 0.05  # the default is today's constant
    assert ends["fut-never"] == ("exhausted", ITEMS), ends
    assert ends["fut-default"][0] == "futile" and ends["fut-eager"][0] == "futile", ends
    assert ends["fut-eager"][1] < ends["fut-default"][1] < ITEMS, ends


def test_the_futility_level_round_trips_through_the_bundle_the_draft_page_and_the_api():
    study = near_tie_study("fut-bundle", 0.15)
    assert study.futility == 0.15
    study_row = next(row for row in study_export_rows(study=study) if row.get("kind") == "study")
    assert study_row["futility"] == 0.15
    again = study_import(source=bundle_bytes([study_row, *one_pair_rows(items=ITEMS)[1:]]), slug="fut-again")
    assert again.futility == 0.15

    user, client = group_researcher_client("fut-rita")
    draft = study_import(source=bundle_bytes(one_pair_rows(items=ITEMS, batch=5, budget=ITEMS)), slug="fut-draft",
                         created_by=user, start=False)
    page = client.get("/s/fut-draft/settings/").content.decode()
    assert 'name="futility"' in page
    fields = {"action": "draft", "metric": HUMAN_ONLY, "gamma": "0.05", "batch_size": "5", "budget": str(ITEMS), "ratings_per_item": "1",
              "allocation_policy": "adaptive", "item_choice": "uniform", "protocol_rule": "eprocess",
              "family_control": "ebh", "pair_design": "all_pairs"}
    assert client.post("/s/fut-draft/settings/", {**fields, "futility": "0.6"}).status_code == 400
    response = client.post("/s/fut-draft/settings/", {**fields, "futility": "0.25"})
    assert response.status_code == 302, re.findall(r"errorlist.*", response.content.decode())
    draft.refresh_from_db()
    assert draft.futility == 0.25
    assert client.post("/s/fut-draft/settings/", {"action": "launch"}).status_code == 302
    draft.refresh_from_db()
    assert draft.protocol_started and protocol_state.protocol_settings(draft).futility == 0.25
    assert "Futility level" in client.get("/s/fut-draft/settings/").content.decode()

    api, _ = api_for("fut-api-user", researcher=True)
    response = api_upload(api, one_pair_rows(items=ITEMS, batch=5, budget=ITEMS), slug="fut-api", futility="0.2")
    assert response.status_code == 201, response.content
    assert response.json()["futility"] == 0.2 and Study.objects.get(slug="fut-api").futility == 0.2
    assert api.get("/api/studies/fut-api/").json()["futility"] == 0.2
