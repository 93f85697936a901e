"""Error responses of the pages, rendered through the templates (so escaped).

A message may quote what the request sent (an unknown sort key, a system name): it is shown
as text, never as markup, because the only way a page answers 400 is this function.
"""
from __future__ import annotations

import functools

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from .throttles import ApiTokenThrottle, too_many_requests

QUOTED_MAX = 80


def quoted(value: str) -> str:
    """``value`` as it may appear in an error message: shortened, with its quotes."""
    value = str(value)
    return repr(value if len(value) <= QUOTED_MAX else value[:QUOTED_MAX] + "…")


def bad_request(request: HttpRequest, message: str) -> HttpResponse:
    """A 400 page saying ``message`` (escaped by the template)."""
    body = render_to_string("400.html", {"message": message}, request=request)
    return HttpResponse(body, status=400)


def login_or_api_token_required(view):
    """A page that a pipeline may fetch too (the CSV exports): ``Authorization: Token <key>``
    authenticates as the API does (401 for a wrong or revoked key, counted against the token's
    API rate), anything else needs a logged-in session (the login page, as login_required)."""
    from_session = login_required(view)

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.headers.get("Authorization", "").startswith("Token "):
            return from_session(request, *args, **kwargs)
        try:
            user, token = TokenAuthentication().authenticate(request)
        except AuthenticationFailed as exc:
            return JsonResponse({"detail": str(exc.detail), "code": "authentication_failed"}, status=401)
        request.user, request.auth = user, token
        throttle = ApiTokenThrottle()
        if not throttle.allow_request(request, None):
            return too_many_requests(request, throttle.wait())
        return view(request, *args, **kwargs)

    return wrapped


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
