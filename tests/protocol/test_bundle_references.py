"""protocol.bundle checks the references of a bundle's outputs and metric scores over integer
codes in numpy arrays (issue 41: at 200 systems x 2,000 items their sets of tuple keys added
about 115 MB to the import's peak), naming every problem by its line as before."""
import json
import tracemalloc

import pytest

from protocol.bundle import BundleError, _check_references, _Checker, parse_bundle_lines, read_bundle


def _bundle_bytes(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_every_problem_of_outputs_and_scores_is_named_by_its_line_in_line_order():
    rows = [
        {"kind": "study", "name": "Refs"},                                                   # 1
        {"kind": "item", "id": "d1", "input": "x"},                                          # 2
        {"kind": "item", "id": "d2", "input": "y"},                                          # 3
        {"kind": "output", "item": "d1", "system": "A", "text": "a"},                       # 4
        {"kind": "output", "item": "d1", "system": "B", "text": "b"},                       # 5
        {"kind": "output", "item": "d2", "system": "A", "text": "a"},                       # 6
        {"kind": "output", "item": "d1", "system": "A", "text": "again"},                   # 7 duplicate of 4
        {"kind": "output", "item": "d1", "system": "A", "text": "s1", "sample": 1},         # 8 another sample: fine
        {"kind": "output", "item": "zz", "system": "B", "text": "b"},                       # 9 unknown item
        {"kind": "output", "item": "zz", "system": "B", "text": "b"},                       # 10 unknown and repeated
        {"kind": "metric_score", "item": "d1", "system": "A", "metric": "m", "score": 1},   # 11
        {"kind": "metric_score", "item": "d2", "system": "B", "metric": "m", "score": 1},   # 12 no output of B on d2
        {"kind": "metric_score", "item": "d3", "system": "A", "metric": "m", "score": 1},   # 13 unknown item
        {"kind": "metric_score", "item": "d1", "system": "C", "metric": "m", "score": 1},   # 14 C has no outputs
        {"kind": "metric_score", "item": "d1", "system": "A", "metric": "m", "score": 2},   # 15 duplicate of 11
        {"kind": "metric_score", "item": "d1", "system": "A", "metric": "n", "score": 2},   # 16 another metric: fine
        {"kind": "metric_score", "item": "d9", "system": "Z", "metric": "m", "score": 2},   # 17 both unknown
        {"kind": "metric_score", "item": "d9", "system": "Z", "metric": "m", "score": 3},   # 18 and repeated
        {"kind": "human_score", "item": "d2", "system": "B", "score": 3},                   # 19 no output of B on d2
    ]
    with pytest.raises(BundleError) as info:
        read_bundle(_bundle_bytes(rows))
    assert [str(p) for p in info.value.problems] == [
        "line 7: duplicate output for item 'd1', system 'A', sample 0 (first on line 4)",
        "line 9: output refers to unknown item 'zz'",
        "line 10: output refers to unknown item 'zz'",
        "line 10: duplicate output for item 'zz', system 'B', sample 0 (first on line 9)",
        "line 12: system 'B' has no output for item 'd2' (field 'system')",
        "line 13: refers to unknown item 'd3'",
        "line 14: system 'C' has no outputs (field 'system')",
        "line 15: duplicate metric_score for item 'd1', system 'A', metric 'm' (first on line 11)",
        "line 17: refers to unknown item 'd9'",
        "line 17: system 'Z' has no outputs (field 'system')",
        "line 18: refers to unknown item 'd9'",
        "line 18: system 'Z' has no outputs (field 'system')",
        "line 18: duplicate metric_score for item 'd9', system 'Z', metric 'm' (first on line 17)",
        "line 19: system 'B' has no output for item 'd2' (field 'system')",
    ]


def test_the_checks_of_many_outputs_and_scores_hold_no_key_per_row():
    """100 systems x 1,000 items (100,000 outputs, as many scores): the sets of tuple keys
    traced about 176 bytes per row (33.6 MB); the arrays about 67 (12.8 MB)."""
    systems, items = 100, 1000
    rows = [{"kind": "study", "name": "Many"}] + [{"kind": "item", "id": f"p{p}", "input": "q"} for p in range(items)]
    rows += [{"kind": "output", "item": f"p{p}", "system": f"S{s}", "text": "t"}
             for p in range(items) for s in range(systems)]
    rows += [{"kind": "metric_score", "item": f"p{p}", "system": f"S{s}", "metric": "m", "score": 0.5}
             for p in range(items) for s in range(systems)]
    bundle = parse_bundle_lines((n, json.dumps(r)) for n, r in enumerate(rows, 1))
    check = _Checker()
    tracemalloc.start()
    try:
        _check_references(bundle, check)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert check.total == 0
    assert peak / (2 * systems * items) < 100, f"{peak / 2**20:.1f} MB traced"
