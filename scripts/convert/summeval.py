"""Convert SummEval (/work/shared/data/summeval) into four study bundles, one per criterion.

    python scripts/convert/summeval.py [--source DIR] [--out-dir data/bundles]
                                       [--criteria relevance,coherence,...]

Each bundle ``summeval_<criterion>.jsonl.gz`` holds:
- items: the 100 documents (id = doc_id, input = untokenized article, reference = the first
  reference, i.e. the CNN/DM highlights);
- outputs: the 16 systems' summaries (``summary_truecased``, the only text present for all 16);
- metric_score: every automated metric in ``metric_scores`` under its given name, plus the
  GPT-4 reason-then-score LLM judge for the criterion (``llm_gpt4_rts``, 12 abstractive
  systems only; rows whose score could not be parsed are skipped);
- metric_preference ``llm_gpt35_h2h``: GPT-3.5 head-to-head verdicts for 11 adjacent system
  pairs. Each (doc, pair) was judged in both presentation orders; the verdict is re-derived
  from the raw response letter (A = the summary shown first, B = the other, C = tie) and the
  two orders are combined as sign(v1 + v2), so a position-biased disagreement becomes a tie;
- metric_preference ``llm_gpt35_h2h_orders``: the same verdicts, one row per presentation order,
  naming the judge (the source's ``evaluator``), its prompt (``H2H_PROMPT``) and the order it
  saw (``AB``: ``model_1`` shown first, ``BA``: ``model_2`` first), so the dashboard's Judges
  table shows the judge's position bias (docs/bundle-format.md, "Judge metadata");
- human_score: the three expert ratings (annotators e1, e2, e3) where they exist (M8-M23),
  else the expert average as one row with annotator ``expert_avg`` (M0, M1, M2, M5).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.convert.bundle_io import read_jsonl, write_bundle  # noqa: E402

DEFAULT_SOURCE = Path("/work/shared/data/summeval")
CRITERIA = ("coherence", "consistency", "fluency", "relevance")
POINTWISE_JUDGES = {("gpt-4-0314", "rts"): "llm_gpt4_rts"}
H2H_METRIC = "llm_gpt35_h2h"  # both orders combined as sign(v1 + v2)
H2H_ORDERS_METRIC = "llm_gpt35_h2h_orders"  # one row per order, with judge, prompt and order
H2H_FILE = "llm_judge_pairwise_h2h.jsonl.gz"
# The head-to-head prompt: DAMO-NLP-SG/LLM_summeval calls prepare_comp_prompt_mcq(aspect, summ1,
# summ2, article) of prompt_templates.py (commit 262414587fea7b17f152010fdaeff06e6ae6d380) at
# temperature 0, with the two summaries swapped for its "_toggle" results; answers A / B / C.
H2H_PROMPT = "LLM_summeval prompt_templates.py prepare_comp_prompt_mcq ({aspect}), temperature 0"

PREPROCESSING_NOTE = (
    " All summaries (and only the summaries) come from the SummEval release, which lower-cased "
    "and tokenized them (for example \"do n't\", spaces before punctuation, lower-case names); "
    "this affects every system alike, so please ignore it."
)
INSTRUCTIONS = {
    "relevance": (
        "Read the news article, then the two summaries. Choose the summary that better selects "
        "the important content of the article: it should contain the key facts and main points "
        "and leave out minor details, redundancy and excess information. Judge only what is "
        "covered, not grammar or style. Choose a tie only if both are equally good or bad at this."
    ),
    "coherence": (
        "Read the news article, then the two summaries. Choose the summary that is more "
        "coherent as a whole: well structured and well organized, with sentences that follow "
        "each other logically and build a clear body of information about the topic, rather "
        "than a heap of related but disconnected statements. Choose a tie only if both are "
        "equally coherent."
    ),
    "consistency": (
        "Read the news article, then the two summaries. Choose the summary that is more "
        "factually consistent with the article: every statement in it should be supported by "
        "the article. Penalize invented facts, wrong names, numbers or dates, and claims the "
        "article does not make (hallucinations). Choose a tie only if both are equally faithful."
    ),
    "fluency": (
        "Read the two summaries (the article is shown for context). Choose the summary whose "
        "individual sentences are of higher quality: grammatical, well formed and easy to read, "
        "without repetitions, fragments or garbled text. Choose a tie only if both are equally "
        "fluent."
    ),
}


class H2HVerdict(NamedTuple):
    """One head-to-head verdict of the judge in one presentation order.

    system_a / system_b: the source's ``model_1`` / ``model_2`` (one of the 11 adjacent pairs);
    shown_first: the system whose summary the judge saw as "Summary #1"; verdict: +1 system_a
    better, -1 system_b better, 0 tie (``h2h_vote``); judge: the source's ``evaluator``.
    """
    doc: str
    system_a: str
    system_b: str
    shown_first: str
    verdict: int
    judge: str

    @property
    def order(self) -> str:
        """"AB" when system_a was shown first, "BA" when system_b was (the bundle's ``order``)."""
        return "AB" if self.shown_first == self.system_a else "BA"


def h2h_verdicts_of(rows: Iterable[dict], aspect: str) -> list[H2HVerdict]:
    """The head-to-head verdicts of one aspect from the source rows, sorted by (doc, system_a,
    system_b, shown_first). Raises ValueError unless every (doc, pair) has exactly its two
    orders (each system shown first once)."""
    out = sorted(H2HVerdict(r["doc_id"], r["model_1"], r["model_2"], r["shown_first"], h2h_vote(r), r["evaluator"])
                 for r in rows if r["aspect"] == aspect)
    shown: dict = defaultdict(list)
    for v in out:
        shown[(v.doc, v.system_a, v.system_b)].append(v.shown_first)
    for (doc, a, b), firsts in shown.items():
        if sorted(firsts) != sorted((a, b)):
            raise ValueError(f"head-to-head {doc} {a}-{b} ({aspect}): shown first {firsts}, expected each of {a}, {b} once")
    if not out:
        raise ValueError(f"no head-to-head rows for aspect {aspect!r}")
    return out


def h2h_verdicts(path: str | Path, aspect: str) -> list[H2HVerdict]:
    """The judge's head-to-head verdicts of one aspect (``relevance``, ``coherence``,
    ``consistency``, ``fluency``) in both presentation orders, read from the source file
    (``/work/shared/data/summeval/llm_judge_pairwise_h2h.jsonl.gz``): 2 rows per document and
    pair, see ``H2HVerdict`` and ``h2h_verdicts_of``."""
    return h2h_verdicts_of(read_jsonl(path), aspect)


def h2h_vote(row: dict) -> int:
    """Verdict of one head-to-head row relative to model_1: +1, 0 or -1.

    Re-derived from the raw response: the source's ``llm_preferred`` maps responses such as
    "C: Both Summary #1 and Summary #2 are equally relevant." to the first-shown system
    instead of a tie, so it is not used.
    """
    letter = row["response"].strip()[:1].upper()
    if letter == "C":
        return 0
    if letter not in ("A", "B"):
        raise ValueError(f"unparseable head-to-head response {row['response']!r}")
    preferred = row["shown_first"] if letter == "A" else (
        row["model_2"] if row["shown_first"] == row["model_1"] else row["model_1"])
    return 1 if preferred == row["model_1"] else -1


def load(source: Path) -> dict:
    docs = list(read_jsonl(source / "documents.jsonl.gz"))
    summaries = list(read_jsonl(source / "summaries.jsonl.gz"))
    pointwise = list(read_jsonl(source / "llm_judge_pointwise.jsonl.gz"))
    h2h = list(read_jsonl(source / H2H_FILE))
    return {"docs": docs, "summaries": summaries, "pointwise": pointwise, "h2h": h2h}


def document_items(docs: Iterable[dict]) -> list[dict]:
    """The documents as item rows: id = doc_id, input = the article, reference = the first
    reference (the CNN/DM highlights) when there is one."""
    rows = []
    for d in docs:
        item = {"kind": "item", "id": d["doc_id"], "input": d["article"].strip()}
        refs = d.get("references") or []
        if refs and refs[0] and refs[0].strip():
            item["reference"] = refs[0].strip()
        rows.append(item)
    return rows


def build(data: dict, criterion: str) -> tuple[dict, list[dict], dict]:
    rows: list[dict] = document_items(data["docs"])
    notes: dict = defaultdict(int)
    for s in data["summaries"]:
        item, system = s["doc_id"], s["model_id"]
        rows.append({"kind": "output", "item": item, "system": system,
                     "text": s["summary_truecased"].strip(), "sample": 0})
        for metric, score in s["metric_scores"].items():
            rows.append({"kind": "metric_score", "item": item, "system": system,
                         "metric": metric, "score": float(score)})
        experts = s.get("expert_annotations")
        avg = float(s["expert_avg"][criterion])
        if experts:
            if len(experts) != 3:
                raise ValueError(f"{item}/{system}: {len(experts)} expert ratings")
            ratings = [float(e[criterion]) for e in experts]
            if abs(sum(ratings) / 3 - avg) > 1e-9:
                raise ValueError(f"{item}/{system}: expert mean {sum(ratings) / 3} != expert_avg {avg}")
            for i, r in enumerate(ratings, 1):
                rows.append({"kind": "human_score", "item": item, "system": system,
                             "score": r, "annotator": f"e{i}"})
            notes["human_rows_individual"] += 3
        else:
            rows.append({"kind": "human_score", "item": item, "system": system,
                         "score": avg, "annotator": "expert_avg"})
            notes["human_rows_expert_avg"] += 1
    for p in data["pointwise"]:
        name = POINTWISE_JUDGES.get((p["evaluator"], p["method"]))
        if name is None or p["aspect"] != criterion or int(p.get("repeat_index") or 0) != 0:
            continue
        if p["score_parsed"] is None:
            notes[f"{name}_skipped_unparsed"] += 1
            continue
        rows.append({"kind": "metric_score", "item": p["doc_id"], "system": p["model_id"],
                     "metric": name, "score": float(p["score_parsed"])})
    votes: dict = defaultdict(list)
    for v in h2h_verdicts_of(data["h2h"], criterion):
        votes[(v.doc, v.system_a, v.system_b)].append(v.verdict)
        rows.append({"kind": "metric_preference", "item": v.doc, "first": v.system_a, "second": v.system_b,
                     "metric": H2H_ORDERS_METRIC, "preference": v.verdict, "judge": v.judge,
                     "prompt": H2H_PROMPT.format(aspect=criterion), "order": v.order})
    for (item, m1, m2), vs in votes.items():
        total = sum(vs)
        pref = (total > 0) - (total < 0)
        notes[f"h2h_orders_agree_{vs[0] == vs[1]}"] += 1
        rows.append({"kind": "metric_preference", "item": item, "first": m1, "second": m2,
                     "metric": H2H_METRIC, "preference": pref})
    study = {"kind": "study", "name": f"SummEval {criterion}", "criterion": criterion,
             "instructions": INSTRUCTIONS[criterion] + PREPROCESSING_NOTE}
    return study, rows, dict(notes)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "data" / "bundles")
    ap.add_argument("--criteria", default=",".join(CRITERIA))
    args = ap.parse_args(argv)
    data = load(args.source)
    for criterion in args.criteria.split(","):
        study, rows, notes = build(data, criterion)
        summary = write_bundle(args.out_dir / f"summeval_{criterion}.jsonl.gz", study, rows)
        print(json.dumps({**summary, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
