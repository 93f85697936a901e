"""Conversations, the text format and judge metadata in study bundles (issue 23, step a)."""
import json

import pytest

from protocol.bundle import BundleError, BundleLimits, bundle_rows, messages_text, read_bundle
from protocol.preferences import metric_labels
from tests.builders.bundles import CHAT_ROWS, bundle_bytes


def test_conversation_bundle_reads_and_writes_back_identically():
    bundle = read_bundle(bundle_bytes(CHAT_ROWS))
    assert bundle.study["text_format"] == "markdown"
    item = bundle.items[0]
    assert item.messages == (("system", "Be brief."), ("user", "List *two* primes."))
    assert item.input == "system: Be brief.\n\nuser: List *two* primes."
    assert bundle.outputs[1].messages[2] == ("assistant", "5")
    assert bundle.outputs[0].text == messages_text(bundle.outputs[0].messages)
    rows = list(bundle_rows(bundle))
    assert rows[1]["input"] == CHAT_ROWS[1]["input"] and rows[3]["text"] == CHAT_ROWS[3]["text"]
    assert rows[4] == {**CHAT_ROWS[4]} and rows[5] == {**CHAT_ROWS[5]}
    assert read_bundle(bundle_bytes(rows)) == bundle


def test_both_orders_of_a_judge_combine_to_a_tie_when_they_disagree():
    # A shown first: A wins; B shown first: B wins -> the judge prefers the first position.
    agreeing = [*CHAT_ROWS[:5], {**CHAT_ROWS[5], "preference": -1}]
    labels = metric_labels(read_bundle(bundle_bytes(agreeing)), "gpt35")
    assert 0 not in _values(labels[("A", "B")]) and 1 in _values(labels[("A", "B")])
    disagreeing = metric_labels(read_bundle(bundle_bytes(CHAT_ROWS)), "gpt35")
    assert _values(disagreeing[("A", "B")]) == [0]


def _values(labels) -> list[int]:
    return sorted(int(v) for v in labels.per_item().values)


BAD = {
    "role not allowed": ({"kind": "item", "id": "c2", "input": [{"role": "<script>", "content": "x"}]},
                         "field 'input' message 1: role must be one of system, user, assistant"),
    "content not a string": ({"kind": "item", "id": "c2", "input": [{"role": "user", "content": 3}]},
                             "field 'input' message 1: content must be a string"),
    "extra key": ({"kind": "item", "id": "c2", "input": [{"role": "user", "content": "x", "name": "y"}]},
                  "must be an object with exactly 'role' and 'content'"),
    "empty conversation": ({"kind": "item", "id": "c2", "input": []}, "field 'input' is an empty conversation"),
    "blank conversation": ({"kind": "item", "id": "c2", "input": [{"role": "user", "content": " "}]},
                           "conversation with no content"),
    "output message not an object": ({"kind": "output", "item": "c1", "system": "C", "text": ["hi"]},
                                     "field 'text' message 1: must be an object"),
    "bad order": ({**CHAT_ROWS[4], "order": "first"}, "field 'order' must be one of \"AB\", \"BA\""),
    "same order twice": ({**CHAT_ROWS[4], "preference": 0}, "duplicate metric_preference"),
    "empty judge": ({**CHAT_ROWS[4], "judge": " ", "order": "BA"}, "field 'judge' is empty"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_conversation_and_judge_rows_name_their_line(case):
    row, message = BAD[case]
    with pytest.raises(BundleError) as exc:
        read_bundle(bundle_bytes([*CHAT_ROWS, row]))
    assert f"line {len(CHAT_ROWS) + 1}: " in str(exc.value) and message in str(exc.value)


def test_text_format_must_be_known():
    with pytest.raises(BundleError, match="line 1: study setting 'text_format' must be one of"):
        read_bundle(bundle_bytes([{**CHAT_ROWS[0], "text_format": "html"}, *CHAT_ROWS[1:]]))


def test_conversations_stay_within_the_nesting_limit_and_deeper_rows_are_refused():
    # A conversation is three levels deep (row, list, message); the streaming limit still holds.
    read_bundle(bundle_bytes(CHAT_ROWS), limits=BundleLimits(max_depth=3))
    deep = {"kind": "item", "id": "c2", "input": [{"role": "user", "content": "x"}]}
    raw = bundle_bytes(CHAT_ROWS[:1]) + (json.dumps(deep).replace('"x"', '[[[[[["x"]]]]]]') + "\n").encode()
    with pytest.raises(BundleError, match="line 2: JSON nested deeper than 8"):
        read_bundle(raw)
