"""Request-rate limits (DRF throttles over the default cache), for the API and for pages.

Scopes and their rates: settings.EVALAPP_THROTTLE_RATES (documented in docs/api.md):
``api`` per token (or per user for a session, per IP when anonymous), ``submit`` per
annotator, ``crowd_start``, ``crowd_new`` (new crowd workers) and ``login`` per client IP. An exceeded limit answers 429 with
``Retry-After`` (seconds). Counts live in the "throttle" cache, which every web process
shares (Redis with EVALAPP_CACHE_URL, else diskcache's SQLite shards in var/throttle): three processes accept the
limit once, not three times. The client address comes from REMOTE_ADDR, or from
X-Forwarded-For as set by EVALAPP_TRUSTED_PROXIES trusted proxies (DRF's NUM_PROXIES), never
from what a client wrote there itself. Skips, reports, "next comparison" posts and a page's
release or keep of its HIT's lease count against the ``submit`` rate with the answers: each is a
worker's action on a HIT.
"""
from __future__ import annotations

import functools
import math

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from rest_framework.authtoken.models import Token
from rest_framework.throttling import SimpleRateThrottle


class _SettingsRateThrottle(SimpleRateThrottle):
    """Reads its rate from settings at each request (tests and deployments override it)."""

    def get_rate(self) -> str | None:
        return settings.EVALAPP_THROTTLE_RATES.get(self.scope)

    @property
    def cache(self):
        return caches["throttle"]


class ApiTokenThrottle(_SettingsRateThrottle):
    """Every API request: per token, else per logged-in user, else per IP."""

    scope = "api"

    def get_cache_key(self, request, view) -> str:
        if isinstance(getattr(request, "auth", None), Token):
            ident = f"token:{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class SubmitThrottle(_SettingsRateThrottle):
    """Answers to HITs: per annotator (a user, or a crowd worker's session), else per IP."""

    scope = "submit"

    def get_cache_key(self, request, view) -> str:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            ident = f"user:{user.pk}"
        elif getattr(request, "session", None) is not None and request.session.session_key:
            ident = f"session:{request.session.session_key}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class _IpThrottle(_SettingsRateThrottle):
    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class CrowdStartThrottle(_IpThrottle):
    scope = "crowd_start"


class LoginThrottle(_IpThrottle):
    scope = "login"


class CrowdNewWorkerThrottle(_IpThrottle):
    """New crowd workers (a worker id and platform session not seen in the study) per client:
    counted by the start link only for a new entry, so a worker's reloads cost nothing."""

    scope = "crowd_new"


PAGE_THROTTLES = {cls.scope: cls for cls in (CrowdStartThrottle, LoginThrottle, SubmitThrottle)}


def too_many_requests(request: HttpRequest, wait: float | None) -> HttpResponse:
    retry_after = max(1, math.ceil(wait or 1))
    body = render_to_string("429.html", {"retry_after": retry_after}, request=request)
    response = HttpResponse(body, status=429)
    response["Retry-After"] = str(retry_after)
    return response


def throttle_page(scope: str, methods: tuple[str, ...] = ("GET", "POST")):
    """Decorate a Django view: answer 429 (with Retry-After) past the ``scope``'s rate.

    Only requests whose method is in ``methods`` count (a login page may be shown freely;
    its POSTs are the guesses).
    """
    throttle_class = PAGE_THROTTLES[scope]

    def decorate(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            if request.method in methods:
                throttle = throttle_class()
                if not throttle.allow_request(request, None):
                    return too_many_requests(request, throttle.wait())
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
