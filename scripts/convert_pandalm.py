"""Convert the PandaLM human-annotated test set into the study bundle ``pandalm.jsonl.gz``.

    python scripts/convert_pandalm.py [--source DIR] [--out data/bundles/pandalm.jsonl.gz]

Source rows (999) each compare two models' responses to one prompt. The bundle has:
- items: the distinct (instruction, input) prompts, id ``p<idx>`` where idx is the source
  ``idx`` of the prompt's first row; input = instruction, a blank line, then the input text
  (just the instruction when the input is empty);
- outputs: one response per (prompt, model). The source does not always show the same text
  for a model across the rows of a prompt (truncated or empty variants), so the output is the
  canonical variant: non-empty before empty, then the most frequent, then the longest, then
  the earliest row. JSON ``true`` responses are written as the text "True". A model whose only
  response to a prompt is empty gets the placeholder text ``[empty response]``;
- human_preference: the three labels of each row (annotators h1, h2, h3) with first =
  model_1 (response1), second = model_2: label 1 -> +1, 2 -> -1, 0 (tie) -> 0;
- metric_preference ``gpt35`` (rows whose GPT-3.5 verdict is "garbage" are skipped) and
  ``pandalm7b``, same mapping.
Human and metric rows are kept only for source rows whose two responses are the canonical
texts, so every judgement in the bundle refers to the texts the bundle shows.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts._bundle_io import write_bundle  # noqa: E402

DEFAULT_SOURCE = Path("/work/shared/data/pandalm_pairwise")
EMPTY_PLACEHOLDER = "[empty response]"
LABEL_TO_PREFERENCE = {1: 1, 2: -1, 0: 0}
INSTRUCTIONS = (
    "Read the instruction (and its input, if any), then the two responses written by AI "
    "assistants. Choose the response that better follows the instruction: it should do what "
    "was asked, be correct and relevant, and be clear and complete without unnecessary "
    "content. Do not prefer a response just because it is longer. Choose a tie if both are "
    "equally good or equally bad. \"[empty response]\" means the assistant produced no text."
)


def response_text(value) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return "" if value is None else str(value)


def prompt_input(row: dict) -> str:
    instruction = (row["instruction"] or "").strip()
    extra = (row["input"] or "").strip()
    return f"{instruction}\n\n{extra}" if instruction and extra else (instruction or extra)


def build(rows: list[dict]) -> tuple[dict, list[dict], dict]:
    rows = sorted(rows, key=lambda r: int(r["idx"]))
    prompts: dict[tuple, str] = {}
    variants: dict[tuple, Counter] = defaultdict(Counter)  # (item, model) -> text -> count
    first_seen: dict[tuple, int] = {}
    for r in rows:
        key = (r["instruction"], r["input"])
        item = prompts.setdefault(key, f"p{r['idx']}")
        for model, field in ((r["model_1"], "response1"), (r["model_2"], "response2")):
            text = response_text(r[field])
            variants[(item, model)][text] += 1
            first_seen.setdefault((item, model, text), int(r["idx"]))
    canonical: dict[tuple, str] = {}
    notes: Counter = Counter()
    for (item, model), counts in variants.items():
        best = min(counts, key=lambda t: (not t.strip(), -counts[t], -len(t), first_seen[(item, model, t)]))
        canonical[(item, model)] = best
        if len(counts) > 1:
            notes["outputs_with_differing_texts"] += 1
        if not best.strip():
            notes["outputs_empty_placeholder"] += 1
    out: list[dict] = []
    inputs = {item: None for item in prompts.values()}
    for r in rows:
        item = prompts[(r["instruction"], r["input"])]
        if inputs[item] is None:
            inputs[item] = prompt_input(r)
    for item, text in inputs.items():
        out.append({"kind": "item", "id": item, "input": text})
    for (item, model), text in canonical.items():
        out.append({"kind": "output", "item": item, "system": model,
                    "text": text if text.strip() else EMPTY_PLACEHOLDER, "sample": 0})
    for r in rows:
        item = prompts[(r["instruction"], r["input"])]
        m1, m2 = r["model_1"], r["model_2"]
        if (response_text(r["response1"]) != canonical[(item, m1)]
                or response_text(r["response2"]) != canonical[(item, m2)]):
            notes["rows_dropped_noncanonical_text"] += 1
            continue
        notes["rows_kept"] += 1
        labels = r["human"]
        if len(labels) != 3:
            raise ValueError(f"row {r['idx']}: {len(labels)} human labels")
        for i, label in enumerate(labels, 1):
            out.append({"kind": "human_preference", "item": item, "first": m1, "second": m2,
                        "preference": LABEL_TO_PREFERENCE[int(label)], "annotator": f"h{i}"})
        for metric, field in (("gpt35", "gpt35_result"), ("pandalm7b", "pandalm7b_result")):
            value = r[field]
            if value is None:
                notes[f"{metric}_skipped_null"] += 1
                continue
            out.append({"kind": "metric_preference", "item": item, "first": m1, "second": m2,
                        "metric": metric, "preference": LABEL_TO_PREFERENCE[int(value)]})
    study = {"kind": "study", "name": "PandaLM instruction following",
             "criterion": "overall quality", "instructions": INSTRUCTIONS}
    return study, out, dict(sorted(notes.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bundles" / "pandalm.jsonl.gz")
    args = ap.parse_args(argv)
    with gzip.open(args.source / "pandalm_testset_v1.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    study, out, notes = build(rows)
    summary = write_bundle(args.out, study, out)
    print(json.dumps({**summary, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
