"""How a system's output is shown to annotators: ``{% load output_text %}{{ text|output_text }}``.

An empty (or blank) output is real data — a system that generated nothing — and must not look
like a page that failed to load, so it is shown as an explicit, styled "(empty response)".
Other text is shown as ``linebreaksbr`` shows it (escaped, newlines as <br>).
"""
from django import template
from django.template.defaultfilters import linebreaksbr
from django.utils.html import format_html

register = template.Library()

EMPTY_RESPONSE = "(empty response)"


@register.filter(is_safe=True, needs_autoescape=True)
def output_text(text, autoescape=True):
    if text is None or not str(text).strip():
        return format_html('<em class="empty-output">{}</em>', EMPTY_RESPONSE)
    return linebreaksbr(text, autoescape=autoescape)
