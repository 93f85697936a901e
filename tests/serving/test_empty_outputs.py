"""Empty outputs are real data (issue 10, item 4): bundles, the database and the annotator screen."""
import pytest
from django.template import Context, Template

from annotation import models
from annotation.selectors.exports import study_export
from annotation.services.studies import study_import
from protocol.bundle import read_bundle
from tests.builders.bundles import BUNDLES, bundle_bytes

pytestmark = pytest.mark.django_db


def test_pandalm_imports_with_its_54_empty_responses():
    study = study_import(source=BUNDLES / "pandalm.jsonl.gz")
    empty = models.Output.objects.filter(item__study=study, text="")
    assert empty.count() == 48  # 54 source rows show one; some prompts show the same empty output twice
    empty_keys = set(empty.values_list("item_id", "system_id"))
    judged = models.Comparison.objects.filter(study=study, judgements__isnull=False).distinct()
    with_empty = [c for c in judged
                  if (c.item_id, c.first_id) in empty_keys or (c.item_id, c.second_id) in empty_keys]
    assert len(with_empty) == 54
    assert models.Judgement.objects.filter(comparison__in=with_empty).count() == 3 * 54


def test_an_empty_output_passes_model_validation_and_the_database_and_exports(toy_rows, tmp_path):
    rows = [dict(r) for r in toy_rows]
    blank = next(r for r in rows if r["kind"] == "output")
    blank["text"] = ""
    study = study_import(source=bundle_bytes(rows))
    output = models.Output.objects.get(item__study=study, text="")
    output.full_clean()
    study_export(study=study, path=tmp_path / "out.jsonl")
    exported = read_bundle(tmp_path / "out.jsonl")
    assert [(o.item, o.system, o.sample) for o in exported.outputs if o.text == ""] == [
        (blank["item"], blank["system"], blank.get("sample", 0))]


@pytest.mark.parametrize("text, shown", [
    ("", '<em class="empty-output">(empty response)</em>'),
    (" \n\t", '<em class="empty-output">(empty response)</em>'),
    (None, '<em class="empty-output">(empty response)</em>'),
    ("a <b>\nc", "a &lt;b&gt;<br>c"),
])
def test_the_shown_text_tag_marks_an_empty_response(text, shown):
    template = Template('{% load output_text %}{% shown_text text None "" %}')
    assert template.render(Context({"text": text})) == shown
