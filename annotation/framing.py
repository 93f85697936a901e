"""Crowd pages may be framed by the crowd platforms; every other page stays X-Frame-Options DENY.

MTurk shows an external HIT in an iframe on its own origin, so the start link, the HIT page
and its forms answer with ``Content-Security-Policy: frame-ancestors 'self' <platform
origins>`` (settings.EVALAPP_CROWD_FRAME_ANCESTORS) instead of DENY. The session cookie must
then be ``SameSite=None; Secure`` to be sent inside that cross-site frame (settings/prod.py).
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
        ancestors = " ".join(["'self'", *settings.EVALAPP_CROWD_FRAME_ANCESTORS])
        response["Content-Security-Policy"] = f"frame-ancestors {ancestors}"
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
