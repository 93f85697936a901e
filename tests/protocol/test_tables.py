"""Study files as researchers have them (protocol/tables.py): tables, AlpacaEval outputs,
FastChat / MT-Bench answers and saved datasets become bundles; every problem names its file,
row and column."""
import csv
import io
import json

import pytest

from protocol import tables
from protocol.bundle import BundleError, read_bundle

MODELS = ("gpt-x", "llama-y", "mistral-z")


def _csv(rows: list[dict], delimiter: str = ",") -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), delimiter=delimiter)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def answer_rows(prompts: int = 4, **extra) -> list[dict]:
    return [{"prompt": f"Question {p}: explain, briefly, \"why\"?", "model": m,
             "response": f"## Answer\n\n- point {p}\n- from {m}", "judge_score": round(p * 0.5 + k, 2), **extra}
            for p in range(prompts) for k, m in enumerate(MODELS)]


def bundle_of(files, **kwargs):
    rows = tables.study_rows(tables.read_files(files), **kwargs)
    return read_bundle(tables.rows_bytes(rows))


@pytest.mark.parametrize("delimiter, name", [(",", "answers.csv"), ("\t", "answers.tsv"), (";", "answers.txt")])
def test_a_csv_of_prompt_model_response_score_is_a_study(delimiter, name):
    bundle = bundle_of([(name, _csv(answer_rows(), delimiter))])
    assert bundle.study == {"name": "answers", "text_format": "markdown"}  # the answers are markdown
    assert [i.id for i in bundle.items] == ["p00001", "p00002", "p00003", "p00004"]
    assert bundle.items[0].input == 'Question 0: explain, briefly, "why"?'
    assert bundle.systems == MODELS and len(bundle.outputs) == 12
    assert bundle.metrics == ("judge_score",) and len(bundle.metric_scores) == 12
    score = next(r for r in bundle.metric_scores if r.item == "p00002" and r.system == "llama-y")
    assert score.score == 1.5


def test_columns_are_found_by_other_names_or_mapped():
    rows = [{"question": r["prompt"], "generator": r["model"], "completion": r["response"], "qid": f"q{n // 3}",
             "notes": "x"} for n, r in enumerate(answer_rows())]
    bundle = bundle_of([("t.csv", _csv(rows))], columns=tables.parse_columns("id=qid"))
    assert [i.id for i in bundle.items] == ["q0", "q1", "q2", "q3"]
    assert bundle.metrics == ()  # 'notes' holds words: not a metric
    renamed = [{"Q": r["prompt"], "who": r["model"], "said": r["response"]} for r in answer_rows()]
    mapped = bundle_of([("t.csv", _csv(renamed))], columns=tables.parse_columns("prompt=Q,model=who,response=said"))
    assert len(mapped.outputs) == 12


def test_a_reference_column_is_the_items_reference_and_plain_text_stays_plain():
    rows = [{"source": f"Satz {p}", "system": m, "hypothesis": f"Sentence {p} by {m}", "ref": f"Sentence {p}"}
            for p in range(3) for m in MODELS]
    bundle = bundle_of([("mt.tsv", _csv(rows, "\t"))])
    assert [i.reference for i in bundle.items] == ["Sentence 0", "Sentence 1", "Sentence 2"]
    assert "text_format" not in bundle.study


def test_a_kind_of_prompt_column_is_found_by_its_name_or_mapped_and_checked():
    """The items' kind of prompt (the bundle's prompt_kind, docs/ranking.md) from a column: one
    named prompt_kind, or another mapped to it; an empty cell, or an item of two kinds, is named."""
    kinds = ("maths", "code")
    rows = [{**r, "prompt_kind": kinds[n // 3 % 2]} for n, r in enumerate(answer_rows())]
    assert [i.prompt_kind for i in bundle_of([("k.csv", _csv(rows))]).items] == ["maths", "code", "maths", "code"]
    renamed = [{**r, "category": kinds[n // 3 % 2]} for n, r in enumerate(answer_rows())]
    assert [i.prompt_kind for i in bundle_of([("k.csv", _csv(renamed))]).items] == [""] * 4  # not taken unasked
    mapped = bundle_of([("k.csv", _csv(renamed))], columns=tables.parse_columns("prompt_kind=category"))
    assert [i.prompt_kind for i in mapped.items] == ["maths", "code", "maths", "code"]
    renamed[1]["category"], renamed[3]["category"] = "", "chat"  # rows 3 and 5 (the header is row 1)
    assert _problems([("k.csv", _csv(renamed))], columns=tables.parse_columns("prompt_kind=category")) == [
        "k.csv row 3, column 'category': no kind of prompt (every row needs one when the column is mapped)",
        *(f"k.csv row {row}, column 'category': item 'p00002' is of kind 'code' here and 'chat' in k.csv row 5"
          for row in (6, 7))]


def test_an_alpacaeval_pair_of_output_files_is_one_study():
    def outputs(model):
        return json.dumps([{"instruction": f"Write a haiku about {t}", "output": f"{t} haiku by {model}",
                            "generator": model, "dataset": "helpful_base"} for t in ("rain", "snow")]).encode()

    bundle = bundle_of([("gpt4_outputs.json", outputs("gpt4")), ("llama_outputs.json", outputs("llama"))],
                       name="AlpacaEval")
    assert bundle.study["name"] == "AlpacaEval" and bundle.systems == ("gpt4", "llama")
    assert [i.input for i in bundle.items] == ["Write a haiku about rain", "Write a haiku about snow"]
    assert len(bundle.outputs) == 4


def test_conversations_in_cells_and_a_messages_column():
    rows = [{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Hi {p}"}],
             "model": m, "response": f"Hello from {m}"} for p in range(2) for m in MODELS[:2]]
    jsonl = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    bundle = bundle_of([("chats.jsonl", jsonl)])
    assert bundle.items[0].messages == (("system", "Be brief."), ("user", "Hi 0"))
    assert bundle.outputs[0].messages == (("assistant", "Hello from gpt-x"),)
    chats = [{"model": m, "messages": [{"role": "user", "content": f"Hi {p}"},
                                       {"role": "assistant", "content": f"Yo {m}"}]}
             for p in range(2) for m in MODELS[:2]]
    split = bundle_of([("hf.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in chats))])
    assert split.items[1].messages == (("user", "Hi 1"),)
    assert split.outputs[0].messages == (("assistant", "Yo gpt-x"),)


def test_mt_bench_answer_files_with_their_questions_are_a_multi_turn_study():
    questions = b"".join(json.dumps({"question_id": q, "category": "writing", "turns": [f"Q{q} turn 1", f"Q{q} turn 2"]})
                         .encode() + b"\n" for q in (81, 82))
    def answers(model):
        return b"".join(json.dumps({"question_id": q, "answer_id": f"a{q}", "model_id": model, "tstamp": 1.0,
                                    "choices": [{"index": 0, "turns": [f"{model} answers {q}.1", f"{model} answers {q}.2"]}]})
                        .encode() + b"\n" for q in (81, 82))
    bundle = bundle_of([("question.jsonl", questions), ("gpt-4.jsonl", answers("gpt-4")),
                        ("vicuna.jsonl", answers("vicuna"))], name="MT-Bench")
    assert [i.id for i in bundle.items] == ["81", "82"] and bundle.items[0].messages == (("user", "Q81 turn 1"),)
    assert [i.prompt_kind for i in bundle.items] == ["writing", "writing"]  # the question's category
    output = next(o for o in bundle.outputs if o.item == "82" and o.system == "vicuna")
    assert output.messages == (("assistant", "vicuna answers 82.1"), ("user", "Q82 turn 2"),
                               ("assistant", "vicuna answers 82.2"))
    with pytest.raises(BundleError, match="give one question file"):
        tables.study_rows(tables.read_files([("gpt-4.jsonl", answers("gpt-4"))]))


def test_a_parquet_table_and_a_saved_dataset(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = answer_rows(3)
    buffer = io.BytesIO()
    pq.write_table(pyarrow.Table.from_pylist(rows), buffer)
    assert len(bundle_of([("answers.parquet", buffer.getvalue())]).outputs) == 9
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    saved = bundle_of([("saved", tmp_path / "saved")])
    assert len(saved.outputs) == 9 and saved.metrics == ("judge_score",)
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows), "test": datasets.Dataset.from_list(rows[:3])}) \
        .save_to_disk(str(tmp_path / "splits"))
    assert len(bundle_of([("splits", tmp_path / "splits")]).outputs) == 9  # the train split


def _problems(files, **kwargs) -> list[str]:
    with pytest.raises(BundleError) as refused:
        tables.study_rows(tables.read_files(files), **kwargs)
    return [str(p) for p in refused.value.problems]


def test_bad_input_names_the_row_and_the_column():
    # A wrong column map.
    assert _problems([("a.csv", _csv(answer_rows()))], columns=tables.parse_columns("prompt=question")) == [
        "a.csv: no column 'question' for the prompt (its columns: prompt, model, response, judge_score)"]
    # A duplicate (prompt, model).
    rows = answer_rows(2)
    rows.append(dict(rows[1]))
    assert _problems([("a.csv", _csv(rows))]) == [
        "a.csv row 8: model 'llama-y' answers item 'p00001' a second time (first in a.csv row 3); keep one row "
        "per prompt and model or give each a sample number"]
    # A non-numeric score.
    rows = answer_rows(2)
    rows[4]["judge_score"] = "n/a"
    assert _problems([("a.csv", _csv(rows))]) == [
        "a.csv row 6, column 'judge_score': 'n/a' is not a number (a metric needs a number for every row; leave "
        "the column out with --columns ignore=judge_score)"]
    # An empty file, and one with a header only.
    assert _problems([("a.csv", b"")]) == ["a.csv: the file is empty"]
    assert _problems([("a.csv", b"prompt,model,response\n")]) == ["a.csv: no rows"]
    # No model column.
    missing = _problems([("a.csv", b"prompt,response\nhi,there\n")])
    assert missing[0].startswith("a.csv: no column for the model (a column named 'model' or 'system'")
    # A row with a cell too many, an empty prompt.
    assert _problems([("a.csv", b"prompt,model,response\nhi,m,there,extra\n,m,x\n")]) == [
        "a.csv row 2: 4 cells, the header has 3 columns"]
    assert _problems([("a.csv", b"prompt,model,response\n ,m,x\n")]) == ["a.csv row 2, column 'prompt': empty prompt"]


def test_an_ignored_column_is_left_out_and_a_bundle_is_not_a_table():
    rows = answer_rows(2)
    rows[4]["judge_score"] = "n/a"
    bundle = bundle_of([("a.csv", _csv(rows))], columns=tables.parse_columns("ignore=judge_score"))
    assert bundle.metrics == ()
    assert tables.what_it_looks_like("a.csv", _csv(rows)).startswith("a.csv is a CSV table of 6 rows (prompt → prompt")
    bundle_line = b'{"kind": "study", "name": "x"}\n'
    assert tables.what_it_looks_like("b.jsonl", bundle_line) == ""
    with pytest.raises(BundleError, match="imported on its own"):
        tables.study_rows(tables.read_files([("b.jsonl", bundle_line)]))


def test_the_mapping_step_sees_roles_and_first_rows():
    sniffed = tables.sniff(tables.read_files([("a.csv", _csv(answer_rows()))]))
    assert sniffed.columns == (("prompt", "prompt"), ("model", "model"), ("response", "response"),
                               ("judge_score", "metric"))
    assert len(sniffed.first_rows) == 5 and sniffed.first_rows[0]["model"] == "gpt-x" and sniffed.rows == 12
    with pytest.raises(ValueError, match="ROLE=COLUMN"):
        tables.parse_columns("answer")


@pytest.mark.parametrize("data", [b"\x1f\x8b\x08", b"PAR1 not parquet at all", b"\xff\xfe\x00bad"])
def test_a_file_that_cannot_be_read_is_named_not_a_crash(data):
    with pytest.raises(BundleError) as refused:
        tables.read_files([("upload.bin", data)])
    assert str(refused.value.problems[0]).startswith("upload.bin: ")


def test_a_saved_datasets_files_read_as_its_shards_and_its_metadata_passed_over(tmp_path):
    """A browser uploads a saved dataset's folder as files: the Arrow shards are the table."""
    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "saved"
    datasets.Dataset.from_list(answer_rows()).save_to_disk(str(saved), num_shards=2)
    files = [(p.name, p.read_bytes()) for p in sorted(saved.iterdir())]
    assert {name for name, _ in files} >= {"state.json", "dataset_info.json"}
    records = tables.read_files(files)
    assert [r.form for r in records] == ["Arrow", "Arrow"]
    assert sum(len(r.rows) for r in records) == len(answer_rows())
    assert tables.sniff(records).describe().startswith(f"an Arrow table of {len(answer_rows())} rows")
    bundle = bundle_of(files)
    assert len(bundle.items) == 4
