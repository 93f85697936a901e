"""The judge's prompt, verdicts and cache keys (protocol.judge_prompts)."""
import json

import pytest

from protocol.judge_prompts import (
    MT_BENCH,
    MT_BENCH_CRITERION,
    call_key,
    canonical_verdict,
    combine_samples,
    default_prompt,
    parse_verdict,
    prompt_from_json,
    single_order,
)


def test_the_default_prompt_is_mt_bench_pairwise():
    messages = MT_BENCH.messages(question="What is 2+2?", answer_a="4", answer_b="5")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("Please act as an impartial judge and evaluate the quality of the "
                                             "responses provided by two AI assistants")
    assert messages[0]["content"].endswith('"[[A]]" if assistant A is better, "[[B]]" if assistant B is better, '
                                           'and "[[C]]" for a tie.')
    assert messages[1]["content"] == ("[User Question]\nWhat is 2+2?\n\n[The Start of Assistant A's Answer]\n4\n"
                                      "[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n5\n"
                                      "[The End of Assistant B's Answer]")
    assert default_prompt(rubric=False) is MT_BENCH and default_prompt(rubric=True) is MT_BENCH_CRITERION


def test_a_criterion_narrows_the_system_prompt_to_its_label():
    system = MT_BENCH_CRITERION.messages(question="q", answer_a="a", answer_b="b", criterion="Coherence")[0]["content"]
    assert "consider one criterion only: Coherence." in system
    assert "helpfulness, relevance" not in system
    assert MT_BENCH_CRITERION.digest != MT_BENCH.digest


def test_texts_are_filled_in_once():
    # An answer holding a placeholder is not filled again, and braces of any other kind stay.
    user = MT_BENCH.messages(question="{answer_b} {x}", answer_a="{question}", answer_b="B")[1]["content"]
    assert "[User Question]\n{answer_b} {x}\n" in user and "Answer]\n{question}\n[The End" in user


def test_verdicts_parse_as_mt_bench_says_and_unparsed_is_not_a_tie():
    assert parse_verdict("A is more helpful. [[A]]") == 1
    assert parse_verdict("[[B]]") == -1
    assert parse_verdict("Both are fine. [[C]]") == 0
    assert parse_verdict("I cannot decide.") is None
    assert parse_verdict("") is None and parse_verdict(None) is None
    assert parse_verdict("[A]") is None
    # The final verdict counts when the explanation names another one first.
    assert parse_verdict('The format asks "[[A]]" or "[[B]]"; final verdict: [[B]]') == -1


def test_orders_and_samples():
    assert canonical_verdict(1, "AB") == 1 and canonical_verdict(1, "BA") == -1
    assert canonical_verdict(0, "BA") == 0 and canonical_verdict(None, "AB") is None
    with pytest.raises(ValueError):
        canonical_verdict(1, "XY")
    assert combine_samples([1, 1, -1]) == 1 and combine_samples([1, -1]) == 0
    assert combine_samples([None, -1, None]) == -1 and combine_samples([None, None]) is None
    orders = [single_order(f"i{n}", "A", "B") for n in range(400)]
    assert set(orders) == {"AB", "BA"} and 160 < orders.count("AB") < 240
    assert single_order("i1", "A", "B") == single_order("i1", "A", "B")


def test_the_cache_key_changes_with_each_part():
    messages = MT_BENCH.messages(question="q", answer_a="a", answer_b="b")
    base = dict(model="m", messages=messages, order="AB", sample=0, temperature=0.0)
    key = call_key(**base)
    assert len(key) == 64 and key == call_key(**base)
    changed = [dict(base, model="m2"), dict(base, order="BA"), dict(base, sample=1), dict(base, temperature=0.7),
               dict(base, messages=MT_BENCH.messages(question="q", answer_a="b", answer_b="a"))]
    assert len({call_key(**c) for c in changed} | {key}) == 6


def test_a_prompt_of_ones_own():
    prompt = prompt_from_json(json.dumps({"name": "terse", "system_prompt": "Judge {criterion}.",
                                          "prompt_template": "{question}\nA: {answer_a}\nB: {answer_b}"}))
    assert prompt.label == "terse"
    assert prompt.messages(question="q", answer_a="x", answer_b="y", criterion="style")[0]["content"] == "Judge style."
    unnamed = prompt_from_json(json.dumps({"system_prompt": "", "prompt_template": "{answer_a} {answer_b}"}))
    assert unnamed.label == f"sha256:{unnamed.digest}" and len(unnamed.digest) == 12
    for bad, message in (("nope", "not JSON"), ("[]", "one JSON object"),
                         (json.dumps({"system_prompt": "s", "prompt_template": "{answer_a}"}), "{answer_b}"),
                         (json.dumps({"system_prompt": "s", "prompt_template": "{answer_a}{answer_b}", "x": 1}),
                          "unknown key 'x'")):
        with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
            prompt_from_json(bad)
