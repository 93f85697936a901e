"""The default rule uses the study's metric as a control variate (issue 38 part 3,
protocol.control_variate) on every app path, and stays valid on nulls where every ± is false.

Each run is a one-pair study with a judge that scored every item. The humans prefer neither
system: every item's label is a fair ±1, and the judge agrees with it on 85 % of the items
(the replay's item-flip null: judge and humans flip together), or, in the favouritism null,
says "A" on half the items whatever the humans say. Everything runs through the app: workers
lease (uniform item choice, or separability-weighted choice at the lowest temperature allowed),
submit (rounds close inline), one worker is excluded and later re-included (the pair is
re-decided from the counted judgements each time). At most about γ of the runs may decide.
Before the control variate the steps carried no reliance on the metric (the first assertion
fails on that code).
"""
import random

import pytest
from django.contrib.auth.models import User

from annotation.models import Comparison, PairState, Study
from annotation.services import hits, quality
from annotation.services.studies import study_import
from protocol.study_settings import SETTINGS
from tests.builders.annotating import worker
from tests.builders.bundles import bundle_bytes, one_pair_rows
from tests.builders.studies import comparisons_stored

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ITEMS = 40
RUNS = 12
GAMMA = 0.05
AGREE = 0.85


def judged_null_study(run: int, kind: str, weighted: bool, futility: float | None = None) -> tuple[Study, dict[int, int]]:
    """The study and its humans' label per item position (A vs B, +1 = A better); ``futility``:
    the study's futility level (None: the default)."""
    rng = random.Random(f"{kind}-{weighted}-{run}")
    truth, judge = {}, {}
    for position in range(ITEMS):
        truth[position] = rng.choice([1, -1])
        if kind == "favouritism" and rng.random() < 0.5:
            judge[position] = 1
        else:
            judge[position] = truth[position] if rng.random() < AGREE else -truth[position]
    rows = one_pair_rows(items=ITEMS, batch=5, budget=ITEMS)
    rows[0].update(name=f"Null {run}", gamma=GAMMA, metric="judge")  # defaults: adaptive, e-process, e-BH
    if futility is not None:
        rows[0]["futility"] = futility
    rows += [{"kind": "metric_preference", "item": f"i{n:02d}", "first": "A", "second": "B", "metric": "judge",
              "preference": judge[n]} for n in range(ITEMS)]
    level = "" if futility is None else f"-f{int(futility * 100)}"
    study = study_import(source=bundle_bytes(rows), slug=f"cv-{kind}-{int(weighted)}{level}-{run}")
    Study.objects.filter(pk=study.pk).update(protocol_seed=run)
    if weighted:
        Study.objects.filter(pk=study.pk).update(item_choice=Study.ItemChoice.WEIGHTED, item_choice_temperature=0.1)
        comparisons = comparisons_stored(study)
        for n, c in enumerate(comparisons):
            c.separability = -1 + 2 * n / (len(comparisons) - 1)
        Comparison.objects.bulk_update(comparisons, ["separability"])
    study.refresh_from_db()
    return study, truth


def run_once(run: int, kind: str, weighted: bool, researcher, futility: float | None = None) -> tuple[int, bool]:
    """(the pair's final decision, whether a step relied on the metric)."""
    study, truth = judged_null_study(run, kind, weighted, futility)
    level = "" if futility is None else f"f{int(futility * 100)}"
    workers = [worker(f"cv{kind[0]}{int(weighted)}{level}{run}-{n}") for n in range(3)]
    served = idle = 0
    for step in range(4 * ITEMS):
        who = workers[step % 3]
        hit = hits.hit_next_for_annotator(study=study, annotator=who)
        if hit is None:
            idle += 1
            if idle == len(workers):
                break
            continue
        idle = 0
        value = truth[hit.comparison.item.position]
        try:
            hits.judgement_submit(assignment=hit, annotator=who, shown_value=-value if hit.shown_swapped else value,
                                  idempotency_key=hits.new_idempotency_key())
        except hits.HitError:
            continue
        served += 1
        if served == ITEMS // 3:
            quality.annotator_exclude(study=study, annotator=workers[2], user=researcher, reason="null test")
        if served == ITEMS // 2:
            quality.annotator_include(study=study, annotator=workers[2], user=researcher, reason="null test")
    pair = PairState.objects.get(study=study)
    relied = any(len(step) > 4 and step[4] != 0 for step in pair.state.get("steps", []))
    return pair.decision, relied


@pytest.mark.parametrize("kind, weighted", [("flip", False), ("favouritism", False), ("flip", True)])
def test_the_metric_as_control_variate_keeps_false_decisions_at_gamma_on_every_app_path(kind, weighted):
    researcher = User.objects.create_user(f"cv-{kind}-{int(weighted)}", password="pw-null-12345")
    outcomes = [run_once(run, kind, weighted, researcher) for run in range(RUNS)]
    decisions = [d for d, _ in outcomes]
    if not weighted:  # uniform draws bet on the metric; weighted draws keep lam = 0 (module doc)
        assert any(relied for _, relied in outcomes), "no step relied on the metric: the control variate is off"
    false = sum(d != 0 for d in decisions)
    # P(Binomial(12, 0.05) >= 3) = 0.02: more than 2 false decisions in 12 runs is not γ = 0.05.
    assert false <= 2, f"{false} of {RUNS} null runs decided (decisions {decisions}); γ = {GAMMA}"


def test_at_the_lowest_futility_level_no_null_pair_is_given_up_and_false_decisions_stay_at_gamma():
    """The study setting ``futility`` at the least it allows (0: no pair is given up, so every
    null pair takes all its items: the most looks an e-process gets), through the same app path
    as above (uniform choice, an exclusion and a re-inclusion). The level only decides when a
    pair stops without a decision; the error control must not depend on it."""
    lowest = SETTINGS["futility"].minimum
    researcher = User.objects.create_user("cv-futility", password="pw-null-12345")
    outcomes = [run_once(run, "flip", False, researcher, futility=lowest) for run in range(RUNS)]
    statuses = set(PairState.objects.filter(study__slug__startswith="cv-flip-0-f").values_list("status", flat=True))
    assert "futile" not in statuses, statuses
    false = sum(d != 0 for d, _ in outcomes)
    # P(Binomial(12, 0.05) >= 3) = 0.02
    assert false <= 2, f"{false} of {RUNS} null runs decided at futility {lowest}; γ = {GAMMA}"


SYSTEMS = ("A", "B", "C")


def combined_null_study(run: int) -> tuple[Study, dict]:
    """Three systems, two judges combined (Study.combined_metrics) that track null humans: every
    item's human label is a fair ±1 per pair, judge j1 agrees with it on 85 % of the items, j2
    on 70 %. Returns the study and (first, second, item position) -> the human label."""
    rng = random.Random(f"combined-{run}")
    truth, rows = {}, []
    for a, b in (("A", "B"), ("A", "C"), ("B", "C")):
        for n in range(ITEMS):
            value = truth[(a, b, n)] = rng.choice([1, -1])
            for judge, agree in (("j1", AGREE), ("j2", 0.7)):
                rows.append({"kind": "metric_preference", "item": f"i{n:02d}", "first": a, "second": b,
                             "metric": judge, "preference": value if rng.random() < agree else -value})
    study_rows = [{"kind": "study", "name": f"Combined null {run}", "batch_size": 5, "budget": 3 * ITEMS,
                   "gamma": GAMMA, "metric": "j1", "combined_metrics": "j2"}]
    study_rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(ITEMS)]
    study_rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
                   for n in range(ITEMS) for s in SYSTEMS]
    study = study_import(source=bundle_bytes(study_rows + rows), slug=f"cv-combined-{run}")
    Study.objects.filter(pk=study.pk).update(protocol_seed=run)
    study.refresh_from_db()
    return study, truth


def test_two_judges_combined_in_the_app_keep_null_studies_free_of_false_decisions():
    """The app's combined path (services.runtime.metrics_combined) on null studies: at most
    about γ of the studies may decide any pair (e-BH bounds the false discovery rate, so the
    chance that a null study decides anything, by γ)."""
    studies_with_any, predicted = 0, False
    for run in range(RUNS):
        study, truth = combined_null_study(run)
        workers = [worker(f"cvc{run}-{n}") for n in range(2)]
        idle = 0
        while idle < len(workers):
            idle = 0
            for who in workers:
                hit = hits.hit_next_for_annotator(study=study, annotator=who)
                if hit is None:
                    idle += 1
                    continue
                c = hit.comparison
                value = truth[(c.first.name, c.second.name, c.item.position)]
                hits.judgement_submit(assignment=hit, annotator=who, idempotency_key=hits.new_idempotency_key(),
                                      shown_value=-value if hit.shown_swapped else value)
        rows = list(PairState.objects.filter(study=study))
        predicted |= any(row.state.get("prediction") for row in rows)
        studies_with_any += any(row.decision != 0 for row in rows)
    assert predicted, "no pair had a combined prediction: the judges were not combined"
    # P(Binomial(12, 0.05) >= 3) = 0.02
    assert studies_with_any <= 2, f"{studies_with_any} of {RUNS} null studies decided a pair; γ = {GAMMA}"
