"""The PandaLM test set as a one-turn chat study: ``pandalm_chat.jsonl.gz``.

    python scripts/convert/pandalm_chat.py [--source DIR] [--out data/bundles/pandalm_chat.jsonl.gz]

The same rows as ``pandalm.jsonl.gz`` (scripts/convert/pandalm.py builds them: items, outputs,
the GPT-3.5 and PandaLM-7B verdicts) but without its human labels, written as a chat study to
run live (docs/bundle-format.md, "Conversations and markdown"): with PandaLM's three labels per
comparison imported, every pair is settled before anyone annotates and the study serves no HIT;
the labels stay in ``pandalm.jsonl.gz``, the study to compare with.
- each item's input is one ``user`` message (the instruction, a blank line, its input);
- each output is one ``assistant`` message, its text exactly as in the source (empty stays empty);
- the study line sets ``text_format: markdown`` (the answers carry lists and code);
- each verdict names its judge (``gpt-3.5-turbo``, ``PandaLM-7B``), its prompt (the judge's
  file in the PandaLM repository) and its order ``AB``: the source gives each judge one
  verdict per comparison with response1 (model_1, the row's ``first``) shown first.
The bundle is validated with protocol.bundle.read_bundle before it is written.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from protocol.bundle import read_bundle, write_bundle_rows  # noqa: E402
from scripts.convert.pandalm import INSTRUCTIONS, source_built  # noqa: E402

JUDGES = {
    "gpt35": ("gpt-3.5-turbo", "PandaLM data/gpt-3.5-turbo-testset-v1.json"),
    "pandalm7b": ("PandaLM-7B", "PandaLM data/pandalm-7b-testset-v1.json"),
}


def chat_rows(study: dict, rows: list[dict]) -> list[dict]:
    out = [{**study, "name": "PandaLM chat (one turn)", "text_format": "markdown",
            "instructions": INSTRUCTIONS + " Answers are shown as formatted text (lists, tables, "
                                           "code); \"Raw text\" under an answer shows its source."}]
    for row in rows:
        if row["kind"] == "item":
            row = {**row, "input": [{"role": "user", "content": row["input"]}]}
        elif row["kind"] == "output":
            row = {**row, "text": [{"role": "assistant", "content": row["text"]}]}
        elif row["kind"] == "human_preference":
            continue  # a live study: its annotators give the human labels
        elif row["kind"] == "metric_preference":
            judge, prompt = JUDGES[row["metric"]]
            row = {**row, "judge": judge, "prompt": prompt, "order": "AB"}
        out.append(row)
    return out


def main(argv=None) -> int:
    out_path, (study, rows, notes) = source_built(argv, __doc__.splitlines()[0], "pandalm_chat.jsonl.gz")
    out = chat_rows(study, rows)
    read_bundle("\n".join(json.dumps(r) for r in out).encode())  # refuse to write a bad bundle
    lines = write_bundle_rows(out, out_path)
    print(json.dumps({"lines": lines, "out": str(out_path), "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
