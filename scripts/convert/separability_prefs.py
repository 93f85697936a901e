"""Convert the separability paper's human preference CSVs into one evalapp study bundle.

    python scripts/convert/separability_prefs.py [--source DIR] [--out data/bundles/separability_prefs.jsonl.gz]

Source: shared/data/separability_prefs (dill-lab/separability, MIT; see its PROVENANCE.md).
Each CSV row is one MTurk worker's rating set on one source document: 5 summary pairs, pair j
showing sample j of each model in a random slot order.

Layout of the bundle (documented in data/bundles/PROVENANCE-separability.md):
- item    one per (file, source document): id "<dataset>-<pair>-<instance>", e.g.
          "cnndm-flan-gpt-07"; the documents were not released, so ``input`` is a placeholder;
- output  the 5 generations of each of the file's two models as samples 0..4 (sample j-1 is
          what pair j showed);
- human_preference  one row per judgement, in canonical order (first < second by name):
          +1 = first system preferred. ``Answer.pref`` is positional: +1 = the model2_summary
          slot won, -1 = the model1_summary slot won, and ``Input.id`` = 1 puts the file's first
          model in slot 1 (docs/formulas.md §7). The bundle format allows one preference per (item, pair,
          annotator), so the annotator is "<rater>@s<sample>": the rater's 5 judgements of an
          item are its rating set, and the suffix says which sample pair was shown.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.bundle import read_bundle, write_bundle_rows  # noqa: E402

SOURCE = ROOT.parent / "shared" / "data" / "separability_prefs"
if not SOURCE.exists():
    SOURCE = Path("/work/shared/data/separability_prefs")
OUT = ROOT / "data" / "bundles" / "separability_prefs.jsonl.gz"

# file -> (model A = Input.id 1, model B = Input.id 2, dataset tag, pair tag)
FILES = {
    "flan-t5-xxl_gpt-3.5_turbo_instruct_cnn_dm_pref_data.csv.gz": ("flan-t5-xxl", "gpt-3.5-turbo-instruct", "cnndm", "flan-gpt"),
    "mistral-7b_vicuna-7b_samsum_pref_data.csv.gz": ("mistral-7b", "vicuna-7b", "samsum", "mistral-vicuna"),
    "vicuna-7b_gpt-3.5-turbo-instruct_cnn_dm_pref_data.csv.gz": ("vicuna-7b", "gpt-3.5-turbo-instruct", "cnndm", "vicuna-gpt"),
    "vicuna-7b_gpt-3.5-turbo-instruct_samsum_pref_data.csv.gz": ("vicuna-7b", "gpt-3.5-turbo-instruct", "samsum", "vicuna-gpt"),
}
DATASET_NAMES = {"cnndm": "CNN/DailyMail article", "samsum": "SAMSum dialogue"}
PAIRS = 5

STUDY = {
    "kind": "study",
    "name": "Separability human preferences (Ghosh et al. 2024, summarisation)",
    "criterion": "overall preference between two summaries",
    "instructions": (
        "Read the source text and the two summaries, then select the summary you prefer, "
        "or 'no preference'. (Replayed from the separability paper's MTurk study; the source "
        "documents were not released.)"
    ),
}


def rater_and_sample(annotator: str) -> tuple[str, int]:
    """Split a converted annotator id "<rater>@s<sample>" into (rater, sample)."""
    rater, _, sample = annotator.rpartition("@s")
    if not rater or not sample.isdigit():
        raise ValueError(f"annotator {annotator!r} is not of the form '<rater>@s<sample>'")
    return rater, int(sample)


def convert_file(path: Path, model_a: str, model_b: str, dataset: str, pair: str):
    """Rows of one CSV as (item rows, output rows, human_preference rows)."""
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(io.StringIO(handle.read())))
    first, second = sorted((model_a, model_b))
    instances: dict[tuple, int] = {}
    items, outputs, preferences = [], [], []
    raters_seen: set[tuple[str, str]] = set()
    for number, record in enumerate(records, start=2):  # line 1 is the header
        texts = {model_a: [], model_b: []}
        labels = []
        for j in range(1, PAIRS + 1):
            slot1, slot2 = record[f"Input.model1_summary{j}"], record[f"Input.model2_summary{j}"]
            slot1_model = {"1": model_a, "2": model_b}[record[f"Input.id{j}"].strip()]
            slot2_model = model_b if slot1_model == model_a else model_a
            texts[slot1_model].append(slot1)
            texts[slot2_model].append(slot2)
            pref = int(record[f"Answer.pref{j}"])
            winner = {1: slot2_model, -1: slot1_model, 0: None}[pref]
            labels.append(0 if winner is None else (1 if winner == first else -1))
        key = (tuple(texts[model_a]), tuple(texts[model_b]))
        if key not in instances:
            instances[key] = len(instances)
            item = f"{dataset}-{pair}-{instances[key]:02d}"
            items.append({
                "kind": "item",
                "id": item,
                "input": f"(source document not released; {DATASET_NAMES[dataset]}, "
                         f"{model_a} vs {model_b} study, instance {instances[key]})",
            })
            for model in (model_a, model_b):
                for sample, text in enumerate(texts[model]):
                    outputs.append({"kind": "output", "item": item, "system": model, "text": text, "sample": sample})
        item = f"{dataset}-{pair}-{instances[key]:02d}"
        rater = f"{dataset}-{pair}-w{record['WorkerId'].strip()}"
        if (item, rater) in raters_seen:
            raise ValueError(f"{path.name} line {number}: worker rated {item} twice")
        raters_seen.add((item, rater))
        for sample, label in enumerate(labels):
            preferences.append({
                "kind": "human_preference", "item": item, "first": first, "second": second,
                "preference": label, "annotator": f"{rater}@s{sample}",
            })
    return items, outputs, preferences


def convert(source: Path = SOURCE, out: Path = OUT) -> Path:
    items, outputs, preferences = [], [], []
    for name, (model_a, model_b, dataset, pair) in FILES.items():
        i, o, p = convert_file(source / name, model_a, model_b, dataset, pair)
        items += i; outputs += o; preferences += p
    write_bundle_rows([STUDY, *items, *outputs, *preferences], out)
    read_bundle(out)  # raises BundleError listing every problem
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    path = convert(args.source, args.out)
    bundle = read_bundle(path)
    print(f"wrote {path}: {len(bundle.items)} items, {len(bundle.outputs)} outputs, "
          f"{len(bundle.human_preferences)} human preferences, systems {', '.join(bundle.systems)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
