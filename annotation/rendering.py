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
"""
from __future__ import annotations

import difflib
import re
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


def markdown_html(text: str) -> str:
    """Sanitized HTML of a markdown text (no empty-text handling; see ``render_text``)."""
    html = _parser().render(text)
    return nh3.clean(
        html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow", set_tag_attribute_values={"a": {"target": "_blank"}},
        filter_style_properties={"text-align"}, strip_comments=True)


def render_text(text: str | None, text_format: str = PLAIN) -> SafeString:
    """What a page shows for ``text``: an empty or blank text is a styled "(empty response)"
    (a system that generated nothing is real data, not a page that failed to load); plain text
    is escaped with its line breaks kept; markdown is rendered and sanitized.

    Raises ValueError for an unknown ``text_format``.
    """
    if text_format not in FORMATS:
        raise ValueError(f"text format must be one of {FORMATS}, got {text_format!r}")
    if text is None or not str(text).strip():
        return format_html('<em class="empty-output">{}</em>', EMPTY_RESPONSE)
    if text_format == MARKDOWN:
        return mark_safe(f'<div class="markdown">{markdown_html(str(text))}</div>')  # noqa: S308 — sanitized above
    return linebreaksbr(str(text), autoescape=True)


def render_conversation(messages: list[dict], text_format: str = PLAIN) -> SafeString:
    """A conversation turn by turn: each message's role as a label (escaped, and only an
    allow-listed role becomes a CSS class) and its content through ``render_text``."""
    turns = []
    for message in messages:
        role = str(message.get("role", ""))
        css = role if role in MESSAGE_ROLES else "other"
        turns.append(format_html('<div class="turn turn-{}"><span class="role">{}</span>'
                                 '<div class="turn-text">{}</div></div>',
                                 css, role, render_text(message.get("content", ""), text_format)))
    return format_html('<div class="conversation">{}</div>', mark_safe("".join(turns)))  # noqa: S308 — parts escaped



_WORDS = re.compile(r"\s+|[^\s]+")
MAX_DIFF_WORDS = 5000  # difflib is quadratic in the worst case; longer texts get no diff


def word_diff(left: str, right: str) -> tuple[SafeString, SafeString] | None:
    """The two raw texts with the words only one of them has marked (``<del>`` on the left,
    ``<ins>`` on the right), everything escaped; difflib's SequenceMatcher over words and
    whitespace runs. None when a text is longer than MAX_DIFF_WORDS tokens."""
    a, b = _WORDS.findall(left or ""), _WORDS.findall(right or "")
    if len(a) > MAX_DIFF_WORDS or len(b) > MAX_DIFF_WORDS:
        return None
    out_a, out_b = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old, new = escape("".join(a[i1:i2])), escape("".join(b[j1:j2]))
        if op == "equal":
            out_a.append(old)
            out_b.append(new)
            continue
        if old:
            out_a.append(f"<del>{old}</del>")
        if new:
            out_b.append(f"<ins>{new}</ins>")
    return mark_safe("".join(out_a)), mark_safe("".join(out_b))  # noqa: S308 — every part escaped
