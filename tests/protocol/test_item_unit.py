"""The item is the unit (issue 9, item 1): several judgements of one item count once.

Checked on the real PandaLM bundle (three annotators per item) against computations written
here from the raw rows, independent of protocol.preferences.
"""
import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from protocol.bundle import read_bundle
from protocol.decision import PairCounts, counts_from_labels, decide_many
from protocol.favi import favi_by_pair
from protocol.preferences import PairLabels, human_labels, metric_labels
from protocol.ranking import sign_test

PANDALM = Path(__file__).resolve().parents[2] / "data" / "bundles" / "pandalm.jsonl.gz"
GAMMA = 0.05


@pytest.fixture(scope="module")
def pandalm():
    return read_bundle(str(PANDALM))


def _raw_rows(kind):
    with gzip.open(PANDALM, "rt") as handle:
        return [row for row in map(json.loads, handle) if row["kind"] == kind]


def test_report_sample_accuracy_equals_an_independent_per_item_computation():
    # sign of the mean of each item's human labels against gpt35's verdict, from the raw rows
    human = defaultdict(int)
    for row in _raw_rows("human_preference"):
        sign = 1 if row["first"] < row["second"] else -1
        human[(row["item"], *sorted((row["first"], row["second"])))] += sign * row["preference"]
    agree = total = 0
    for row in _raw_rows("metric_preference"):
        if row["metric"] != "gpt35":
            continue
        key = (row["item"], *sorted((row["first"], row["second"])))
        if key in human:
            sign = 1 if row["first"] < row["second"] else -1
            total += 1
            agree += int(np.sign(human[key])) == sign * row["preference"]
    from protocol.report import main
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(PANDALM), "--metric", "gpt35", "--json"]) == 0
    report = json.loads(out.getvalue())
    assert total == 974  # comparisons with a gpt35 verdict and human labels (data/bundles/PROVENANCE.md)
    assert report["sample_accuracy"] == pytest.approx(agree / total, abs=1e-12)
    assert sum(np.sum(p["confusion"]) for p in report["pairs"]) == total


def _flip_whole_items(labels: PairLabels, rng) -> PairLabels:
    """A null without a difference that keeps the annotators of one item together."""
    items = np.unique(labels.items.astype(str))
    flips = dict(zip(items.tolist(), rng.choice([-1, 1], size=len(items)).tolist()))
    sign = np.array([flips[i] for i in labels.items.astype(str).tolist()], dtype=np.int8)
    return PairLabels(labels.first, labels.second, labels.items,
                      (labels.values * sign).astype(np.int8), labels.annotators)


@pytest.mark.slow
def test_item_flipping_null_on_pandalm_gives_false_decisions_at_the_stated_level(pandalm):
    raw = human_labels(pandalm, per_item=False)        # every annotator's label
    metric = metric_labels(pandalm, "gpt35")
    rng = np.random.default_rng(2024)
    replicates = 150
    sign_false, bayes_false, decisions = 0, 0, 0
    for _ in range(replicates):
        flipped = {key: _flip_whole_items(labels, rng) for key, labels in raw.items()}
        # the report's route: confusion matrices, human outcome = row sums, DAG sign test
        confusions = np.stack([r.confusion for r in favi_by_pair(flipped, metric).values()])
        outcome = confusions.sum(axis=2)
        sign_false += int(np.count_nonzero(sign_test(outcome[:, 0], outcome[:, 2],
                                                     GAMMA).decision))
        # the decision function's route (human labels only: closed form)
        counts = [counts_from_labels(f.items, f.values, [], []) for f in flipped.values()]
        bayes_false += int(np.count_nonzero(decide_many(counts, gamma=GAMMA).decision))
        decisions += len(counts)
    error = 3 * np.sqrt(GAMMA * (1 - GAMMA) / decisions)   # 3 Monte-Carlo standard errors
    # the sign test discards ties and is a little conservative in small pairs
    assert sign_false / decisions <= GAMMA + error
    assert bayes_false / decisions <= GAMMA + error
    assert sign_false / decisions >= GAMMA / 2 and bayes_false / decisions >= GAMMA / 2
