"""protocol.bundle: every problem kind is reported with its line; round trips are exact."""
import gzip
import json

import pytest

from protocol.bundle import MAX_PROMPT_KIND, BundleError, read_bundle, write_bundle


def lines(*rows) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


STUDY = {"kind": "study", "name": "Toy", "criterion": "relevance", "instructions": "Pick the better one."}
ITEM = {"kind": "item", "id": "d1", "input": "A source text."}
OUT_A = {"kind": "output", "item": "d1", "system": "A", "text": "Summary a."}
OUT_B = {"kind": "output", "item": "d1", "system": "B", "text": "Summary b."}
VALID = [STUDY, ITEM, OUT_A, OUT_B,
         {"kind": "metric_score", "item": "d1", "system": "A", "metric": "rouge", "score": 0.5},
         {"kind": "metric_score", "item": "d1", "system": "B", "metric": "rouge", "score": 0.25},
         {"kind": "metric_preference", "item": "d1", "first": "B", "second": "A", "metric": "judge",
          "preference": -1},
         {"kind": "human_score", "item": "d1", "system": "A", "score": 4, "annotator": "e1"},
         {"kind": "human_preference", "item": "d1", "first": "A", "second": "B", "preference": 0,
          "annotator": "w1"}]


def problems_of(data: bytes) -> list[str]:
    with pytest.raises(BundleError) as info:
        read_bundle(data)
    return [str(p) for p in info.value.problems]


def test_valid_bundle_reads_all_kinds():
    bundle = read_bundle(lines(*VALID))
    assert bundle.systems == ("A", "B")
    assert bundle.metrics == ("judge", "rouge")
    assert bundle.metric_kind("rouge") == "score" and bundle.metric_kind("judge") == "preference"
    assert bundle.line_count() == len(VALID)
    assert bundle.study["criterion"] == "relevance"


def test_a_bundle_may_list_more_systems_than_have_outputs_never_fewer():
    bundle = read_bundle(lines(*VALID))
    assert bundle.with_systems(["C", "B", "A"]).systems == ("A", "B", "C")
    assert bundle.systems == ("A", "B")  # a copy
    with pytest.raises(ValueError, match="not listed: B"):
        bundle.with_systems(["A", "C"])


@pytest.mark.parametrize(
    "bad_row, expected",
    [
        ({"kind": "nonsense"}, "line 5: unknown kind \"nonsense\""),
        ({**OUT_A, "colour": "red", "system": "C"}, "line 5: output: unknown field(s) colour"),
        ({"kind": "output", "item": "nope", "system": "C", "text": "x"}, "line 5: output refers to unknown item 'nope'"),
        ({"kind": "metric_score", "item": "d1", "system": "Z", "metric": "m", "score": 1},
         "line 5: system 'Z' has no outputs (field 'system')"),
        (dict(ITEM), "line 5: duplicate item id 'd1' (first on line 2)"),
        ('{"kind":"metric_score","item":"d1","system":"A","metric":"m","score":NaN}',
         "line 5: field 'score' is not a finite number (nan)"),
        ('{"kind":"human_score","item":"d1","system":"A","score":Infinity}',
         "line 5: field 'score' is not a finite number (inf)"),
        ({"kind": "human_preference", "item": "d1", "first": "A", "second": "B", "preference": 2},
         "line 5: field 'preference' must be -1, 0 or 1, got 2"),
        ({"kind": "human_preference", "item": "d1", "first": "A", "second": "B", "preference": 0.5},
         "line 5: field 'preference' must be -1, 0 or 1, got 0.5"),
        ({"kind": "output", "item": "d1", "system": "C", "text": None}, "line 5: field 'text' must be a string, got NoneType"),
        ({"kind": "item", "id": "d2", "input": "  "}, "line 5: field 'input' is empty"),
        ("{not json", "line 5: not valid JSON"),
        ({"kind": "item", "id": "d2"}, "line 5: item: missing field(s) input"),
        ({**OUT_A}, "line 5: duplicate output for item 'd1', system 'A', sample 0 (first on line 3)"),
        ({"kind": "metric_preference", "item": "d1", "first": "A", "second": "A", "metric": "j", "preference": 1},
         "line 5: first and second are the same system 'A'"),
        ({**STUDY}, "line 5: second study line (the first is on line 1)"),
    ],
)
def test_each_problem_is_named_with_its_line(bad_row, expected):
    found = problems_of(lines(STUDY, ITEM, OUT_A, OUT_B, bad_row))
    assert any(p.startswith(expected) for p in found), found


def test_every_problem_is_reported_not_just_the_first():
    found = problems_of(lines(STUDY, ITEM, OUT_A, {"kind": "x"}, "[1]", {**ITEM}))
    assert [p.split(":")[0] for p in found] == ["line 4", "line 5", "line 6"]


def test_missing_study_line_and_non_utf8_and_empty():
    assert "no study line" in problems_of(lines(ITEM, OUT_A))[0]
    assert "not UTF-8" in problems_of(b"\xff\xfe\x00")[0]
    assert "no study line" in problems_of(b"")[0]


def test_file_too_large():
    with pytest.raises(BundleError, match="file too large"):
        read_bundle(lines(*VALID), max_bytes=100)
    with pytest.raises(BundleError, match="file too large"):
        read_bundle(gzip.compress(lines(*VALID)), max_bytes=100)


def test_broken_gzip():
    data = gzip.compress(lines(*VALID))[:-20]
    with pytest.raises(BundleError, match="gzip"):
        read_bundle(data)


def test_metric_cannot_be_both_score_and_preference():
    found = problems_of(lines(STUDY, ITEM, OUT_A, OUT_B,
                              {"kind": "metric_score", "item": "d1", "system": "A", "metric": "m", "score": 1},
                              {"kind": "metric_preference", "item": "d1", "first": "A", "second": "B",
                               "metric": "m", "preference": 1}))
    assert "a metric is one or the other" in found[0]


def test_duplicate_preference_in_either_orientation():
    row = {"kind": "human_preference", "item": "d1", "first": "A", "second": "B", "preference": 1, "annotator": "w"}
    flipped = {**row, "first": "B", "second": "A", "preference": -1}
    found = problems_of(lines(STUDY, ITEM, OUT_A, OUT_B, row, flipped))
    assert found[0].startswith("line 6: duplicate human_preference")


@pytest.mark.parametrize("name", ["b.jsonl", "b.jsonl.gz"])
def test_write_read_round_trip(tmp_path, name):
    bundle = read_bundle(lines(*VALID))
    write_bundle(bundle, tmp_path / name)
    again = read_bundle(tmp_path / name)
    assert again == bundle
    if name.endswith(".gz"):
        assert (tmp_path / name).read_bytes()[:2] == b"\x1f\x8b"
        write_bundle(again, tmp_path / "second.jsonl.gz")
        assert (tmp_path / "second.jsonl.gz").read_bytes() == (tmp_path / name).read_bytes()


def test_study_settings_are_validated():
    found = problems_of(lines({**STUDY, "gamma": 1.5, "budget": -3}, ITEM, OUT_A))
    assert any("study setting 'gamma'" in p for p in found)
    assert any("study setting 'budget'" in p for p in found)
    ok = read_bundle(lines({**STUDY, "gamma": 0.1, "budget": 300, "batch_size": 10}, ITEM, OUT_A))
    assert ok.study["gamma"] == 0.1 and ok.study["budget"] == 300


def test_rating_of_a_missing_output_is_an_error():
    item2 = {"kind": "item", "id": "d2", "input": "Another text."}
    out = {"kind": "output", "item": "d2", "system": "A", "text": "x"}
    row = {"kind": "human_preference", "item": "d2", "first": "A", "second": "B", "preference": 1}
    found = problems_of(lines(STUDY, ITEM, OUT_A, OUT_B, item2, out, row))
    assert found == ["line 7: system 'B' has no output for item 'd2' (field 'second')"]


@pytest.mark.parametrize("text", ["", "  \n"])
def test_an_empty_output_is_data_that_can_be_judged_and_round_trips(tmp_path, text):
    empty = {**OUT_B, "text": text}
    rows = [STUDY, ITEM, OUT_A, empty,
            {"kind": "human_preference", "item": "d1", "first": "A", "second": "B", "preference": 1,
             "annotator": "w1"}]
    bundle = read_bundle(lines(*rows))
    assert [o.text for o in bundle.outputs] == ["Summary a.", text]
    assert bundle.human_preferences[0].second == "B"
    write_bundle(bundle, tmp_path / "b.jsonl")
    assert read_bundle(tmp_path / "b.jsonl") == bundle


def test_an_items_kind_of_prompt_reads_writes_back_and_is_checked(tmp_path):
    """``prompt_kind`` (docs/bundle-format.md): optional, every item or none, non-blank, at most
    MAX_PROMPT_KIND characters; kept through a write and a read."""
    second = {"kind": "item", "id": "d2", "input": "Another text.", "prompt_kind": "news"}
    bundle = read_bundle(lines(STUDY, {**ITEM, "prompt_kind": "code"}, second, OUT_A, OUT_B))
    assert [item.prompt_kind for item in bundle.items] == ["code", "news"]
    write_bundle(bundle, tmp_path / "kinds.jsonl")
    assert read_bundle(tmp_path / "kinds.jsonl") == bundle
    assert read_bundle(lines(STUDY, ITEM, OUT_A, OUT_B)).items[0].prompt_kind == ""
    for kind, expected in [("", "line 2: field 'prompt_kind' is empty"),
                           ("  ", "line 2: field 'prompt_kind' is empty"),
                           (None, "line 2: field 'prompt_kind' must be a string, got NoneType"),
                           (3, "line 2: field 'prompt_kind' must be a string, got int"),
                           ("x" * (MAX_PROMPT_KIND + 1), f"line 2: field 'prompt_kind' is {MAX_PROMPT_KIND + 1} "
                                                         f"characters long, at most {MAX_PROMPT_KIND}")]:
        found = problems_of(lines(STUDY, {**ITEM, "prompt_kind": kind}, second, OUT_A, OUT_B))
        assert any(p.startswith(expected) for p in found), found
    found = problems_of(lines(STUDY, ITEM, second, OUT_A, OUT_B))
    assert found == ["line 2: item 'd1' has no 'prompt_kind' while item 'd2' (line 3) has one: every item names "
                     "its kind of prompt or none does"]


def test_names_repeated_on_many_rows_are_one_string_each():
    # 800,000 rows at 200 systems x 2,000 items name 2,200 items and systems: one copy per row was
    # about 100 MB of an import's peak memory
    bundle = read_bundle(lines(
        {"kind": "study", "name": "s"}, {"kind": "item", "id": "d1", "input": "x"},
        *({"kind": "output", "item": "d1", "system": s, "text": "t"} for s in "AB"),
        *({"kind": "metric_score", "item": "d1", "system": s, "metric": "m", "score": 1} for s in "AB"),
        *({"kind": "metric_preference", "item": "d1", "first": "A", "second": "B", "metric": "j", "preference": 1},)))
    a_output, b_output = bundle.outputs
    a_score, b_score = bundle.metric_scores
    preference, = bundle.metric_preferences
    assert bundle.items[0].id is a_output.item is b_output.item is a_score.item is preference.item
    assert a_output.system is a_score.system is preference.first and b_output.system is b_score.system is preference.second
    assert a_score.metric is b_score.metric and preference.metric == "j"
