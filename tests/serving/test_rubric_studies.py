"""Rubric studies: several criteria in one HIT, each decided by its own protocol lane."""
import gzip
import json
import random

import pytest

from annotation.errors import HitError
from annotation.models import Judgement, PairState
from annotation.selectors.exports import study_export
from annotation.selectors.serving import study_serving_audit
from annotation.services import hits
from annotation.services.studies import study_import
from annotation.serving import protocol_state
from protocol.bundle import BundleError
from tests.builders.annotating import answer_rubric_hits, worker
from tests.builders.bundles import RUBRIC, bundle_bytes, rubric_rows

pytestmark = pytest.mark.django_db(transaction=True)

# what the crowd says, canonical order (+1 = first better): helpfulness A > B > C strongly;
# correctness the other way round; style a coin
TRUTH = {"helpfulness": {"A": 3, "B": 2, "C": 1}, "correctness": {"A": 1, "B": 2, "C": 3}}


def _answers_on_screen(assignment, rng):
    """Each criterion's answer as the worker sees the texts (left = second system when swapped)."""
    comparison = assignment.comparison
    left, right = comparison.first.name, comparison.second.name
    if assignment.shown_swapped:
        left, right = right, left
    shown = {}
    for name, quality in TRUTH.items():
        better = 1 if quality[left] > quality[right] else -1
        shown[name] = {"value": better * (2 if name == "helpfulness" else 1) if rng.random() < 0.9 else -better,
                       "reason": f"{name} reason"}
    shown["style"] = {"value": rng.choice([-1, 0, 1])}
    return shown


def _lanes(study):
    rows = list(PairState.objects.filter(study=study))
    return protocol_state.study_rubric_load(study, rows)


def test_import_groups_one_judgement_per_annotator_with_every_criterion():
    study = study_import(source=bundle_bytes(rubric_rows(imported=3)))
    assert [c["name"] for c in study.criteria] == ["helpfulness", "correctness", "style"]
    judgements = list(Judgement.objects.filter(comparison__study=study).order_by("id"))
    assert len(judgements) == 3
    # the bundle said B vs A; canonical order is (A, B): signs flip, strength and reasons stay
    assert judgements[0].answers == {"helpfulness": {"value": 1, "strength": 2, "reason": "A is complete"},
                                     "correctness": {"value": -1, "reason": "A has a bug"},
                                     "style": {"value": 0}}
    assert judgements[0].value == 1  # the first criterion's
    state = _lanes(study)
    ab = state.keys.index(("A", "B"))
    assert state.hits[ab] == 3
    assert [lane.pairs[ab].judgements for lane in state.lanes] == [3, 3, 3]
    assert study.protocol_imported_judgements == 3
    # each criterion its own metric: helpfulness has the judge's labels, the others none
    assert len(state.lane("helpfulness").pairs[ab].metric) == 40
    assert len(state.lane("style").pairs[ab].metric) == 0


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows[-1].pop("criterion"), "must name one of the study's criteria"),
    (lambda rows: rows.pop(), "answers no criterion style"),
    (lambda rows: rows[-2].update(strength=2), "criterion 'correctness' has no strength scale"),
    (lambda rows: rows[0].update(criteria=[{"name": "Bad name"}]), "'name' must be lower-case"),
    (lambda rows: rows[0].update(criteria=[{"name": "x", "reason": "maybe"}]), "'reason' must be one of"),
    (lambda rows: rows[0]["criteria"][0].update(metric="nope"), "names metric 'nope'"),
])
def test_bad_rubric_bundles_are_refused_naming_the_problem(change, message):
    rows = rubric_rows(imported=1)
    change(rows)
    with pytest.raises(BundleError, match=message):
        study_import(source=bundle_bytes(rows))
    assert not PairState.objects.exists()


def test_each_criterion_is_decided_by_its_own_protocol_and_a_hit_counts_once():
    study = study_import(source=bundle_bytes(rubric_rows(imported=0, budget=150)))
    rng = random.Random(3)
    submitted = answer_rubric_hits(study, [worker(f"w{n}") for n in range(6)], 400,
                                   lambda assignment: _answers_on_screen(assignment, rng), key="k", read_seconds=4.5)
    state = _lanes(study)
    assert state.lane("helpfulness").decisions()[("A", "C")] == 1
    assert state.lane("correctness").decisions()[("A", "C")] == -1
    # the criteria disagree, so they stop at different times: a lane that stopped took none
    # of the HITs its pair was served afterwards
    hits_of_pair = dict(zip(state.keys, state.hits))
    assert any(lane.pair(*key).judgements < hits_of_pair[key] for lane in state.lanes for key in state.keys)
    assert sum(state.hits) == submitted == Judgement.objects.filter(comparison__study=study).count()
    assert submitted <= study.budget
    audit = study_serving_audit(study=study)
    assert audit["protocol_consistent"], audit["problems"]
    stored = Judgement.objects.filter(comparison__study=study).first()
    assert stored.read_seconds == 4.5 and set(stored.answers) == {"helpfulness", "correctness", "style"}


def test_a_required_reason_explains_a_preference_and_about_the_same_needs_none():
    """Issue 36, 3: a criterion whose reason is "required" refused "About the same" without a
    reason. A reason explains why one output is better: it is required with a preference (any
    strength) and optional with a tie; a tie's reason, when given, is kept."""
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)))
    annotator = worker("w1")
    base = {"helpfulness": {"value": 1}, "style": {"value": 0}}
    assignment = hits.hit_next_for_annotator(study=study, annotator=annotator)
    judgement = hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0,
                                      idempotency_key="tie", answers={**base, "correctness": {"value": 0}})
    assert judgement.answers["correctness"] == {"value": 0}
    for value in (1, -1):
        assignment = hits.hit_next_for_annotator(study=study, annotator=annotator)
        with pytest.raises(HitError, match="'Which answer is more correct\\?': give a short reason "
                                           "\\(required when one answer is better\\)"):
            hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0,
                                  idempotency_key=f"pref{value}", answers={**base, "correctness": {"value": value}})
    judgement = hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0,
                                      idempotency_key="tie-why",
                                      answers={**base, "correctness": {"value": 0, "reason": "both fail"}})
    assert judgement.answers["correctness"] == {"value": 0, "reason": "both fail"}


def test_a_refused_rubric_form_comes_back_with_the_answers_given():
    """Without JavaScript the server is the one to say a required reason is missing (issue 36,
    3): the same HIT comes back with the error and with the answers and reasons given, so the
    worker adds the reason instead of answering everything again."""
    import re

    from django.test import Client

    from tests.builders.crowd import start_worker

    study = study_import(source=bundle_bytes(rubric_rows(imported=0)))
    client = Client()
    start_worker(client, study.slug, "nojs")
    page = client.get(f"/s/{study.slug}/annotate/")
    hit = page.context["assignment"]
    response = client.post(f"/s/{study.slug}/hits/{hit.pk}/", {
        "key": page.context["key"], "answer": "rubric", "criterion-helpfulness": "-2", "reason-helpfulness": "B <b>fuller</b>",
        "criterion-correctness": "1", "reason-correctness": "", "criterion-style": "0"})
    body = response.content.decode()
    assert response.status_code == 409 and "give a short reason (required when one answer is better)" in body
    assert response.context["assignment"].pk == hit.pk and not Judgement.objects.exists()
    chosen = dict(re.findall(r'name="criterion-(\w+)" value="(-?\d)"[^>]* checked', body))
    assert chosen == {"helpfulness": "-2", "correctness": "1", "style": "0"}
    assert 'name="reason-helpfulness" maxlength="1000" autocomplete="off" data-reason="optional" ' \
           'value="B &lt;b&gt;fuller&lt;/b&gt;"' in body


def test_a_rubric_submit_names_the_missing_criterion_and_the_required_reason():
    study = study_import(source=bundle_bytes(rubric_rows(imported=0)))
    annotator = worker("w1")
    assignment = hits.hit_next_for_annotator(study=study, annotator=annotator)
    good = {"helpfulness": {"value": 2}, "correctness": {"value": -1, "reason": "B cites the docs"},
            "style": {"value": 0}}
    with pytest.raises(HitError, match="choose an answer for 'Which answer reads better\\?'"):
        hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0, idempotency_key="k1",
                              answers={k: v for k, v in good.items() if k != "style"})
    with pytest.raises(HitError, match="'Which answer is more correct\\?': give a short reason"):
        hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0, idempotency_key="k1",
                              answers={**good, "correctness": {"value": -1, "reason": "  "}})
    with pytest.raises(HitError, match="must be one of -1, 0, 1"):
        hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0, idempotency_key="k1",
                              answers={**good, "style": {"value": 2}})
    assert not Judgement.objects.exists()
    judgement = hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0,
                                      idempotency_key="k1", answers=good)
    sign = -1 if assignment.shown_swapped else 1
    assert judgement.answers["helpfulness"] == {"value": sign, "strength": 2}
    assert judgement.answers["correctness"] == {"value": -sign, "reason": "B cites the docs"}
    assert judgement.value == sign
    # the same submit again is the same judgement
    again = hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0,
                                  idempotency_key="k1", answers=good)
    assert again.pk == judgement.pk and Judgement.objects.count() == 1


def test_export_carries_every_criterion_and_reason_and_imports_again(tmp_path):
    study = study_import(source=bundle_bytes(rubric_rows(imported=2)))
    annotator = worker("w1")
    assignment = hits.hit_next_for_annotator(study=study, annotator=annotator)
    hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0, idempotency_key="k1",
                          answers={"helpfulness": {"value": -1, "reason": "shorter"},
                                   "correctness": {"value": 1, "reason": "no bug"}, "style": {"value": 1}})
    path = tmp_path / "rubric.jsonl.gz"
    study_export(study=study, path=path)
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    assert rows[0]["criteria"] == [{"name": c["name"], "label": c["label"], "strength": c.get("strength", False),
                                    "reason": c.get("reason", "off"), **({"metric": c["metric"]} if "metric" in c
                                                                         else {})} for c in RUBRIC]
    prefs = [r for r in rows if r["kind"] == "human_preference"]
    assert len(prefs) == 3 * 3
    assert {r["criterion"] for r in prefs} == {"helpfulness", "correctness", "style"}
    assert {r.get("reason") for r in prefs if r["annotator"].startswith("prolific")} == {"shorter", "no bug", None}
    again = study_import(source=path, slug="rubric-again")
    before = sorted(json.dumps(j.answers, sort_keys=True) for j in Judgement.objects.filter(comparison__study=study))
    after = sorted(json.dumps(j.answers, sort_keys=True) for j in Judgement.objects.filter(comparison__study=again))
    assert before == after


def test_the_dashboard_shows_the_criteria_side_by_side(client):
    from annotation.selectors.dashboard import study_dashboard_heavy
    from tests.builders.clients import researcher_client

    study = study_import(source=bundle_bytes(rubric_rows(imported=0, budget=150)))
    rng = random.Random(5)
    answer_rubric_hits(study, [worker(f"w{n}") for n in range(4)], 150,
                       lambda assignment: _answers_on_screen(assignment, rng), key="d")
    data = study_dashboard_heavy(study=study)["criteria"]
    state = _lanes(study)
    by_name = {c["name"]: c for c in data["criteria"]}
    for name in ("helpfulness", "correctness", "style"):
        lane = state.lane(name)
        assert by_name[name]["decided"] == sum(1 for p in lane.pairs if p.decision)
        assert by_name[name]["judgements"] == lane.spent
    assert by_name["helpfulness"]["ranking"][0] == "A" and by_name["correctness"]["ranking"][0] == "C"
    assert by_name["helpfulness"]["metric"] == "judge_help" and by_name["style"]["agreement"] is None
    assert data["hits"] == sum(state.hits)
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert 'id="criteria"' in page and "Which answer is more correct?" in page
    assert page.count('class="status-') == 3 * 3


def test_a_judge_is_compared_with_the_answers_to_its_own_criterion():
    from annotation.selectors.studies import study_judges

    rows = rubric_rows(imported=3)
    del rows[0]["criteria"][0]["metric"]
    rows[0]["criteria"][1]["metric"] = "judge_help"  # now the correctness criterion's judge
    study = study_import(source=bundle_bytes(rows))
    [judge] = study_judges(study=study)
    # e1 found A more helpful, as the judge did, but B more correct: compared with the
    # correctness answers the judge agrees on none of the three (on all with helpfulness)
    assert (judge["criterion"], judge["human_compared"], judge["human_agreement"]) == ("correctness", 3, 0.0)


def test_the_pair_page_shows_each_criterions_protocol(client):
    from tests.builders.clients import researcher_client

    study = study_import(source=bundle_bytes(rubric_rows(imported=3)))
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/pair/?first=A&second=B")
    assert page.status_code == 200
    criteria = page.context["pair"]["criteria"]
    assert [(c["name"], c["judgements"]) for c in criteria] == [("helpfulness", 3), ("correctness", 3), ("style", 3)]
    assert 'id="pair-criteria"' in page.content.decode()


def test_excluding_a_worker_rebuilds_every_criterion_and_including_them_again_restores_it():
    from annotation.services import quality, runtime

    study = study_import(source=bundle_bytes(rubric_rows(imported=0, budget=150)))
    rng = random.Random(11)
    spammer = worker("spammer")

    def answer(assignment):
        if assignment.annotator_id == spammer.pk:  # always "left", strongly, on every criterion
            return {"helpfulness": {"value": 2, "reason": "x"}, "correctness": {"value": 1, "reason": "x"},
                    "style": {"value": 1}}
        return _answers_on_screen(assignment, rng)

    answer_rubric_hits(study, [worker(f"w{n}") for n in range(3)] + [spammer], 90, answer, key="x")
    before = _lanes(study)
    spam = Judgement.objects.filter(annotator=spammer).count()
    assert spam > 0
    quality.annotator_exclude(study=study, annotator=spammer, reason="spam")
    runtime.protocol_redecide(study_id=study.pk)
    study.refresh_from_db()
    after = _lanes(study)
    assert sum(after.hits) == sum(before.hits) - spam
    rebuilt = [i for i, (a, b) in enumerate(zip(after.hits, before.hits)) if a != b]
    assert rebuilt
    for i in rebuilt:  # a rebuilt pair's every criterion counts exactly the HITs left (docs/bundle-format.md)
        assert [lane.pairs[i].judgements for lane in after.lanes] == [after.hits[i]] * 3
    assert study_serving_audit(study=study)["protocol_consistent"]
    quality.annotator_include(study=study, annotator=spammer)
    runtime.protocol_redecide(study_id=study.pk)
    study.refresh_from_db()
    again = _lanes(study)
    assert sum(again.hits) == sum(before.hits)
    assert study_serving_audit(study=study)["protocol_consistent"]


def test_the_criteria_are_validated_and_fixed_once_the_protocol_started():
    from django.core.exceptions import ValidationError

    study = study_import(source=bundle_bytes(rubric_rows(imported=0)))
    study.criteria = [{"name": "helpfulness"}, {"name": "helpfulness"}]
    with pytest.raises(ValidationError, match="appears twice"):
        study.full_clean()
    study.refresh_from_db()
    study.criteria = study.criteria[:2]
    with pytest.raises(ValidationError, match="fixed once the protocol has started"):
        study.full_clean()


def test_the_admin_cannot_edit_what_the_protocol_codec_writes():
    from django.contrib import admin

    from annotation.models import PairState as Row
    from annotation.serving.protocol_state import MIRRORED_COLUMNS

    readonly = set(admin.site._registry[Row].get_readonly_fields(None))
    assert set(MIRRORED_COLUMNS) <= readonly, set(MIRRORED_COLUMNS) - readonly


@pytest.mark.parametrize("honest", [True, False])
def test_a_rubrics_onboarding_checks_look_like_any_hit_and_check_the_first_criterion(client, honest):
    from tests.builders.bundles import GOOD
    from tests.builders.crowd import current_hit, start_worker

    rows = rubric_rows(imported=0) + [
        {"kind": "check", "id": f"gold-{n}", "input": f"Check {n}", "first": GOOD, "second": "x", "expected": "first"}
        for n in range(2)]
    rows[0]["onboarding_checks"] = 2
    study = study_import(source=bundle_bytes(rows))
    start_worker(client, study.slug, f"pid-{honest}")
    for _ in range(2):
        assignment, context = current_hit(client, study.slug)
        assert assignment.kind == "check" and [c["name"] for c in context["criteria"]] == [
            "helpfulness", "correctness", "style"]
        good_left = context["left"] == GOOD
        first = (2 if good_left else -2) * (1 if honest else -1)
        client.post(f"/s/{study.slug}/hits/{assignment.pk}/", {
            "key": context["key"], "criterion-helpfulness": str(first),
            # the other criteria right whatever the worker: only the first is checked
            "criterion-correctness": "1" if good_left else "-1", "reason-correctness": "checked",
            "criterion-style": "0"})
    screen = client.get(f"/s/{study.slug}/annotate/").context
    assert (screen["screen"] == "screened") is (not honest)


def test_the_judgements_csv_carries_every_criterions_value_strength_and_reason():
    import csv
    import io

    from django.contrib.auth.models import User
    from django.test import Client

    study = study_import(source=bundle_bytes(rubric_rows(imported=2, budget=60)))
    rng = random.Random(5)
    answer_rubric_hits(study, [worker(f"c{n}") for n in range(3)], 12,
                       lambda assignment: _answers_on_screen(assignment, rng), key="c", read_seconds=2.25)
    client = Client()
    client.force_login(User.objects.create_superuser("csv", password="pw-csv-12345"))
    text = b"".join(client.get(f"/s/{study.slug}/export/judgements.csv").streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    stored = list(Judgement.objects.filter(comparison__study=study).select_related(
        "comparison__item", "comparison__first", "comparison__second", "annotator", "assignment").order_by("pk"))
    assert len(rows) == len(stored) > 2
    for row, j in zip(rows, stored):
        assert (row["item"], row["first"], row["second"], row["annotator"]) == (
            j.comparison.item.external_id, j.comparison.first.name, j.comparison.second.name, j.annotator.external_id)
        assert row["value"] == str(j.value) and row["kind"] == j.kind and row["excluded"] == "0"
        assert row["shown_swapped"] == ("" if j.assignment is None else str(int(j.assignment.shown_swapped)))
        assert row["read_seconds"] == ("" if j.read_seconds is None else str(round(j.read_seconds, 3)))
        assert row["created_at"] == j.created_at.isoformat()
        for name in ("helpfulness", "correctness", "style"):
            answer = j.answers[name]
            assert row[name] == str(answer["value"])
            assert row[f"{name}_strength"] == str(answer.get("strength", ""))
            assert row[f"{name}_reason"] == str(answer.get("reason", ""))
