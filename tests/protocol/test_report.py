"""Tests for protocol.report: the metric-vs-human report and its command line (docs/formulas.md)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.bundle import read_bundle
from protocol.favi import favi_score
from protocol.report import compare_metric, main, report_json

CONTRACT_KEYS = {"systems", "pairs", "sample_accuracy", "system_accuracy", "mean_abs_favi", "spa", "pa"}
PAIR_KEYS = {"first", "second", "confusion", "favi", "human_decision", "metric_decision", "category"}


def _bundle_bytes(rows: list[dict]) -> bytes:
    return ("\n".join(json.dumps(r) for r in rows) + "\n").encode()


def _score_bundle(human: dict, metric: dict, names=("A", "B", "C")) -> list[dict]:
    """human: system -> list over items of score lists (one per annotator); metric: system -> scores."""
    n_items = len(next(iter(metric.values())))
    rows = [{"kind": "study", "name": "t"}]
    rows += [{"kind": "item", "id": f"i{k}", "input": "x"} for k in range(n_items)]
    rows += [{"kind": "output", "item": f"i{k}", "system": s, "text": "y"} for s in names for k in range(n_items)]
    rows += [
        {"kind": "metric_score", "item": f"i{k}", "system": s, "metric": "m", "score": float(v)}
        for s in names for k, v in enumerate(metric[s])
    ]
    rows += [
        {"kind": "human_score", "item": f"i{k}", "system": s, "score": float(v), "annotator": f"e{a}"}
        for s in names for k, scores in enumerate(human[s]) for a, v in enumerate(scores)
    ]
    return rows


def test_human_scores_are_averaged_per_item_before_preferences():
    # item i0: A has (5, 1) -> mean 3, B has (3, 3) -> mean 3: a tie, although annotator e0
    # alone would prefer A. Item i1: A 4 vs B 2 -> +1. Metric prefers A on both items.
    human = {"A": [[5, 1], [4, 4]], "B": [[3, 3], [2, 2]]}
    metric = {"A": [0.9, 0.8], "B": [0.1, 0.2]}
    bundle = read_bundle(_bundle_bytes(_score_bundle(human, metric, names=("A", "B"))))
    report = report_json(compare_metric(bundle, "m", permutations=200))
    assert set(report) == CONTRACT_KEYS
    (pair,) = report["pairs"]
    assert set(pair) == PAIR_KEYS
    assert pair["confusion"] == [[1, 0, 0], [1, 0, 0], [0, 0, 0]]
    assert pair["favi"] == pytest.approx(1.0)
    assert report["sample_accuracy"] == pytest.approx(0.5)
    assert report["system_accuracy"] == 1.0  # margins 1 and 2 share a sign


def _preference_bundle(human_rows, metric_rows) -> bytes:
    rows = [{"kind": "study", "name": "t"}]
    items = sorted({r[0] for r in human_rows} | {r[0] for r in metric_rows})
    rows += [{"kind": "item", "id": i, "input": "x"} for i in items]
    rows += [{"kind": "output", "item": i, "system": s, "text": "y"} for i in items for s in ("P", "Q", "R")]
    rows += [
        {"kind": "human_preference", "item": i, "first": a, "second": b, "preference": v, "annotator": who}
        for i, a, b, v, who in human_rows
    ]
    rows += [
        {"kind": "metric_preference", "item": i, "first": a, "second": b, "metric": "judge", "preference": v}
        for i, a, b, v in metric_rows
    ]
    return _bundle_bytes(rows)


def test_preference_bundle_report_pairs_annotators_with_the_items_verdict():
    rng = np.random.default_rng(0)
    human_rows, metric_rows = [], []
    for k in range(30):
        # P beats Q clearly, Q vs R balanced; the judge always favours R
        human_rows += [(f"pq{k}", "P", "Q", int(rng.choice([1, 1, 1, 0, -1])), w) for w in ("h1", "h2")]
        metric_rows.append((f"pq{k}", "P", "Q", 1))
        # rows given as (R, Q) are flipped to canonical (Q, R) with negated labels
        human_rows += [(f"qr{k}", "R", "Q", int(rng.choice([1, -1, 0])), w) for w in ("h1", "h2")]
        metric_rows.append((f"qr{k}", "R", "Q", 1))
    bundle = read_bundle(_preference_bundle(human_rows, metric_rows))
    report = compare_metric(bundle, "judge", permutations=500)
    by_pair = {(p.first, p.second): p for p in report.pairs}
    assert set(by_pair) == {("P", "Q"), ("Q", "R")}
    qr = by_pair[("Q", "R")]
    assert qr.confusion.sum() == 30  # two annotator labels per item merged into one
    assert qr.confusion[:, 2].sum() == 30  # the judge says R (second) every time
    assert qr.favi < 0 and qr.metric_decision == -1
    assert by_pair[("P", "Q")].human_decision == 1 and by_pair[("P", "Q")].category == "Correct"
    assert report.spa_route == "preferences"
    assert 0 <= report.spa.spa <= 1 and 0 <= report.spa.pa <= 1
    assert report.human_graph.edges == (("P", "Q"),)


def test_metric_against_itself_reports_perfect_agreement():
    rng = np.random.default_rng(4)
    scores = {s: rng.normal(size=12) for s in ("A", "B", "C")}
    human = {s: [[v] for v in scores[s]] for s in scores}
    bundle = read_bundle(_bundle_bytes(_score_bundle(human, scores)))
    report = compare_metric(bundle, "m", permutations=300)
    assert report.sample_accuracy == 1.0 and report.system_accuracy == 1.0
    assert np.isnan(report.mean_abs_favi)  # no errors anywhere
    assert report.spa.spa == 1.0 and report.spa_route == "scores"
    assert all(p.category == "Correct" for p in report.pairs)
    assert report_json(report)["mean_abs_favi"] is None  # JSON has no NaN


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_swapping_system_names_mirrors_every_pair_result(seed):
    rng = np.random.default_rng(seed)
    metric = {s: np.round(rng.normal(size=8), 1) for s in ("A", "B", "C")}
    human = {s: [[int(v)] for v in rng.integers(1, 6, size=8)] for s in ("A", "B", "C")}
    original = compare_metric(read_bundle(_bundle_bytes(_score_bundle(human, metric))), "m", permutations=200)
    rename = {"A": "C", "B": "B", "C": "A"}
    renamed = compare_metric(
        read_bundle(_bundle_bytes(_score_bundle(
            {rename[s]: v for s, v in human.items()}, {rename[s]: v for s, v in metric.items()}
        ))),
        "m",
        permutations=200,
    )
    mirrored = {(p.first, p.second): p for p in renamed.pairs}
    for p in original.pairs:
        a, b = rename[p.first], rename[p.second]
        q = mirrored[(min(a, b), max(a, b))]
        if a < b:
            np.testing.assert_array_equal(q.confusion, p.confusion)
            assert (q.human_decision, q.metric_decision) == (p.human_decision, p.metric_decision)
        else:
            np.testing.assert_array_equal(q.confusion, p.confusion[::-1, ::-1])
            assert (q.human_decision, q.metric_decision) == (-p.human_decision, -p.metric_decision)
            assert q.favi == pytest.approx(-p.favi, nan_ok=True)
        assert q.category == p.category
        assert q.favi == pytest.approx(favi_score(q.confusion), nan_ok=True)
    assert renamed.sample_accuracy == original.sample_accuracy
    assert renamed.system_accuracy == original.system_accuracy
    assert renamed.mean_abs_favi == pytest.approx(original.mean_abs_favi, nan_ok=True)


def test_command_line_json_and_errors(tmp_path, capsys):
    rng = np.random.default_rng(2)
    scores = {s: rng.normal(size=6) for s in ("A", "B", "C")}
    human = {s: [[v + rng.normal()] for v in scores[s]] for s in scores}
    path = tmp_path / "b.jsonl"
    path.write_bytes(_bundle_bytes(_score_bundle(human, scores)))
    assert main([str(path), "--metric", "m", "--json", "--permutations", "100"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert set(output) == CONTRACT_KEYS
    assert output["systems"] == ["A", "B", "C"] and len(output["pairs"]) == 3
    assert main([str(path), "--metric", "m", "--json", "--permutations", "100",
                 "--bootstrap", "200"]) == 0
    intervals = json.loads(capsys.readouterr().out)["intervals"]
    low, high = intervals["sample_accuracy"]
    assert low <= output["sample_accuracy"] <= high and intervals["draws"] == 200
    assert set(intervals["favi"]) == {"A|B", "A|C", "B|C"}
    assert main([str(path), "--metric", "nope"]) == 2
    assert "unknown metric 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"study","name":"t"}\n{"kind":"item","id":"i","input":"x","oops":1}\n')
    assert main([str(bad), "--metric", "m"]) == 2
    assert "line 2" in capsys.readouterr().err


def test_bundle_without_human_rows_is_a_clear_error():
    rows = [r for r in _score_bundle({"A": [[1]], "B": [[2]]}, {"A": [1.0], "B": [2.0]}, names=("A", "B"))
            if r["kind"] != "human_score"]
    with pytest.raises(ValueError, match="no human_score or human_preference"):
        compare_metric(read_bundle(_bundle_bytes(rows)), "m")
