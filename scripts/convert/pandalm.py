"""Convert the PandaLM human-annotated test set into the study bundle ``pandalm.jsonl.gz``.

    python scripts/convert/pandalm.py [--source DIR] [--out data/bundles/pandalm.jsonl.gz]

Source rows (999) each compare two models' responses to one prompt. Every row is kept, with
the exact texts its annotators saw:
- items: the distinct (instruction, input) prompts, id ``p<idx>`` where idx is the source
  ``idx`` of the prompt's first row; input = instruction, a blank line, then the input text
  (just the instruction when the input is empty). The source does not always show the same
  text for a model across the rows of a prompt (truncated or empty variants); such a prompt
  is split into one item per row, id ``p<idx>`` of that row, so no judgement is moved onto a
  text its annotators did not see;
- outputs: one response per (item, model), exactly as in the source. An empty response stays
  empty (54 rows show one: a model that generated nothing is real data, and the annotator
  screen shows it as "(empty response)"). JSON ``true`` responses are written as "True";
- human_preference: the three labels of each row (annotators h1, h2, h3) with first =
  model_1 (response1), second = model_2: label 1 -> +1, 2 -> -1, 0 (tie) -> 0;
- metric_preference ``gpt35`` (rows whose GPT-3.5 verdict is "garbage" are skipped) and
  ``pandalm7b``, same mapping.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.convert.bundle_io import write_bundle  # noqa: E402

DEFAULT_SOURCE = Path("/work/shared/data/pandalm_pairwise")
LABEL_TO_PREFERENCE = {1: 1, 2: -1, 0: 0}
INSTRUCTIONS = (
    "Read the instruction (and its input, if any), then the two responses written by AI "
    "assistants. Choose the response that better follows the instruction: it should do what "
    "was asked, be correct and relevant, and be clear and complete without unnecessary "
    "content. Do not prefer a response just because it is longer. Choose a tie if both are "
    "equally good or equally bad. A response shown as \"(empty response)\" is one where the "
    "assistant produced no text at all."
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
    by_prompt: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        by_prompt[(r["instruction"], r["input"])].append(r)
    notes: Counter = Counter()
    out: list[dict] = []
    row_item: dict[int, str] = {}
    for prompt_rows in by_prompt.values():
        texts: dict[str, set] = defaultdict(set)
        for r in prompt_rows:
            texts[r["model_1"]].add(response_text(r["response1"]))
            texts[r["model_2"]].add(response_text(r["response2"]))
        # One item per prompt when every model shows one text there; else one item per row.
        groups = [prompt_rows] if all(len(t) == 1 for t in texts.values()) else [[r] for r in prompt_rows]
        if len(groups) > 1:
            notes["prompts_split_into_one_item_per_row"] += 1
        for group in groups:
            item = f"p{group[0]['idx']}"
            out.append({"kind": "item", "id": item, "input": prompt_input(group[0])})
            outputs: dict[str, str] = {}
            for r in group:
                row_item[int(r["idx"])] = item
                outputs[r["model_1"]] = response_text(r["response1"])
                outputs[r["model_2"]] = response_text(r["response2"])
            for model, text in outputs.items():
                out.append({"kind": "output", "item": item, "system": model, "text": text, "sample": 0})
                notes["outputs_empty"] += not text.strip()
    for r in rows:
        item = row_item[int(r["idx"])]
        m1, m2 = r["model_1"], r["model_2"]
        notes["rows_kept"] += 1
        notes["rows_showing_an_empty_response"] += not (response_text(r["response1"]).strip()
                                                         and response_text(r["response2"]).strip())
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


def source_built(argv, description: str, out_name: str) -> tuple[Path, tuple[dict, list[dict], dict]]:
    """The command line of a PandaLM converter (``--source DIR``, ``--out FILE``, default
    data/bundles/``out_name``) read, and ``build`` of its source: (out, (study, rows, notes))."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bundles" / out_name)
    args = ap.parse_args(argv)
    with gzip.open(args.source / "pandalm_testset_v1.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return args.out, build(rows)


def main(argv=None) -> int:
    out_path, (study, out, notes) = source_built(argv, __doc__.splitlines()[0], "pandalm.jsonl.gz")
    summary = write_bundle(out_path, study, out)
    print(json.dumps({**summary, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
