"""The upload page takes the files researchers have (issue 37): a CSV goes through a column step
that shows the detected roles and the first rows, then the metric step, and becomes a study;
a wrong mapping is refused with the column named and nothing is imported."""
import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import Study
from tests.builders.clients import group_researcher_client

pytestmark = pytest.mark.django_db


def csv_upload(name="answers.csv", rows=None):
    rows = rows or [{"question": f"Q{p}?", "model": m, "response": f"- {m} on {p}", "score": p + k}
                    for p in range(5) for k, m in enumerate(("m1", "m2", "m3"))]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return SimpleUploadedFile(name, out.getvalue().encode(), content_type="text/csv")


def test_a_csv_goes_through_the_column_step_then_the_metric_step_and_becomes_a_study():
    _, client = group_researcher_client()
    page = client.post("/studies/upload/", {"bundle": csv_upload()})
    html = page.content.decode()
    assert page.status_code == 200 and "not a study bundle: a CSV table of 15 rows" in html
    assert 'id="table-preview"' in html and "Q0?" in html and '<span class="role-tag">prompt</span>' in html
    token = html.split('name="staged_files" value="')[1].split('"')[0]
    form = {"staged_files": token, "slug": "", "name": "My answers", "prompt": "question", "model": "model",
            "response": "response", "metrics": ["score"], "compute": ["length"], "text_format": ""}
    metric_step = client.post("/studies/upload/", form)
    assert metric_step.status_code == 200, metric_step.content.decode()[:2000]
    html = metric_step.content.decode()
    assert "Step 2 of 2" in html and "score" in html and "length" in html and "15 items" not in html
    staged = html.split('name="staged" value="')[1].split('"')[0]
    done = client.post("/studies/upload/", {"staged": staged, "metric": "metric:score", "slug": "mine",
                                            "start": "now"})
    assert done.status_code == 302 and done["Location"] == "/s/mine/dashboard/"
    study = Study.objects.get(slug="mine")
    assert study.name == "My answers" and study.metric.name == "score" and study.items.count() == 5
    assert sorted(study.metrics.values_list("name", flat=True)) == ["length", "score"]
    # The staged files are gone: the column step cannot be replayed.
    assert client.post("/studies/upload/", form).status_code == 400


def test_a_wrong_mapping_names_the_column_and_imports_nothing():
    _, client = group_researcher_client()
    html = client.post("/studies/upload/", {"bundle": csv_upload()}).content.decode()
    token = html.split('name="staged_files" value="')[1].split('"')[0]
    form = {"staged_files": token, "name": "x", "prompt": "question", "model": "model", "response": "",
            "metrics": ["score"]}
    refused = client.post("/studies/upload/", form)
    assert refused.status_code == 400
    assert "answers.csv: no column for the response" in refused.content.decode()
    rows = [{"question": "Q?", "model": "m1", "response": "a", "score": "n/a"},
            {"question": "Q?", "model": "m2", "response": "b", "score": "1"}]
    html = client.post("/studies/upload/", {"bundle": csv_upload(rows=rows)}).content.decode()
    token = html.split('name="staged_files" value="')[1].split('"')[0]
    refused = client.post("/studies/upload/", {**form, "staged_files": token, "response": "response"})
    assert "answers.csv row 2, column &#x27;score&#x27;: &#x27;n/a&#x27; is not a number" in refused.content.decode()
    assert not Study.objects.exists()


def test_two_alpacaeval_files_together():
    _, client = group_researcher_client()
    files = [SimpleUploadedFile(f"{m}.json", (
        '[' + ",".join(f'{{"instruction": "Tip {n}", "output": "{m} tip {n}", "generator": "{m}"}}' for n in range(4))
        + ']').encode()) for m in ("gpt4", "llama")]
    html = client.post("/studies/upload/", {"bundle": files}).content.decode()
    assert "a JSON list table of 8 rows" in html and "gpt4.json, llama.json" in html
    token = html.split('name="staged_files" value="')[1].split('"')[0]
    form = {"staged_files": token, "name": "AlpacaEval pair", "prompt": "instruction", "model": "generator",
            "response": "output"}
    html = client.post("/studies/upload/", form).content.decode()
    staged = html.split('name="staged" value="')[1].split('"')[0]
    assert client.post("/studies/upload/", {"staged": staged, "metric": "none", "slug": "alpaca",
                                            "start": "now"}).status_code == 302
    study = Study.objects.get(slug="alpaca")
    assert study.pair_states.count() == 1 and study.items.count() == 4


def test_the_column_step_maps_a_column_to_the_items_kind_of_prompt():
    """A 'category' column mapped to the kind of prompt on the column step: each item keeps its
    kind (Item.prompt_kind, what the active design fits by)."""
    _, client = group_researcher_client()
    rows = [{"question": f"Q{p}?", "model": m, "response": f"- {m} on {p}", "category": ("code", "maths")[p % 2]}
            for p in range(4) for m in ("m1", "m2")]
    html = client.post("/studies/upload/", {"bundle": csv_upload(rows=rows)}).content.decode()
    assert 'name="prompt_kind"' in html
    token = html.split('name="staged_files" value="')[1].split('"')[0]
    form = {"staged_files": token, "name": "Kinds", "prompt": "question", "model": "model", "response": "response",
            "prompt_kind": "category", "text_format": ""}
    html = client.post("/studies/upload/", form).content.decode()
    staged = html.split('name="staged" value="')[1].split('"')[0]
    done = client.post("/studies/upload/", {"staged": staged, "metric": "none", "slug": "kinds", "start": "now"})
    assert done.status_code == 302
    study = Study.objects.get(slug="kinds")
    assert list(study.items.values_list("prompt_kind", flat=True)) == ["code", "maths", "code", "maths"]
