"""A study's texts as annotators see them: plain, or markdown rendered and sanitized
(Study.text_format; annotation/rendering.py)."""
import pytest
from django.test import Client

from annotation.selectors import study_export_rows
from annotation.services import study_import
from protocol.bundle import BundleError
from tests.factories import bundle_bytes, current_hit, start_worker

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "Steps:\n\n1. **parse**\n2. check\n\n```python\nprint('<b>hi</b>')\n```\n\n<script>window.__xss=1</script>"


def chat_rows(**study):
    rows = [{"kind": "study", "name": "Chat", "batch_size": 2, "budget": 4, **study}]
    rows += [{"kind": "item", "id": f"q{n}", "input": f"How do I *print* {n}?"} for n in range(3)]
    rows += [{"kind": "output", "item": f"q{n}", "system": s, "text": f"{s}: {ANSWER}"} for n in range(3) for s in "AB"]
    return rows


def hit_html(study) -> str:
    worker = Client()
    start_worker(worker, study.slug, "reader")
    assignment, _ = current_hit(worker, study.slug)
    assert assignment is not None
    return worker.get(f"/s/{study.slug}/annotate/").content.decode()


def test_a_markdown_study_shows_lists_and_highlighted_code_and_runs_no_script():
    html = hit_html(study_import(source=bundle_bytes(chat_rows(text_format="markdown"))))
    assert "<ol>" in html and "<strong>parse</strong>" in html and "<em>print</em>" in html
    assert '<code class="language-python">' in html and '<span class="nb">print</span>' in html
    assert "<script>window.__xss" not in html and "&lt;script&gt;window.__xss" in html


def test_a_plain_study_shows_the_text_as_written():
    html = hit_html(study_import(source=bundle_bytes(chat_rows())))
    assert "<ol>" not in html and "1. **parse**" in html and "&lt;script&gt;window.__xss" in html


def test_the_format_is_a_study_setting_that_round_trips_and_a_bad_one_is_named():
    study = study_import(source=bundle_bytes(chat_rows(text_format="markdown")))
    assert next(study_export_rows(study=study))["text_format"] == "markdown"
    with pytest.raises(BundleError, match="text_format"):
        study_import(source=bundle_bytes(chat_rows(text_format="html")), slug="chat-html")


def conversation_rows():
    rows = [{"kind": "study", "name": "Multi-turn", "batch_size": 2, "budget": 4, "text_format": "markdown"}]
    rows += [{"kind": "item", "id": f"c{n}", "input": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"List two fruits ({n}) <img src=x onerror=window.__xss=1>"}]} for n in range(3)]
    rows += [{"kind": "output", "item": f"c{n}", "system": s, "text": [
        {"role": "assistant", "content": f"- apple\n- pear ({s})"},
        {"role": "user", "content": "And a vegetable?"},
        {"role": "assistant", "content": f"**leek** ({s})"}]} for n in range(3) for s in "AB"]
    return rows


def test_a_conversation_is_shown_turn_by_turn_and_round_trips():
    study = study_import(source=bundle_bytes(conversation_rows()))
    html = hit_html(study)
    assert html.count('<div class="turn turn-assistant">') == 4 and html.count('<div class="turn turn-user">') == 3
    assert '<div class="turn turn-system"><div class="role">system</div>' in html
    assert "<li>apple</li>" in html and "<strong>leek</strong>" in html
    assert "<img" not in html and "&lt;img src=x onerror=window.__xss=1&gt;" in html
    rows = list(study_export_rows(study=study))
    item = next(r for r in rows if r["kind"] == "item")
    output = next(r for r in rows if r["kind"] == "output")
    assert item["input"][1]["role"] == "user" and output["text"][2] == {"role": "assistant", "content": "**leek** (A)"}


@pytest.mark.parametrize("bad,message", [
    ([], "field 'input' is an empty conversation"),
    ([{"role": "robot", "content": "x"}], "field 'input', message 1: role must be one of system, user, assistant"),
    ([{"role": "user"}], "field 'input', message 1 must be an object with exactly 'role' and 'content'"),
    ([{"role": "user", "content": " "}], "field 'input', message 1: content must be a non-empty string"),
])
def test_a_bad_conversation_is_named_with_its_line(bad, message):
    rows = conversation_rows()
    rows[1]["input"] = bad
    with pytest.raises(BundleError) as error:
        study_import(source=bundle_bytes(rows))
    assert any(p.line == 2 and p.message.startswith(message) for p in error.value.problems), error.value
