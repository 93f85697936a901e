"""How a text is shown on a page: ``{% load output_text %}{{ text|output_text }}`` (plain) or
``{{ text|output_text:"markdown" }}``; the rules (empty responses, sanitizing) are
annotation.rendering's."""
from django import template

from annotation.rendering import PLAIN, render_text

register = template.Library()


@register.filter(is_safe=True)
def output_text(text, text_format=PLAIN):
    return render_text(text, text_format or PLAIN)
