"""A CSV of prompt/model/response/score through the upload page in a real browser (issue 37):
the column step shows the roles found and the first rows, fits a phone, and leads to a study."""
import csv

import pytest

from annotation.models import Study
from pathlib import Path

from tests.factories import assert_no_horizontal_scroll, researcher_upload_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SIZES = [(1366, 768), (390, 844)]


def write_answers(path):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "model", "response", "judge_score", "reference"])
        for p in range(8):
            for k, model in enumerate(("gpt-4o", "llama-3-70b", "mistral-large")):
                writer.writerow([f"How do I reverse a list in Python? (variant {p})", model,
                                 f"## Answer\n\nUse `reversed()` or slicing: `xs[::-1]` — {model}, {p}.",
                                 round(0.5 + 0.1 * k + 0.01 * p, 2), "Use xs[::-1] or reversed(xs)."])


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_csv_becomes_a_study_through_the_column_step(browser, live_server, tmp_path, size):
    context, page = researcher_upload_page(browser, live_server, size)
    write_answers(tmp_path / "answers.csv")
    page.set_input_files("input[name=bundle]", str(tmp_path / "answers.csv"))
    page.click("button:has-text('Check the files')")
    preview = page.locator("#table-preview")
    assert "not a study bundle: a CSV table of 24 rows" in page.locator("main").inner_text()
    headers = preview.locator("thead th").all_inner_texts()
    assert [h.split("\n") for h in headers] == [["prompt", "prompt"], ["model", "model"], ["response", "response"],
                                                ["judge_score", "metric"], ["reference", "reference"]]
    assert preview.locator("tbody tr").count() == 5
    assert page.locator("select[name=prompt]").input_value() == "prompt"
    page.check("input[name=compute][value=chrf]")
    page.fill("input[name=name]", f"Reverse a list {size[0]}")
    page.screenshot(path=str(SCREENSHOTS / f"upload-columns-{size[0]}x{size[1]}.png"), full_page=True)
    assert_no_horizontal_scroll(page)
    page.click("button:has-text('Continue to the metric step')")
    select = page.locator("select[name=metric]")
    assert select.locator("option").all_inner_texts() == [
        "— choose a metric —", "chrf (score per output)", "judge_score (score per output)",
        "No metric: human-only study"]
    select.select_option("metric:judge_score")
    page.click("button:has-text('Import and start the study')")
    page.wait_for_url("**/dashboard/")
    study = Study.objects.get(name=f"Reverse a list {size[0]}")
    assert study.items.count() == 8 and study.text_format == "markdown" and study.metric.name == "judge_score"
    context.close()
