"""Texts as annotators and researchers see them: plain (escaped, line breaks kept) or markdown.

LLM answers carry lists, tables and code; shown as plain text they arrive as one run of
characters. Markdown goes through two well-kept libraries and no hand-written HTML handling:
markdown-it-py (CommonMark, plus GFM tables and strikethrough; raw HTML in the source is not
interpreted, it is shown as text) turns it into HTML, Pygments colours fenced code by the
fence's language (CSS classes only, static/css/code.css), and nh3 (the Ammonia sanitizer)
keeps only an allow-list of tags, attributes and URL schemes — so a ``javascript:`` link, an
event handler or a ``<script>`` that got through the first step is dropped all the same.
Links open in a new tab (``target="_blank"``, ``rel="noopener noreferrer nofollow"``): a
worker who follows one does not leave the HIT. Images are not shown: a text must not make the
annotator's browser fetch from elsewhere.

Render once, serve many: rendering a markdown answer costs milliseconds and grows with what
the text holds (a large table or a long code fence: far more; docs/benchmarks.md), so a
markdown study's texts are rendered when the study is imported (``stored_html``, kept beside
each text) and a HIT only reads them (``shown_html``). What rendering accepts is bounded
(``RENDER_LIMITS``): a text beyond a limit is refused at import with its line, so no text costs
more than about a second once, and none costs anything per HIT. Plain texts are only escaped
when shown (linear, microseconds). The word diff of two answers is rapidfuzz's bit-parallel
LCS over words (a thousandth of difflib's time on long answers: docs/benchmarks.md).
"""
from __future__ import annotations

import html as html_lib
import re
from dataclasses import dataclass
from functools import lru_cache

import nh3
from django.template.defaultfilters import linebreaksbr
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound
from rapidfuzz.distance import Indel

from protocol.bundle import MESSAGE_ROLES

PLAIN = "plain"
MARKDOWN = "markdown"
FORMATS = (PLAIN, MARKDOWN)

EMPTY_RESPONSE = "(empty response)"

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "span", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td", "a",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "span": {"class"},    # Pygments' token classes
    "code": {"class"},    # language-xxx of a fence
    "pre": {"class"},
    "ol": {"start"},
    "th": {"style"}, "td": {"style"},  # column alignment of GFM tables
}
URL_SCHEMES = {"http", "https", "mailto"}

_CODE_FORMATTER = HtmlFormatter(nowrap=True)


def _highlight(code: str, language: str, _attributes) -> str:
    """A fence's code coloured by its language; an unknown or missing language stays plain."""
    try:
        lexer = get_lexer_by_name(language.strip().split()[0]) if language.strip() else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes and wraps it itself
    return f'<pre class="code"><code class="language-{escape(lexer.aliases[0])}">' \
           f'{highlight(code, lexer, _CODE_FORMATTER)}</code></pre>'


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight}) \
        .enable(["table", "strikethrough"])


@dataclass(frozen=True)
class RenderLimits:
    """What markdown rendering accepts: each limit keeps the worst text of its kind under about
    a second of rendering, once, at import (the measurements: docs/benchmarks.md, "Rendering and
    the first requests of a process")."""

    text_chars: int = 100_000
    table_cells: int = 5_000
    fence_chars: int = 50_000


RENDER_LIMITS = RenderLimits()


class RenderLimitError(ValueError):
    """A text beyond RENDER_LIMITS; the message names the limit and what to do."""


def _limit_problem(text: str, tokens, limits: RenderLimits) -> str:
    cells = 0
    for token in tokens:
        if token.type == "table_open":
            cells = 0
        elif token.type in ("td_open", "th_open"):
            cells += 1
            if cells > limits.table_cells:
                return (f"a table of more than {limits.table_cells:,} cells (at most {limits.table_cells:,} "
                        "are rendered): split it or leave it out")
        elif token.type == "fence" and len(token.content) > limits.fence_chars:
            return (f"a code block of {len(token.content):,} characters (at most {limits.fence_chars:,} are "
                    "rendered): shorten it")
    return ""


def markdown_html(text: str, limits: RenderLimits | None = None) -> str:
    """Sanitized HTML of a markdown text (no empty-text handling; see ``render_text``).

    Raises RenderLimitError for a text beyond ``limits`` (checked on the parsed tokens, before
    the costly part: colouring and sanitizing); None renders whatever it is given."""
    if limits is not None and len(text) > limits.text_chars:
        raise RenderLimitError(f"a text of {len(text):,} characters (at most {limits.text_chars:,} are "
                               "rendered as markdown): shorten it, or import the study as plain text")
    parser = _parser()
    env: dict = {}
    tokens = parser.parse(text, env)
    problem = _limit_problem(text, tokens, limits) if limits is not None else ""
    if problem:
        raise RenderLimitError(problem)
    html = parser.renderer.render(tokens, parser.options, env)
    return nh3.clean(
        html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow", set_tag_attribute_values={"a": {"target": "_blank"}},
        filter_style_properties={"text-align"}, strip_comments=True)


def render_text(text: str | None, text_format: str = PLAIN, limits: RenderLimits | None = None) -> SafeString:
    """What a page shows for ``text``: an empty or blank text is a styled "(empty response)"
    (a system that generated nothing is real data, not a page that failed to load); plain text
    is escaped with its line breaks kept; markdown is rendered and sanitized.

    Raises ValueError for an unknown ``text_format``, RenderLimitError for markdown beyond
    ``limits`` (None: no limit).
    """
    if text_format not in FORMATS:
        raise ValueError(f"text format must be one of {FORMATS}, got {text_format!r}")
    if text is None or not str(text).strip():
        return format_html('<em class="empty-output">{}</em>', EMPTY_RESPONSE)
    if text_format == MARKDOWN:
        return mark_safe(f'<div class="markdown">{markdown_html(str(text), limits)}</div>')  # noqa: S308 — sanitized above
    return linebreaksbr(str(text), autoescape=True)


def render_conversation(messages: list[dict], text_format: str = PLAIN,
                        limits: RenderLimits | None = None) -> SafeString:
    """A conversation turn by turn: each message's role as a label (escaped, and only an
    allow-listed role becomes a CSS class) and its content through ``render_text``."""
    turns = []
    for message in messages:
        role = str(message.get("role", ""))
        css = role if role in MESSAGE_ROLES else "other"
        turns.append(format_html('<div class="turn turn-{}"><span class="role">{}</span>'
                                 '<div class="turn-text">{}</div></div>',
                                 css, role, render_text(message.get("content", ""), text_format, limits)))
    return format_html('<div class="conversation">{}</div>', mark_safe("".join(turns)))  # noqa: S308 — parts escaped



def rendered(text: str | None, messages: list[dict] | None, text_format: str,
             limits: RenderLimits | None = None) -> SafeString:
    """A text as a page shows it: its conversation turn by turn when it has ``messages``,
    else the text (``render_text``). Raises RenderLimitError as ``markdown_html`` does."""
    if messages:
        return render_conversation(messages, text_format, limits)
    return render_text(text, text_format, limits)


def stored_html(text: str | None, messages: list[dict] | None, text_format: str,
                limits: RenderLimits | None = RENDER_LIMITS) -> str:
    """What an import keeps beside a text: its HTML when the study shows markdown (rendered once
    here, never per HIT), "" for a plain study (escaped when shown). Raises RenderLimitError
    for a text beyond ``limits``."""
    return str(rendered(text, messages, text_format, limits)) if text_format == MARKDOWN else ""


def shown_html(text: str | None, messages: list[dict] | None, html: str, text_format: str) -> SafeString:
    """What a page shows for a text: the HTML stored at import (``stored_html``), else the
    text rendered now (a plain study's; a markdown text stored before rendering was kept)."""
    if html:
        return mark_safe(html)  # noqa: S308 — rendered and sanitized by stored_html at import
    return rendered(text, messages, text_format)


# Words with the whitespace that follows them, one token each (two 1,300-word answers are about
# 1,300 tokens a side), compared by the word alone: a diff of words, not of spacing.
_WORDS = re.compile(r"\s+|\S+\s*")
# The diff's LCS costs (tokens of one side x tokens of the other) / 64 word steps, so beyond
# this a request would pay tens of ms for it (docs/benchmarks.md, "The hot path"): no diff.
MAX_DIFF_WORDS = 10_000


def _escape(text: str) -> str:
    return html_lib.escape(text, quote=False)


def _marked(tag: str, text: str) -> str:
    core = text.rstrip()
    return f"<{tag}>{core}</{tag}>{text[len(core):]}" if core else text


def word_diff(left: str, right: str) -> tuple[SafeString, SafeString] | None:
    """The two raw texts with the words only one of them has marked (``<del>`` on the left,
    ``<ins>`` on the right), everything escaped: the longest common subsequence of their words
    (rapidfuzz's Indel opcodes). None when a text has more than MAX_DIFF_WORDS words."""
    a, b = _WORDS.findall(left or ""), _WORDS.findall(right or "")
    if len(a) > MAX_DIFF_WORDS or len(b) > MAX_DIFF_WORDS:
        return None
    out_a, out_b = [], []
    for tag, i1, i2, j1, j2 in Indel.opcodes([t.rstrip() for t in a], [t.rstrip() for t in b]).as_list():
        old, new = _escape("".join(a[i1:i2])), _escape("".join(b[j1:j2]))
        if tag == "equal":
            out_a.append(old)
            out_b.append(new)
            continue
        # Indel has no "replace": a changed run is a delete and an insert, each on its side;
        # the spacing after a changed run is not marked.
        if old:
            out_a.append(_marked("del", old))
        if new:
            out_b.append(_marked("ins", new))
    return mark_safe("".join(out_a)), mark_safe("".join(out_b))  # noqa: S308 — every part escaped
