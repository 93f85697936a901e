"""The files researchers have, as they have them (issue 37: protocol/tables.py)."""
from __future__ import annotations

import json
from pathlib import Path


STUDY_FILE_MODELS = ("gpt-4o", "llama-3-70b", "mistral-large")


def study_files(kind: str, folder: Path, prompts: int = 8) -> list[Path]:
    """Files of one ``kind`` as researchers have them, written into ``folder``: ``csv`` (prompt,
    model, response, judge_score), ``alpacaeval`` (two model_outputs files), ``mtbench`` (questions
    and two answer files, two turns), ``parquet`` (the CSV's rows; as a Hugging Face dataset's
    Parquet export), ``dataset`` (the CSV's rows saved with ``save_to_disk``: the folder's files),
    ``references`` (a TSV of source, system, hypothesis, reference)."""
    import csv as csv_module

    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"prompt": f"How do I reverse a list in Python? (variant {p})", "model": m,
             "response": f"## Answer\n\nUse `reversed()` or `xs[::-1]` — {m}, {p}.",
             "judge_score": round(0.5 + 0.1 * k + 0.01 * p, 2)}
            for p in range(prompts) for k, m in enumerate(STUDY_FILE_MODELS)]
    if kind == "csv":
        path = folder / "answers.csv"
        with open(path, "w", newline="") as handle:
            writer = csv_module.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return [path]
    if kind == "parquet":
        import pyarrow
        import pyarrow.parquet as pq

        path = folder / "answers.parquet"
        pq.write_table(pyarrow.Table.from_pylist(rows), path)
        return [path]
    if kind == "dataset":
        import datasets

        saved = folder / "answers_dataset"
        datasets.Dataset.from_list(rows).save_to_disk(str(saved))
        return sorted(saved.iterdir())
    if kind == "alpacaeval":
        paths = []
        for model in STUDY_FILE_MODELS[:2]:
            path = folder / f"{model}_outputs.json"
            path.write_text(json.dumps([{"instruction": f"Write a haiku about {t}", "output": f"{t} haiku by {model}",
                                         "generator": model, "dataset": "helpful_base"}
                                        for t in ("rain", "snow", "sun", "wind")[:max(2, prompts // 2)]]))
            paths.append(path)
        return paths
    if kind == "mtbench":
        questions = folder / "question.jsonl"
        questions.write_text("".join(json.dumps({"question_id": q, "category": "coding",
                                                 "turns": [f"Write code {q}", f"Now test it {q}"]}) + "\n"
                                     for q in range(81, 81 + prompts)))
        paths = [questions]
        for model in STUDY_FILE_MODELS[:2]:
            path = folder / f"{model}.jsonl"
            path.write_text("".join(json.dumps({"question_id": q, "answer_id": f"{model}-{q}", "model_id": model,
                                                "tstamp": 0, "choices": [{"index": 0, "turns": [
                                                    f"```python\nprint({q})\n```", f"assert {q}"]}]}) + "\n"
                                    for q in range(81, 81 + prompts)))
            paths.append(path)
        return paths
    if kind == "references":
        path = folder / "wmt.tsv"
        with open(path, "w", newline="") as handle:
            writer = csv_module.writer(handle, delimiter="\t")
            writer.writerow(["source", "system", "hypothesis", "reference"])
            for p in range(prompts):
                for k, model in enumerate(STUDY_FILE_MODELS):
                    writer.writerow([f"Der Satz {p}.", model, f"The sentence {p}{'.' if k else ''}", f"The sentence {p}."])
        return [path]
    raise ValueError(f"unknown kind {kind!r}")
