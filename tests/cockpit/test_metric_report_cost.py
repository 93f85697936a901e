"""The metric report (GET /api/studies/<slug>/report/) reads the items with human labels only,
and its metric labels on the judged (pair, item)s only, with the whole study's numbers."""
import random

import pytest

import protocol.report
from annotation.selectors import dashboard
from annotation.selectors.exports import study_bundle
from annotation.services.studies import study_import
from protocol.report import EVERY, compare_metric, report_json
from tests.builders.bundles import bundle_bytes

pytestmark = pytest.mark.django_db

SYSTEMS = ("A", "B", "C", "D")
ITEMS = [f"i{n:02d}" for n in range(12)]
JUDGED = ITEMS[:4]  # human preferences; ITEMS[4:6] human scores; the other six: no human label
SCORED = ITEMS[4:6]


def report_rows(*, human_scores: bool = True):
    rng = random.Random(3)
    rows = [{"kind": "study", "name": "Report study", "batch_size": 2, "budget": 60, "metric": "m"}]
    rows += [{"kind": "item", "id": i, "input": f"input {i}"} for i in ITEMS]
    rows += [{"kind": "output", "item": i, "system": s, "text": f"{s} on {i}"} for i in ITEMS for s in SYSTEMS]
    # m: a score metric with ties (A and B score the same on every other item)
    rows += [{"kind": "metric_score", "item": i, "system": s, "metric": "m",
              "score": 1.0 if s in "AB" and n % 2 else float(rng.randint(0, 3))}
             for n, i in enumerate(ITEMS) for s in SYSTEMS]
    # q: a score metric that scores D only where no human labels: the human pairs of D are
    # listed (the metric labels them elsewhere) with nothing to compare on.
    rows += [{"kind": "metric_score", "item": i, "system": s, "metric": "q", "score": float(rng.randint(0, 2))}
             for i in ITEMS for s in SYSTEMS if s != "D" or i not in JUDGED + SCORED]
    # p: a preference metric, some pairs in both position orders (a disagreement is a tie)
    for i in ITEMS:
        for a in range(len(SYSTEMS)):
            for b in range(a + 1, len(SYSTEMS)):
                row = {"kind": "metric_preference", "item": i, "first": SYSTEMS[a], "second": SYSTEMS[b],
                       "metric": "p", "preference": rng.choice((-1, 0, 1))}
                if rng.random() < 0.3:
                    rows += [{**row, "order": "AB"}, {**row, "order": "BA", "preference": rng.choice((-1, 1))}]
                else:
                    rows.append(row)
    for i in JUDGED:
        for a, b in (("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")):
            for who in ("w1", "w2", "w3")[: rng.randint(1, 3)]:  # ties among them
                rows.append({"kind": "human_preference", "item": i, "first": a, "second": b,
                             "preference": rng.choice((-1, 0, 1)), "annotator": who})
    if human_scores:
        rows += [{"kind": "human_score", "item": i, "system": s, "score": float(rng.randint(1, 5)),
                  "annotator": who} for i in SCORED for s in SYSTEMS for who in ("e1", "e2")]
    return rows


def old_report(study, metric):
    """The report as the whole study's bundle gives it, every metric label computed."""
    eps = study.metrics.get(name=metric).tie_margin
    report = compare_metric(study_bundle(study=study), metric, eps=eps, seed=study.protocol_seed,
                            labels=EVERY)
    return {"metric": metric, **report_json(report)}


@pytest.mark.parametrize("human_scores", [True, False])
@pytest.mark.parametrize("metric", ["m", "p", "q"])
def test_the_report_of_the_judged_items_is_the_whole_studys(metric, human_scores):
    study = study_import(source=bundle_bytes(report_rows(human_scores=human_scores)), slug="r")
    new = dashboard.study_metric_report(study=study, metric=metric)
    assert new == old_report(study, metric)
    assert new["pairs"] and new["spa"] is not None
    if metric == "q":  # D's pairs listed, compared on no item
        d_pairs = [p for p in new["pairs"] if "D" in (p["first"], p["second"])]
        assert d_pairs and all(sum(map(sum, p["confusion"])) == 0 for p in d_pairs)


def test_the_report_reads_the_judged_items_only(monkeypatch):
    """Counted, not timed: the bundle the report compares holds the outputs of the items with a
    human label (the old code read every output of the study), and the metric labels computed
    are the judged (pair, item)s', once (the old code labelled every pair on every item; then
    the judged ones twice, to see whether they suffice and again for the report)."""
    study = study_import(source=bundle_bytes(report_rows()), slug="r")
    seen, labelled = [], []
    real_compare, real_labels = dashboard.compare_metric, protocol.report.metric_labels

    def compare(bundle, *args, **kwargs):
        seen.append(bundle)
        return real_compare(bundle, *args, **kwargs)

    def labels(*args, **kwargs):
        table = real_labels(*args, **kwargs)
        labelled.append(sum(len(t) for t in table.values()))
        return table

    monkeypatch.setattr(dashboard, "compare_metric", compare)
    monkeypatch.setattr(protocol.report, "metric_labels", labels)
    body = dashboard.study_metric_report(study=study, metric="m")
    (bundle,) = seen
    assert len(bundle.outputs) == len(JUDGED + SCORED) * len(SYSTEMS)
    assert bundle.systems == SYSTEMS
    judged_pairs_items = len(JUDGED) * 4 + len(SCORED) * 6  # 4 judged pairs; every pair from the scores
    assert labelled == [judged_pairs_items]
    assert sum(sum(map(sum, p["confusion"])) for p in body["pairs"]) == judged_pairs_items
