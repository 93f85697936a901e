"""Crowd pages may be framed by the crowd platforms; every other page stays X-Frame-Options DENY.

MTurk shows an external HIT in an iframe on its own origin, so the start link, the HIT page
and its forms answer with the study-wide Content-Security-Policy whose ``frame-ancestors`` is
``'self' <platform origins>`` (settings.EVALAPP_CROWD_FRAME_ANCESTORS) instead of DENY. The session cookie must
then be ``SameSite=None; Secure`` to be sent inside that cross-site frame (settings/prod.py),
and ``Partitioned`` (CHIPS): browsers that block third-party cookies (Safari, Firefox, Chromium
with the setting on — the case of the test's headless Chromium) still keep a partitioned cookie,
stored per top-level site, so the worker's session in MTurk's frame works there too.
"""
from __future__ import annotations

from functools import wraps
from urllib.parse import urlsplit

from django.conf import settings

MTURK_HOSTS = ("www.mturk.com", "workersandbox.mturk.com")


def crowd_frameable(view):
    """Let the crowd platforms' origins (and only them) frame this view's responses."""
    @wraps(view)
    def framed(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        response.xframe_options_exempt = True
        # The rest of the policy (settings.CONTENT_SECURITY_POLICY) stays: one header.
        response._csp_replace = {"frame-ancestors": ["'self'", *settings.EVALAPP_CROWD_FRAME_ANCESTORS]}
        # The end screen of an MTurk worker posts to MTurk's externalSubmit (mturk_submit_url).
        response._csp_update = {"form-action": [f"https://{host}" for host in MTURK_HOSTS]}
        return response
    return framed


def mturk_submit_url(turk_submit_to: str) -> str | None:
    """MTurk's externalSubmit URL for a ``turkSubmitTo`` parameter, or None unless it is an
    https URL on an MTurk host (a forged parameter must not receive the worker's form)."""
    try:
        parts = urlsplit(turk_submit_to or "")
    except ValueError:
        return None
    if parts.scheme != "https" or parts.hostname not in MTURK_HOSTS or parts.port not in (None, 443):
        return None
    return f"https://{parts.hostname}/mturk/externalSubmit"


class PartitionedCookieMiddleware:
    """Mark the session and CSRF cookies ``Partitioned`` when settings.EVALAPP_PARTITIONED_COOKIES.

    Python's http.cookies (3.11) knows no Partitioned attribute, so it is appended to the
    SameSite value; only Secure cookies are marked (browsers ignore Partitioned otherwise).
    Must come before SessionMiddleware and CsrfViewMiddleware in MIDDLEWARE (it sees their
    cookies on the way out).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if settings.EVALAPP_PARTITIONED_COOKIES:
            for name in (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME):
                morsel = response.cookies.get(name)
                if morsel is not None and morsel["secure"] and "partitioned" not in str(morsel["samesite"]).lower():
                    morsel["samesite"] = f"{morsel['samesite'] or 'None'}; Partitioned"
        return response
