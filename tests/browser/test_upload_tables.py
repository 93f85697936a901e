"""The files researchers have, each through the upload page in a real browser (issue 37): the
column step shows what the files are, the roles found and the first rows, fits a phone, and
leads through the metric step to a running study."""
from pathlib import Path

import pytest

from annotation.models import Study
from tests.builders.browser import assert_no_horizontal_scroll, researcher_upload_page
from tests.builders.files import STUDY_FILE_MODELS, study_files

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SIZES = [(1366, 768), (390, 844)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_csv_becomes_a_study_through_the_column_step(browser, live_server, tmp_path, size):
    context, page = researcher_upload_page(browser, live_server, size)
    page.set_input_files("input[name=bundle]", [str(p) for p in study_files("csv", tmp_path)])
    page.click("button:has-text('Check the files')")
    preview = page.locator("#table-preview")
    assert "not a study bundle: a CSV table of 24 rows" in page.locator("main").inner_text()
    headers = preview.locator("thead th").all_inner_texts()
    assert [h.split("\n") for h in headers] == [["prompt", "prompt"], ["model", "model"], ["response", "response"],
                                                ["judge_score", "metric"]]
    assert preview.locator("tbody tr").count() == 5
    assert page.locator("select[name=prompt]").input_value() == "prompt"
    page.check("input[name=compute][value=length]")
    page.fill("input[name=name]", f"Reverse a list {size[0]}")
    page.screenshot(path=str(SCREENSHOTS / f"upload-columns-{size[0]}x{size[1]}.png"), full_page=True)
    assert_no_horizontal_scroll(page)
    page.click("button:has-text('Continue to the metric step')")
    select = page.locator("select[name=metric]")
    assert select.locator("option").all_inner_texts() == [
        "— choose a metric —", "judge_score (score per output)", "length (score per output)",
        "No metric: human-only study"]
    select.select_option("metric:judge_score")
    page.click("button:has-text('Import and start the study')")
    page.wait_for_url("**/dashboard/")
    study = Study.objects.get(name=f"Reverse a list {size[0]}")
    assert study.items.count() == 8 and study.text_format == "markdown" and study.metric.name == "judge_score"
    context.close()


# Each kind of file: what the column step says it is, what to compute, the metric to choose,
# and the study it makes (items, systems).
KINDS = {
    "parquet": ("a Parquet table of 24 rows", None, "metric:judge_score", 8, 3),
    "dataset": ("an Arrow table of 24 rows", None, "metric:judge_score", 8, 3),
    "alpacaeval": ("a JSON list table of 8 rows", None, "none", 4, 2),
    "mtbench": ("FastChat / MT-Bench answer files with their questions", None, "none", 8, 2),
    "references": ("a TSV table of 24 rows", "chrf", "metric:chrf", 8, 3),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_of_file_becomes_a_running_study_on_a_phone(browser, live_server, tmp_path, kind):
    described, compute, metric, items, systems = KINDS[kind]
    context, page = researcher_upload_page(browser, live_server, (390, 844))
    page.set_input_files("input[name=bundle]", [str(p) for p in study_files(kind, tmp_path)])
    page.click("button:has-text('Check the files')")
    assert f"not a study bundle: {described}" in page.locator("main").inner_text()
    assert_no_horizontal_scroll(page)
    if compute:
        page.check(f"input[name=compute][value={compute}]")
    page.fill("input[name=name]", f"From {kind}")
    page.click("button:has-text('Continue to the metric step')")
    page.locator("select[name=metric]").select_option(metric)
    page.click("button:has-text('Import and start the study')")
    page.wait_for_url("**/dashboard/")
    study = Study.objects.get(name=f"From {kind}")
    assert study.items.count() == items
    assert sorted(study.systems.values_list("name", flat=True)) == sorted(STUDY_FILE_MODELS[:systems])
    assert (study.metric.name if study.metric_id else "none") == metric.removeprefix("metric:")
    assert "The protocol has started" in page.locator("main").inner_text()
    context.close()
