"""The style-controlled leaderboard (issue 39, part 2) of a stored study: from the counted
judgements and the texts shown, on the dashboard, in the API and in its CSV export."""
import csv
import io

import numpy as np
import pytest

from annotation.models import Judgement
from annotation.selectors.dashboard import study_dashboard_data
from annotation.selectors.style import study_style_leaderboard, study_style_votes
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from protocol.style_control import STYLE_FEATURES, fit_style_leaderboard, style_counts
from tests.builders.annotating import answer_hits, workers_of
from tests.builders.bundles import bundle_bytes
from tests.builders.clients import api_for, researcher_client
from tests.builders.style import STYLE_WORDS_EFFECT, style_rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_votes_carry_the_shown_texts_style_and_the_side_shown():
    study = study_import(source=bundle_bytes(style_rows(items=20, judgements=1, judged_items=10)))
    made = answer_hits(study, workers_of(["w1", "w2"]), lambda a, b, _: 1, stop_after=12)
    votes = study_style_votes(study=study)
    assert len(votes["outcome"]) == 30 + made
    judgements = list(Judgement.objects.filter(comparison__study=study).order_by("id").select_related(
        "comparison__item", "comparison__first", "comparison__second", "assignment"))
    for k, j in enumerate(judgements):
        c = j.comparison
        first = c.item.outputs.get(system=c.first).text
        second = c.item.outputs.get(system=c.second).text
        expected = np.subtract(style_counts(first), style_counts(second))
        np.testing.assert_array_equal(votes["features"][k, :4], expected)
        side = 0.0 if j.assignment is None else (-1.0 if j.assignment.shown_swapped else 1.0)
        assert votes["features"][k, 4] == side
        assert votes["outcome"][k] == (j.value + 1) / 2
        assert (votes["first"][k], votes["second"][k]) == (c.first.name, c.second.name)
    assert {v for v in votes["features"][:, 4]} >= {-1.0, 1.0, 0.0}  # live both ways, imported unknown


def test_longer_answers_win_and_the_style_controlled_order_credits_quality():
    """C writes the longest answers and A the shortest (tests/builders/style.style_rows): the plain
    leaderboard puts the long writer C above A; once length is a covariate A is first again,
    and the word effect (true +1.0 log-odds per 100 words) is found and said in words."""
    study = study_import(source=bundle_bytes(style_rows()))
    data = study_dashboard_data(study=study)
    plain = [r["system"] for r in data["leaderboard"]]
    board = data["style_leaderboard"]
    assert board["available"] and board["votes"] == 80 * 3 * 6 and board["prompts"] == 80
    assert plain[0] == "C"
    assert [r["system"] for r in board["rows"]] == ["A", "B", "C"]
    assert [r["plain_position"] for r in board["rows"]] == [plain.index(s) + 1 for s in "ABC"]
    words = next(e for e in board["effects"] if e["feature"] == "words")
    assert words["low"] < STYLE_WORDS_EFFECT < words["high"] and words["clear"]
    assert words["sentence"].startswith("Longer answers win more often: 100 more words changes the chance of winning")
    assert f"to {100 * words['chance']:.0f} %" in words["sentence"]
    position = next(e for e in board["effects"] if e["feature"] == "position")
    assert not position["measured"] and "cannot be measured" in position["sentence"]  # imported: no side known
    # One source: the selector's numbers are the protocol's fit of the stored votes.
    votes = study_style_votes(study=study)
    systems = sorted(set(votes["first"]) | set(votes["second"]))
    fit = fit_style_leaderboard(systems, [systems.index(s) for s in votes["first"]],
                                [systems.index(s) for s in votes["second"]], votes["outcome"], votes["features"],
                                STYLE_FEATURES, reg=1 / len(votes["outcome"]), clusters=votes["items"],
                                center=False)
    for row in board["rows"]:
        assert row["rating"] == pytest.approx(fit.rating[systems.index(row["system"])], abs=1e-9)


def test_before_any_judgement_it_says_why_there_is_no_fit():
    rows = [r for r in style_rows(items=5) if r["kind"] != "human_preference"]
    study = study_import(source=bundle_bytes(rows))
    board = study_style_leaderboard(study=study)
    assert board == {"votes": 0, "level": 0.95, "features": list(STYLE_FEATURES), "available": False,
                     "reason": "no human judgements yet"}


def test_dashboard_api_and_csv_show_the_same_numbers(client):
    study = study_import(source=bundle_bytes(style_rows()))
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    api, user = api_for("style-api", researcher=True)
    study_membership_set(study=study, user=user, role="researcher")
    body = api.get(f"/api/studies/{study.slug}/leaderboard/style/").json()
    assert body["available"] and [r["system"] for r in body["rows"]] == ["A", "B", "C"]
    top = body["rows"][0]
    assert f"{top['rating']:.0f}" in page and f"{top['low']:.0f} to {top['high']:.0f}" in page
    words = next(e for e in body["effects"] if e["feature"] == "words")
    assert words["sentence"].replace("'", "&#x27;") in page
    exported = list(csv.DictReader(io.StringIO(client.get(f"/s/{study.slug}/export/style-leaderboard.csv")
                                               .content.decode())))
    systems = [r for r in exported if r["kind"] == "system"]
    assert [r["name"] for r in systems] == ["A", "B", "C"]
    assert float(systems[0]["estimate"]) == pytest.approx(top["rating"], abs=0.01)
    assert float(systems[0]["low"]) == pytest.approx(top["low"], abs=0.01)
    covariates = {r["name"]: r for r in exported if r["kind"] == "covariate"}
    assert list(covariates) == list(STYLE_FEATURES)
    assert float(covariates["words"]["estimate"]) == pytest.approx(words["log_odds"], abs=1e-6)
    assert covariates["words"]["meaning"] == words["sentence"]
