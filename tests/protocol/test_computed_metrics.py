"""Metrics computed at import (protocol/computed_metrics.py) against the libraries' own corpus
scorers and hand-computed values."""
import pytest
import sacrebleu
from rouge_score import rouge_scorer

from protocol import computed_metrics as cm
from protocol.bundle import BundleError, read_bundle
from protocol.tables import rows_bytes

ROWS = [{"kind": "study", "name": "mt"},
        {"kind": "item", "id": "s1", "input": "Der Hund bellt.", "reference": "The dog barks."},
        {"kind": "item", "id": "s2", "input": "Die Katze schläft.", "reference": "The cat is sleeping."},
        {"kind": "output", "item": "s1", "system": "A", "text": "The dog barks."},
        {"kind": "output", "item": "s1", "system": "B", "text": "A dog is barking loudly."},
        {"kind": "output", "item": "s2", "system": "A", "text": "The cat sleeps."},
        {"kind": "output", "item": "s2", "system": "B", "text": [{"role": "assistant", "content": "The cat is sleeping."}]}]


def scores(rows, metric):
    return {(r["item"], r["system"]): r["score"] for r in rows if r.get("metric") == metric}


def test_chrf_bleu_and_rouge_l_equal_the_libraries_on_each_sentence():
    rows = cm.with_computed_metrics(ROWS, "chrf,bleu,rouge_l,length")
    chrf, bleu, rouge, length = (scores(rows, m) for m in ("chrf", "bleu", "rouge_l", "length"))
    # A one-sentence corpus score of sacrebleu is the sentence's score (independent entry point).
    assert chrf[("s1", "B")] == pytest.approx(sacrebleu.corpus_chrf(["A dog is barking loudly."], [["The dog barks."]]).score, abs=1e-6)
    assert chrf[("s1", "A")] == pytest.approx(100.0) and bleu[("s1", "A")] == pytest.approx(100.0)
    assert bleu[("s2", "B")] == pytest.approx(100.0)  # a conversation is scored on its assistant turns
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    assert rouge[("s2", "A")] == pytest.approx(scorer.score("The cat is sleeping.", "The cat sleeps.")["rougeL"].fmeasure)
    # Hand-computed: LCS of "the cat sleep" and "the cat is sleep" (stemmed) is 3 words: P = 1, R = 3/4.
    assert rouge[("s2", "A")] == pytest.approx(2 * 1 * 0.75 / 1.75, abs=1e-6)
    assert length == {("s1", "A"): 3, ("s1", "B"): 5, ("s2", "A"): 3, ("s2", "B"): 4}
    bundle = read_bundle(rows_bytes(rows))
    assert bundle.metrics == ("bleu", "chrf", "length", "rouge_l") and len(bundle.metric_scores) == 16


def test_reference_based_metrics_need_references_and_names_stay_unique():
    rows = [r for r in ROWS if r["kind"] != "item"] + [
        {"kind": "item", "id": "s1", "input": "x"}, {"kind": "item", "id": "s2", "input": "y", "reference": "z"}]
    with pytest.raises(BundleError, match=r"cannot compute chrf: .* and 1 items have none \('s1'\)"):
        cm.with_computed_metrics(rows, ["chrf"])
    assert len(scores(cm.with_computed_metrics(rows, ["length"]), "length")) == 4
    with pytest.raises(BundleError, match="already has a metric of that name"):
        cm.with_computed_metrics(cm.with_computed_metrics(ROWS, ["length"]), ["length"])
    with pytest.raises(ValueError, match="cannot compute 'bertscore'"):
        cm.parse_compute("chrf,bertscore")
