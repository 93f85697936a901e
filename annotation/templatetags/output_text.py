"""How a text is shown on a page: ``{% load output_text %}{% shown_text text messages html study.text_format %}``;
the rules (empty responses, sanitizing, what is rendered at import) are annotation.rendering's."""
from django import template

from annotation.rendering import PLAIN, shown_html

register = template.Library()


@register.simple_tag
def shown_text(text, messages, html, text_format=PLAIN):
    """The HTML rendered at import when there is one, else the text (or the conversation of
    ``messages``) rendered now (rendering.shown_html)."""
    return shown_html(text, messages or None, html or "", text_format or PLAIN)
