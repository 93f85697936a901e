"""The study bundles shipped in data/bundles/ parse with protocol.bundle and have the expected counts.

Regeneration from /work/shared/data (byte-identical output) is checked for the cheap bundles
when that source directory exists.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from protocol.bundle import read_bundle

BUNDLES = Path(__file__).resolve().parent.parent / "data" / "bundles"
SHARED = Path("/work/shared/data")

SUMMEVAL_SYSTEMS = {"M0", "M1", "M2", "M5", "M8", "M9", "M10", "M11", "M12", "M13", "M14", "M15",
                    "M17", "M20", "M22", "M23"}
SUMMEVAL_METRICS = {"bert_score_f", "mover_score", "bart_score_cnn_src_hypo", "prism_src_hypo",
                    "rouge1_f", "rouge2_f", "rougel_f", "CTC_D_CNNDM_Consistency",
                    "CTC_D_XSUM_Consistency", "CTC_E_RoBERTa_Relevance", "CTC_D_CNNDM_Relevance",
                    "CTC_D_XSUM_Relevance", "llm_gpt4_rts", "llm_gpt35_h2h",
                    "llm_gpt35_h2h_orders"}
# llm_gpt4_rts rows: 1,200 minus the responses whose score could not be parsed.
GPT4_RTS_ROWS = {"coherence": 1192, "consistency": 1189, "fluency": 1154, "relevance": 1198}

# file -> (items, systems, rows by kind)
EXPECTED = {
    **{
        f"summeval_{c}.jsonl.gz": (100, 16, {"output": 1600, "metric_score": 12 * 1600 + n,
                                             "metric_preference": 3 * 1100, "human_score": 4000,
                                             "human_preference": 0})
        for c, n in GPT4_RTS_ROWS.items()
    },
    "pandalm.jsonl.gz": (222, 5, {"output": 865, "metric_score": 0, "metric_preference": 1973,
                                  "human_score": 0, "human_preference": 2997}),
    "pandalm_chat.jsonl.gz": (222, 5, {"output": 865, "metric_score": 0, "metric_preference": 1973,
                                       "human_score": 0, "human_preference": 0}),  # a live study
    # a live rubric study: GPT-3.5's verdicts of 4 judged pairs x 100 documents x 2 orders per criterion
    "summeval_rubric.jsonl.gz": (100, 5, {"output": 500, "metric_score": 0, "metric_preference": 3 * 4 * 100 * 2,
                                          "human_score": 0, "human_preference": 0}),
    "wmt21_ende.jsonl.gz": (527, 8, {"output": 4216, "metric_score": 8432, "metric_preference": 0,
                                     "human_score": 4216, "human_preference": 0}),
}


def _counts(b) -> dict:
    return {"output": len(b.outputs), "metric_score": len(b.metric_scores),
            "metric_preference": len(b.metric_preferences), "human_score": len(b.human_scores),
            "human_preference": len(b.human_preferences)}


@pytest.fixture(scope="module")
def bundles():
    return {name: read_bundle(BUNDLES / name) for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundle_parses_with_expected_counts(bundles, name):
    b = bundles[name]
    items, systems, by_kind = EXPECTED[name]
    assert len(b.items) == items
    assert len(b.systems) == systems
    assert _counts(b) == by_kind
    assert b.line_count() == 1 + items + sum(by_kind.values())
    assert b.study["name"] and b.study["instructions"]


def test_the_rubric_bundle_has_a_judge_per_criterion_in_both_orders(bundles):
    b = bundles["summeval_rubric.jsonl.gz"]
    assert [c["name"] for c in b.study["criteria"]] == ["relevance", "coherence", "consistency"]
    for c in b.study["criteria"]:
        rows = [r for r in b.metric_preferences if r.metric == c["metric"]]
        assert {r.order for r in rows} == {"AB", "BA"} and {r.judge for r in rows} == {"gpt-3.5-turbo-0301"}
        assert len({(r.item, r.first, r.second) for r in rows}) == len(rows) // 2


def test_bundles_fit_the_size_budget():
    total = sum((BUNDLES / name).stat().st_size for name in EXPECTED)
    assert total < 15 * 1024 * 1024


@pytest.mark.parametrize("criterion", sorted(GPT4_RTS_ROWS))
def test_summeval_content(bundles, criterion):
    b = bundles[f"summeval_{criterion}.jsonl.gz"]
    assert b.study["criterion"] == criterion
    assert set(b.systems) == SUMMEVAL_SYSTEMS
    assert set(b.metrics) == SUMMEVAL_METRICS
    assert all(i.reference for i in b.items)
    annotators = Counter(r.annotator for r in b.human_scores)
    assert annotators == {"e1": 1200, "e2": 1200, "e3": 1200, "expert_avg": 400}
    assert {r.system for r in b.human_scores if r.annotator == "expert_avg"} == {"M0", "M1", "M2", "M5"}
    assert all(1 <= r.score <= 5 for r in b.human_scores)


@pytest.mark.parametrize("criterion", sorted(GPT4_RTS_ROWS))
def test_summeval_carries_both_orders_of_the_gpt35_judge(bundles, criterion):
    """llm_gpt35_h2h_orders: each of the 1,100 comparisons once per order, naming the judge, its
    prompt and the order; llm_gpt35_h2h (unchanged) is their sign(v1 + v2)."""
    b = bundles[f"summeval_{criterion}.jsonl.gz"]
    orders = [r for r in b.metric_preferences if r.metric == "llm_gpt35_h2h_orders"]
    assert {(r.judge, r.prompt) for r in orders} == {
        ("gpt-3.5-turbo-0301", f"LLM_summeval prompt_templates.py prepare_comp_prompt_mcq ({criterion}), temperature 0")}
    by_comparison = {}
    for r in orders:
        by_comparison.setdefault((r.item, r.first, r.second), {})[r.order] = r.preference
    assert len(by_comparison) == 1100 and all(set(v) == {"AB", "BA"} for v in by_comparison.values())
    combined = {(r.item, r.first, r.second): r.preference for r in b.metric_preferences if r.metric == "llm_gpt35_h2h"}
    assert combined == {key: (v["AB"] + v["BA"] > 0) - (v["AB"] + v["BA"] < 0) for key, v in by_comparison.items()}


def test_pandalm_orientation(bundles):
    b = bundles["pandalm.jsonl.gz"]
    # Source idx 0: bloom-7b (response1) vs llama-7b (response2), human labels [2, 2, 2].
    rows = [(r.first, r.second, r.preference, r.annotator) for r in b.human_preferences if r.item == "p0"
            and {r.first, r.second} == {"bloom-7b", "llama-7b"}]
    assert sorted(rows) == [("bloom-7b", "llama-7b", -1, f"h{i}") for i in (1, 2, 3)]
    assert Counter(r.metric for r in b.metric_preferences) == {"gpt35": 974, "pandalm7b": 999}


def test_pandalm_keeps_every_row_and_its_empty_responses(bundles):
    b = bundles["pandalm.jsonl.gz"]
    rows = {(r.item, r.first, r.second) for r in b.human_preferences}
    assert len(rows) == 999 and len(b.human_preferences) == 3 * 999
    empty = {(o.item, o.system) for o in b.outputs if not o.text.strip()}
    assert all(o.text == "" for o in b.outputs if (o.item, o.system) in empty)
    assert len(empty) == 48
    assert sum((item, first) in empty or (item, second) in empty for item, first, second in rows) == 54
    # A prompt whose responses differ between rows is split into one item per row (p16 has 10 rows).
    p16 = [i for i in b.items if i.input == next(j.input for j in b.items if j.id == "p16")]
    assert len(p16) == 10 and all(len({o.system for o in b.outputs if o.item == i.id}) == 2 for i in p16)


def test_pandalm_chat_is_pandalm_as_one_turn_chats_with_named_judges(bundles):
    chat, plain = bundles["pandalm_chat.jsonl.gz"], bundles["pandalm.jsonl.gz"]
    assert chat.study["text_format"] == "markdown"
    assert {(i.id, i.messages) for i in chat.items} == {(i.id, (("user", i.input),)) for i in plain.items}
    assert sorted((o.item, o.system, o.messages) for o in chat.outputs) == sorted(
        (o.item, o.system, (("assistant", o.text),)) for o in plain.outputs)
    assert {(r.metric, r.judge, r.order) for r in chat.metric_preferences} == {
        ("gpt35", "gpt-3.5-turbo", "AB"), ("pandalm7b", "PandaLM-7B", "AB")}
    assert sorted((r.item, r.first, r.second, r.metric, r.preference) for r in chat.metric_preferences) == sorted(
        (r.item, r.first, r.second, r.metric, r.preference) for r in plain.metric_preferences)


def test_wmt21_every_item_has_all_systems(bundles):
    b = bundles["wmt21_ende.jsonl.gz"]
    per_item = Counter(o.item for o in b.outputs)
    assert set(per_item.values()) == {8}
    assert all(i.reference for i in b.items)
    assert set(b.metrics) == {"sentence_bleu", "sentence_chrf"}
    assert all(r.score <= 0 for r in b.human_scores)  # negated MQM: 0 = no errors


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared source data not available")
@pytest.mark.parametrize("script,name,source", [
    ("pandalm", "pandalm.jsonl.gz", "pandalm_pairwise"),
    ("pandalm_chat", "pandalm_chat.jsonl.gz", "pandalm_pairwise"),
    ("wmt21", "wmt21_ende.jsonl.gz", "wmt21_mqm"),
    ("summeval", "summeval_relevance.jsonl.gz", "summeval"),
    ("summeval_rubric", "summeval_rubric.jsonl.gz", "summeval"),
])
def test_regeneration_is_byte_identical(tmp_path, script, name, source):
    import importlib

    module = importlib.import_module(f"scripts.convert.{script}")
    out = tmp_path / name
    if script == "summeval":  # one bundle per criterion, into a folder
        module.main(["--source", str(SHARED / source), "--out-dir", str(tmp_path), "--criteria", "relevance"])
    else:
        module.main(["--source", str(SHARED / source), "--out", str(out)])
    assert out.read_bytes() == (BUNDLES / name).read_bytes()
