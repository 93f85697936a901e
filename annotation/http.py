"""Error responses of the pages, rendered through the templates (so escaped).

A message may quote what the request sent (an unknown sort key, a system name): it is shown
as text, never as markup, because the only way a page answers 400 is this function.
"""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

QUOTED_MAX = 80


def quoted(value: str) -> str:
    """``value`` as it may appear in an error message: shortened, with its quotes."""
    value = str(value)
    return repr(value if len(value) <= QUOTED_MAX else value[:QUOTED_MAX] + "…")


def bad_request(request: HttpRequest, message: str) -> HttpResponse:
    """A 400 page saying ``message`` (escaped by the template)."""
    body = render_to_string("400.html", {"message": message}, request=request)
    return HttpResponse(body, status=400)
