"""Metrics a study lacks, computed at import (issue 37): the cheap reference-based metrics of the
seed papers and a length baseline, as metric scores like imported ones.

``chrf``     sacrebleu's sentence chrF (character n-gram F-score, β = 2), 0–100
``bleu``     sacrebleu's sentence BLEU (exponential smoothing, effective order), 0–100
``rouge_l``  rouge-score's ROUGE-L F1 (longest common subsequence of words, Porter stemmer), 0–1
``length``   the answer's words (whitespace-separated): the baseline every judge should beat —
             a judge that agrees with humans no better than answer length is measuring length

The first three compare each output with its item's ``reference`` (a study without references
gets a clear refusal naming the items that lack one); ``length`` needs nothing. An output that
is a conversation is scored on its assistant turns. Pure functions over bundle rows (dicts),
no Django: ``with_computed_metrics(rows, ["chrf", "length"])`` returns the rows with the
``metric_score`` rows added.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from .bundle import BundleError, BundleProblem

REFERENCE_BASED = ("chrf", "bleu", "rouge_l")
COMPUTABLE = (*REFERENCE_BASED, "length")


@lru_cache(maxsize=1)
def _chrf():
    from sacrebleu.metrics import CHRF  # noqa: PLC0415 — loaded when a study asks for it

    return CHRF()


@lru_cache(maxsize=1)
def _bleu():
    from sacrebleu.metrics import BLEU  # noqa: PLC0415

    return BLEU(effective_order=True)


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer  # noqa: PLC0415

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def chrf(hypothesis: str, reference: str) -> float:
    """sacrebleu's sentence chrF (0–100).

    >>> round(chrf("the cat sat on the mat", "the cat sat on a mat"), 1)
    72.1
    """
    return _chrf().sentence_score(hypothesis, [reference]).score


def bleu(hypothesis: str, reference: str) -> float:
    """sacrebleu's sentence BLEU (0–100).

    >>> round(bleu("the cat sat on the mat", "the cat sat on the mat"), 1)
    100.0
    """
    return _bleu().sentence_score(hypothesis, [reference]).score


def rouge_l(hypothesis: str, reference: str) -> float:
    """ROUGE-L F-measure (0–1, stemmed): the longest common subsequence of words.

    >>> round(rouge_l("the cat sat on the mat", "the cat sat on a mat"), 3)
    0.833
    """
    return _rouge().score(reference, hypothesis)["rougeL"].fmeasure


def length(hypothesis: str, reference: str = "") -> float:
    """Words in the output: the baseline every metric should beat.

    >>> length("the cat sat")
    3.0
    """
    return float(len(hypothesis.split()))


SCORERS: dict[str, Callable[[str, str], float]] = {"chrf": chrf, "bleu": bleu, "rouge_l": rouge_l, "length": length}


def parse_compute(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"chrf,length"`` (or a list) as metric names; ValueError naming an unknown one.

    >>> parse_compute("chrf, Length,chrf")
    ('chrf', 'length')
    """
    names = [n.strip().lower() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in COMPUTABLE]
    if unknown:
        raise ValueError(f"cannot compute {unknown[0]!r}: the metrics computed at import are {', '.join(COMPUTABLE)}")
    return tuple(dict.fromkeys(names))


def _answer(text) -> str:
    if isinstance(text, list):
        return "\n\n".join(m.get("content", "") for m in text if m.get("role") == "assistant")
    return text or ""


def with_computed_metrics(rows: list[dict], names: Sequence[str]) -> list[dict]:
    """``rows`` (a bundle's, study line first) with a ``metric_score`` per output (its lowest
    sample, which ratings describe) for each metric in ``names``. BundleError when a name is
    taken by a metric the rows already have, or when a reference-based metric meets items
    without a reference (named)."""
    names = parse_compute(names)
    if not names:
        return rows
    taken = {r["metric"] for r in rows if r.get("kind") in ("metric_score", "metric_preference")}
    problems = [BundleProblem(0, f"cannot compute {n!r}: the study already has a metric of that name")
                for n in names if n in taken]
    references = {r["id"]: r.get("reference", "") for r in rows if r.get("kind") == "item"}
    lowest: dict[tuple[str, str], dict] = {}
    for r in rows:
        if r.get("kind") == "output":
            key = (r["item"], r["system"])
            if key not in lowest or r.get("sample", 0) < lowest[key].get("sample", 0):
                lowest[key] = r
    if any(n in REFERENCE_BASED for n in names):
        lacking = sorted({item for item, _ in lowest if not str(references.get(item, "")).strip()})
        if lacking:
            shown = ", ".join(repr(i) for i in lacking[:5]) + (f" and {len(lacking) - 5} more" if len(lacking) > 5 else "")
            wanted = ", ".join(n for n in names if n in REFERENCE_BASED)
            problems.append(BundleProblem(0, f"cannot compute {wanted}: they compare each answer with its item's "
                                             f"reference, and {len(lacking)} items have none ({shown}); give a "
                                             "reference column, or compute length only"))
    if problems:
        raise BundleError(problems)
    scores = [{"kind": "metric_score", "item": item, "system": system, "metric": name,
               "score": round(SCORERS[name](_answer(output["text"]), str(references.get(item, ""))), 6)}
              for name in names for (item, system), output in lowest.items()]
    return [*rows, *scores]
