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
