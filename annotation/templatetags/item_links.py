"""Links to the item reader: ``{% load item_links %}{% item_url study.slug item first second %}``.
An item's id and a system's name may hold any character, so both go in the query string,
percent-encoded (views_items)."""
from urllib.parse import urlencode

from django import template
from django.urls import reverse

register = template.Library()


@register.simple_tag
def item_url(slug, item, first="", second=""):
    """The reader of ``item`` (an external id), of the pair (first, second) when both are given."""
    query = {"item": str(item)}
    if first and second:
        query.update(first=str(first), second=str(second))
    return f"{reverse('item_reader', kwargs={'slug': slug})}?{urlencode(query)}"
