"""Files as researchers have them become running studies with no code written (issue 37):
`import_study` on a CSV of prompt/model/response/score, an AlpacaEval pair of output files,
MT-Bench answer files with their questions, a saved Hugging Face dataset and a table with
references and computed chrF; bad input refused with its row and column, nothing imported."""
import csv
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import MetricScore, Output, Study, StudyMembership
from annotation.services.studies import study_import
from protocol.bundle import BundleError

MODELS = ("gpt-x", "llama-y", "mistral-z", "qwen-w")


def write_csv(path, rows, delimiter=","):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def answers(prompts=50):
    return [{"prompt": f"Question {p}: how do I sort a list?", "model": m,
             "response": f"## Sorting\n\n1. call `sorted()`\n2. answer {p} by {m}", "judge_score": p % 7 + k}
            for p in range(prompts) for k, m in enumerate(MODELS)]


@pytest.mark.django_db
def test_a_csv_of_prompt_model_response_score_becomes_a_running_study_with_its_owner(tmp_path):
    owner = User.objects.create_user("rita", email="rita@example.org")
    path = write_csv(tmp_path / "answers.csv", answers())
    call_command("import_study", path, "--metric", "judge_score", "--owner", "rita@example.org", "-v", "0")
    study = Study.objects.get(slug="answers")
    assert study.status == Study.Status.RUNNING and study.text_format == "markdown" and study.protocol_started
    assert study.systems.count() == 4 and study.items.count() == 50 and study.pair_states.count() == 6
    assert study.metric.name == "judge_score" and MetricScore.objects.filter(metric__study=study).count() == 200
    assert StudyMembership.objects.filter(study=study, user=owner, role="researcher").exists()
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("import_study", path, "--owner", "nobody", "-v", "0")


@pytest.mark.django_db
def test_an_alpacaeval_pair_of_output_files(tmp_path):
    for model in ("gpt4_turbo", "llama3_70b"):
        (tmp_path / f"{model}.json").write_text(json.dumps([
            {"instruction": f"Give me a tip number {n}", "output": f"Tip {n} from {model}", "generator": model,
             "dataset": "helpful_base"} for n in range(20)]))
    call_command("import_study", str(tmp_path / "gpt4_turbo.json"), str(tmp_path / "llama3_70b.json"),
                 "--name", "AlpacaEval pair", "--human-only", "--slug", "alpaca", "-v", "0")
    study = Study.objects.get(slug="alpaca")
    assert study.name == "AlpacaEval pair" and study.pair_states.count() == 1 and study.items.count() == 20


@pytest.mark.django_db
def test_mt_bench_answer_files_with_their_questions(tmp_path):
    (tmp_path / "question.jsonl").write_text("".join(json.dumps(
        {"question_id": q, "category": "coding", "turns": [f"Write code {q}", f"Now test it {q}"]}) + "\n"
        for q in range(81, 91)))
    for model in ("vicuna-13b", "gpt-3.5-turbo"):
        (tmp_path / f"{model}.jsonl").write_text("".join(json.dumps(
            {"question_id": q, "answer_id": f"{model}-{q}", "model_id": model, "tstamp": 0,
             "choices": [{"index": 0, "turns": [f"```python\nprint({q})\n```", f"assert {q}"]}]}) + "\n"
            for q in range(81, 91)))
    call_command("import_study", str(tmp_path / "question.jsonl"), str(tmp_path / "vicuna-13b.jsonl"),
                 str(tmp_path / "gpt-3.5-turbo.jsonl"), "--name", "MT-Bench", "--human-only", "-v", "0")
    study = Study.objects.get(slug="mt-bench")
    output = Output.objects.get(item__study=study, item__external_id="85", system__name="vicuna-13b")
    assert [m["role"] for m in output.messages] == ["assistant", "user", "assistant"]
    assert '<pre class="code"><code class="language-python">' in output.html  # rendered once, at import


@pytest.mark.django_db
def test_a_saved_hugging_face_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(answers(10)).save_to_disk(str(tmp_path / "my_answers"))
    call_command("import_study", str(tmp_path / "my_answers"), "--metric", "judge_score", "-v", "0")
    assert Study.objects.get(slug="my_answers").items.count() == 10


@pytest.mark.django_db
def test_a_table_with_references_and_computed_chrf(tmp_path):
    rows = [{"source": f"Der Satz {p}.", "system": m, "hypothesis": f"The sentence {p}{'.' if k else ''}",
             "reference": f"The sentence {p}."} for p in range(30) for k, m in enumerate(MODELS[:3])]
    path = write_csv(tmp_path / "wmt.tsv", rows, "\t")
    call_command("import_study", path, "--compute", "chrf,length", "--metric", "chrf", "--slug", "wmt", "-v", "0")
    study = Study.objects.get(slug="wmt")
    assert study.text_format == "plain" and study.metric.name == "chrf"
    assert sorted(study.metrics.values_list("name", flat=True)) == ["chrf", "length"]
    perfect = MetricScore.objects.get(metric__name="chrf", output__system__name="llama-y", output__item__external_id="p00001")
    assert perfect.value == pytest.approx(100.0)
    assert study.items.get(external_id="p00003").reference == "The sentence 2."


@pytest.mark.django_db
@pytest.mark.parametrize("change, message", [
    ({"columns": "prompt=question"}, "answers.csv: no column 'question' for the prompt"),
    ({"duplicate": True}, "answers.csv row 6: model 'gpt-x' answers item 'p00001' a second time (first in answers.csv row 2)"),
    ({"score": "n/a"}, "answers.csv row 3, column 'judge_score': 'n/a' is not a number"),
    ({"empty": True}, "answers.csv: the file is empty"),
])
def test_bad_tables_name_the_row_and_column_and_import_nothing(tmp_path, change, message):
    rows = answers(3)
    if "duplicate" in change:
        rows.insert(4, dict(rows[0]))
    if "score" in change:
        rows[1]["judge_score"] = change["score"]
    path = tmp_path / "answers.csv"
    if "empty" in change:
        path.write_text("")
    else:
        write_csv(path, rows)
    arguments = ["--columns", change["columns"]] if "columns" in change else []
    with pytest.raises(CommandError) as refused:
        call_command("import_study", str(path), *arguments, "--human-only", "-v", "0")
    assert message in str(refused.value)
    assert str(refused.value).startswith("cannot import the study (1 problem):")  # a table is no "invalid bundle"
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_a_file_that_is_no_bundle_is_told_what_it_looks_like(tmp_path):
    path = write_csv(tmp_path / "answers.csv", answers(2))
    with pytest.raises(BundleError) as refused:
        study_import(source=path)
    problems = [str(p) for p in refused.value.problems]
    assert problems == ["the file is a CSV table of 8 rows (prompt → prompt, model → model, response → response, "
                        "judge_score → metric), not a study bundle: import it as a table (the upload's column step, "
                        "`import_study FILE --columns ...`, or the API's `columns` field)"]
