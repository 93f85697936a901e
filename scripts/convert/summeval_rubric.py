"""SummEval as a three-criterion rubric study: ``summeval_rubric.jsonl.gz``.

    python scripts/convert/summeval_rubric.py [--source DIR] [--out data/bundles/summeval_rubric.jsonl.gz]

One HIT asks for relevance, coherence and consistency of the same two summaries
(docs/bundle-format.md, "Rubrics"), each criterion decided by its own protocol with its own
judge: GPT-3.5's head-to-head verdicts of that aspect in both presentation orders
(``scripts.convert.summeval.h2h_verdicts``), one metric per criterion (``gpt35_<aspect>``,
each row naming its judge, prompt and order), so the dashboard's Judges table shows each
criterion's judge position bias. The systems are five neighbours of the source's chain of
judged pairs (M23, M17, M12, M13, M15: 10 pairs, 4 of them judged by GPT-3.5); the items are
the 100 documents with their reference highlights; the texts are ``summary_truecased`` as in
``summeval_<criterion>.jsonl.gz``. No human labels: the study runs live (the experts' Likert
ratings stay in the per-criterion bundles). Validated by protocol.bundle.read_bundle.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.convert.bundle_io import write_bundle  # noqa: E402
from scripts.convert.summeval import (DEFAULT_SOURCE, H2H_PROMPT, PREPROCESSING_NOTE, document_items,  # noqa: E402
                                     h2h_verdicts_of, load)

SYSTEMS = ("M23", "M17", "M12", "M13", "M15")
# (aspect, question shown, strength scale, reason)
RUBRIC = (
    ("relevance", "Which summary keeps the article's important content (and leaves out minor details)?", True,
     "optional"),
    ("coherence", "Which summary is better organised: sentences that follow each other and build a whole?", False,
     "off"),
    ("consistency", "Which summary states only what the article supports (no invented facts, names or numbers)?",
     False, "required"),
)
INSTRUCTIONS = ("Read the news article, then the two summaries, and answer each of the three questions on "
                "its own: a summary can be the more relevant one and still the less faithful. Where you "
                "find one summary less faithful, name the unsupported claim in a few words." + PREPROCESSING_NOTE)


def build(data: dict) -> tuple[dict, list[dict]]:
    """The study line and the rows of the rubric bundle from ``summeval.load``'s data."""
    study = {"kind": "study", "name": "SummEval rubric: relevance, coherence, consistency",
             "criteria": [{"name": aspect, "label": label, "strength": strength, "reason": reason,
                           "metric": f"gpt35_{aspect}"} for aspect, label, strength, reason in RUBRIC],
             "instructions": INSTRUCTIONS, "batch_size": 10}
    rows = document_items(data["docs"])
    rows += [{"kind": "output", "item": s["doc_id"], "system": s["model_id"], "text": s["summary_truecased"].strip(),
              "sample": 0} for s in data["summaries"] if s["model_id"] in SYSTEMS]
    for aspect, *_ in RUBRIC:
        rows += [{"kind": "metric_preference", "item": v.doc, "first": v.system_a, "second": v.system_b,
                  "metric": f"gpt35_{aspect}", "preference": v.verdict, "judge": v.judge,
                  "prompt": H2H_PROMPT.format(aspect=aspect), "order": v.order}
                 for v in h2h_verdicts_of(data["h2h"], aspect) if v.system_a in SYSTEMS and v.system_b in SYSTEMS]
    return study, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bundles" / "summeval_rubric.jsonl.gz")
    args = ap.parse_args(argv)
    study, rows = build(load(args.source))
    print(json.dumps(write_bundle(args.out, study, rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
