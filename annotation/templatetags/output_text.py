"""How a text is shown on a page: ``{% load output_text %}{{ text|output_text }}`` (plain) or
``{{ text|output_text:"markdown" }}``; the rules (empty responses, sanitizing) are
annotation.rendering's."""
from django import template

from annotation.rendering import PLAIN, render_conversation, render_text

register = template.Library()


@register.filter(is_safe=True)
def output_text(text, text_format=PLAIN):
    return render_text(text, text_format or PLAIN)


@register.filter(is_safe=True)
def conversation(messages, text_format=PLAIN):
    """``{{ messages|conversation:"markdown" }}``: a list of {"role", "content"} turn by turn."""
    return render_conversation(messages or [], text_format or PLAIN)
