"""How a text is shown on a page: ``{% load output_text %}{{ text|output_text }}`` (plain) or
``{{ text|output_text:"markdown" }}``; the rules (empty responses, sanitizing) are
annotation.rendering's."""
from django import template

from annotation.rendering import PLAIN, render_conversation, render_text, word_diff

register = template.Library()


@register.filter(is_safe=True)
def output_text(text, text_format=PLAIN):
    return render_text(text, text_format or PLAIN)


@register.filter(is_safe=True)
def conversation(messages, text_format=PLAIN):
    """``{{ messages|conversation:"markdown" }}``: a list of {"role", "content"} turn by turn."""
    return render_conversation(messages or [], text_format or PLAIN)


@register.simple_tag
def output_diff(left, right):
    """``{% output_diff left right as diff %}``: (left HTML, right HTML) with the differing words
    marked, or None for texts too long to compare."""
    return word_diff(left or "", right or "")
