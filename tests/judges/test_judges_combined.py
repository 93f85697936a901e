"""Several judges of a study enter the app's protocol together (issue 38 part 2, Study.combined_metrics):
every round the app opens predicts each item's human label from both judges' verdicts through the
calibration cross-fitted on the OTHER pairs' human labels so far, as ``python -m protocol.simulate
--metric A,B`` does, and the e-process's steps use that prediction. The reference here is a ridge
fit written out in numpy (penalty 5, no intercept, shrunk towards the first judge: docs/formulas.md
§8), not the protocol's function. Before the setting the app's protocol saw the study's metric alone
(no prediction stored: the first assertion fails on that code)."""
import random

import pytest
from django.core.exceptions import ValidationError

from annotation.models import PairState, Study
from annotation.services import hits
from annotation.services.studies import study_import, study_settings_update
from protocol.bundle import BundleError
from tests.builders.annotating import answer_hits, answer_rubric_hits, workers_of
from tests.builders.bundles import bundle_bytes
from tests.builders.judges import JUDGE_SYSTEMS, judge_quality, judge_rows, ridge_reference

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS = 30
RIDGE = 5.0


def truth(item: int, first: str, second: str) -> int:
    qa, qb = judge_quality(item, first), judge_quality(item, second)
    return (qa > qb) - (qa < qb)


def verdicts(name: str, agree: float) -> dict[tuple[str, str], dict[str, int]]:
    """A judge that says the truth on ``agree`` of the items and a random label otherwise."""
    rng = random.Random(name)
    out = {}
    for a, b in sorted({tuple(sorted(p)) for p in zip(JUDGE_SYSTEMS, JUDGE_SYSTEMS[1:] + JUDGE_SYSTEMS[:1])}):
        out[(a, b)] = {f"i{n:02d}": truth(n, a, b) if rng.random() < agree else rng.choice([1, 0, -1])
                       for n in range(ITEMS)}
    return out


JUDGES = {"j1": verdicts("j1", 0.6), "j2": verdicts("j2", 0.8)}


def judged_study(slug: str, combined: str) -> Study:
    rows = judge_rows(ITEMS, token=slug, metric="j1", combined_metrics=combined, budget=3 * ITEMS)
    rows += [{"kind": "metric_preference", "item": item, "first": a, "second": b, "metric": name, "preference": value}
             for name, table in JUDGES.items() for (a, b), labels in table.items() for item, value in labels.items()]
    return study_import(source=bundle_bytes(rows), slug=slug)


def reference_prediction(states: dict, key: tuple[str, str]) -> dict[str, float]:
    """The ridge fit of the human item labels on (j1, j2) over every pair but ``key``."""
    return ridge_reference({k: state["votes"] for k, state in states.items()}, key, [JUDGES["j1"], JUDGES["j2"]],
                           RIDGE)


def pair_states(study: Study) -> dict:
    return {(r.state["first"], r.state["second"]): r.state for r in PairState.objects.filter(study=study)}


def one_judgement(study: Study, workers: dict) -> bool:
    """One truthful judgement by the first worker the app serves; False when none is served."""
    for annotator in workers.values():
        study.refresh_from_db()
        hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
        if hit is None:
            continue
        value = truth(hit.comparison.item.position, hit.comparison.first.name, hit.comparison.second.name)
        hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                              shown_value=-value if hit.shown_swapped else value)
        return True
    return False


def test_two_judges_combine_through_the_cross_fitted_calibration_on_the_app_path():
    study = judged_study("combined-judges", "j2")
    workers = workers_of(["w1", "w2"])
    rounds = {key: state["round"] for key, state in pair_states(study).items()}
    checked = relied = 0
    # one judgement at a time, so that the state right after every opening is seen
    while one_judgement(study, workers):
        states = pair_states(study)
        for key, state in states.items():
            if state["round"] != rounds[key] and state["status"] == "open":
                # a round just opened: its prediction is the ridge fit on the other pairs' labels now
                assert state["prediction"], f"pair {key} opened a round with no combined prediction"
                assert state["prediction"] == pytest.approx(reference_prediction(states, key), abs=1e-9)
                checked += 1
            rounds[key] = state["round"]
    for state in pair_states(study).values():
        relied += sum(1 for step in state["steps"] if step[4] != 0)
    assert checked >= 3, f"only {checked} rounds opened after the first close"
    assert relied, "no step relied on the combined prediction"


def test_a_judge_named_while_the_study_runs_enters_at_the_next_opening():
    study = judged_study("combined-later", "")
    workers = workers_of(["l1", "l2"])
    answer_hits(study, workers, lambda first, second, name: 1, stop_after=5)
    assert all(not state["prediction"] for state in pair_states(study).values())
    study_settings_update(study=study, changes={"combined_metrics": "j2"})
    before = {key: state["round"] for key, state in pair_states(study).items()}
    while one_judgement(study, workers):
        after = pair_states(study)
        opened = [key for key, state in after.items() if state["round"] != before[key] and state["status"] == "open"]
        if opened:
            assert all(after[key]["prediction"] == pytest.approx(reference_prediction(after, key), abs=1e-9)
                       for key in opened)
            return
    pytest.fail("no round opened after the setting changed")


def test_a_study_without_combined_metrics_stores_no_prediction():
    study = judged_study("single-judge", "")
    answer_hits(study, workers_of(["s1"]), lambda first, second, name: 1, stop_after=20)
    assert all(not state["prediction"] for state in pair_states(study).values())


def test_an_unknown_combined_metric_is_refused_by_name():
    rows = judge_rows(ITEMS, token="unknown", metric="j1", combined_metrics="j1, nope")
    rows += [{"kind": "metric_preference", "item": "i00", "first": "A", "second": "B", "metric": "j1", "preference": 1}]
    with pytest.raises(BundleError, match="nope"):
        study_import(source=bundle_bytes(rows), slug="unknown-combined")
    study = judged_study("combined-then-unknown", "j2")
    study.combined_metrics = "j2,ghost"
    with pytest.raises(ValidationError, match="ghost"):
        study.full_clean()


CRITERIA = [{"name": "helpfulness", "label": "Which answer helps more?", "metric": "j1"},
            {"name": "correctness", "label": "Which answer is more correct?", "metric": "c1"}]
CORRECTNESS_JUDGES = {"c1": verdicts("c1", 0.6), "c2": verdicts("c2", 0.85)}


def test_a_rubric_combines_judges_per_criterion():
    """combined_metrics "correctness: c2" combines judge c2 with the correctness criterion's own
    metric c1, in the correctness lane, on that criterion's human labels (the ridge reference
    on c1 and c2); the helpfulness lane combines none. Before, only the first lane combined, and
    a criterion's name before a colon was read as a metric name (refused at import)."""
    rows = judge_rows(ITEMS, token="rubric-combined", criteria=CRITERIA, combined_metrics="correctness: c2",
                      budget=3 * ITEMS)
    rows += [{"kind": "metric_preference", "item": item, "first": a, "second": b, "metric": name, "preference": value}
             for name, table in {"j1": JUDGES["j1"], **CORRECTNESS_JUDGES}.items()
             for (a, b), labels in table.items() for item, value in labels.items()]
    study = study_import(source=bundle_bytes(rows), slug="rubric-combined")
    workers = workers_of(["r1", "r2"])

    def lanes() -> dict:
        return {(r.state["first"], r.state["second"]): r.criteria_state["lanes"]["correctness"]
                for r in PairState.objects.filter(study=study)}

    def truthful(assignment) -> dict:
        c = assignment.comparison
        value = truth(c.item.position, c.first.name, c.second.name)
        shown = -value if assignment.shown_swapped else value
        return {name: {"value": shown} for name in ("helpfulness", "correctness")}

    rounds = {key: lane["round"] for key, lane in lanes().items()}
    checked = 0
    for n in range(3 * ITEMS):
        if not answer_rubric_hits(study, list(workers.values()), 1, truthful, key=f"rc{n}-"):
            break
        states = lanes()
        for key, lane in states.items():
            if lane["round"] != rounds[key] and lane["status"] == "open":
                assert lane["prediction"], f"pair {key}'s correctness lane opened a round with no prediction"
                reference = ridge_reference({k: s["votes"] for k, s in states.items()}, key,
                                            [CORRECTNESS_JUDGES["c1"], CORRECTNESS_JUDGES["c2"]], RIDGE)
                assert lane["prediction"] == pytest.approx(reference, abs=1e-9)
                checked += 1
            rounds[key] = lane["round"]
    assert checked >= 3, f"only {checked} correctness rounds opened after the first close"
    assert all(not r.state["prediction"] for r in PairState.objects.filter(study=study)), \
        "the helpfulness lane combines no judge"
