"""Markdown answers rendered for reading and sanitized for safety (annotation.rendering)."""
import pytest
from django.template import Context, Template
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.rendering import MARKDOWN, PLAIN, render_text
from tests.builders.bundles import CHAT_ANSWER as ANSWER
from tests.builders.hostile import PAYLOADS, assert_inert


def test_lists_tables_and_highlighted_code_are_rendered():
    html = str(render_text(ANSWER, MARKDOWN))
    assert "<ol>" in html and "<li><strong>Validate</strong> it</li>" in html
    assert "<table>" in html and '<th style="text-align:right">metric</th>' in html
    assert '<code class="language-python">' in html and '<span class="k">def</span>' in html
    assert '<a href="https://docs.python.org/3/" target="_blank" rel="noopener noreferrer nofollow">' in html


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_survives_as_markup(payload):
    assert_inert(str(render_text(f"Answer\n\n{payload}\n", MARKDOWN)))


def test_plain_text_is_escaped_with_its_line_breaks():
    assert str(render_text("a < b\nc", PLAIN)) == "a &lt; b<br>c"
    assert "<ol>" not in str(render_text(ANSWER, PLAIN))


def test_an_empty_text_is_an_empty_response_in_either_format():
    for text_format in (PLAIN, MARKDOWN):
        assert "(empty response)" in str(render_text("  \n", text_format))


def test_an_unknown_format_is_named():
    with pytest.raises(ValueError, match="'html'"):
        render_text("x", "html")


def test_the_template_tag_takes_the_format_and_prefers_the_html_stored_at_import():
    template = Template('{% load output_text %}{% shown_text text None "" "markdown" %}|{% shown_text text None "" %}'
                        '|{% shown_text text None "<p>stored</p>" "markdown" %}')
    rendered = template.render(Context({"text": "**bold**"}))
    assert rendered == '<div class="markdown"><p><strong>bold</strong></p>\n</div>|**bold**|<p>stored</p>'


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>\"'=/:`[]()!*#|-\n ajvscriptonerrorhf&;")), max_size=80))
def test_whatever_the_text_no_tag_carries_a_handler_or_script_url(text):
    assert_inert(str(render_text(text, MARKDOWN)))
