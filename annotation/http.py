"""Error responses of the pages, rendered through the templates (so escaped).

A message may quote what the request sent (an unknown sort key, a system name): it is shown
as text, never as markup, because the only way a page answers 400 is this function.
"""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
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


class RefuseNulMiddleware:
    """A NUL character in a query parameter is refused here, in one place, with a 400: no text
    column can hold one (PostgreSQL raises, a 500), and while forms and the API's fields refuse
    it in what they read (the API's schema says so: annotation/api_schema.py), a page or an API
    view that reads a query parameter itself (?first=, ?metric=) would pass it to the database.
    The API answers in its error shape, pages through the 400 template."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = next((key for key, values in request.GET.lists()
                     if "\x00" in key or any("\x00" in value for value in values)), None)
        if name is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": "The request is invalid; see errors.", "code": "invalid",
                                 "errors": {name.replace("\x00", ""): ["Null characters are not allowed."]}},
                                status=400)
        return bad_request(request, f"the parameter {quoted(name)} holds a NUL character")
