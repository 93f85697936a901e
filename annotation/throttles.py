"""Request-rate limits (DRF throttles over the default cache), for the API and for pages.

Scopes and their rates: settings.EVALAPP_THROTTLE_RATES (documented in docs/api.md):
``api`` per token (or per user for a session, per IP when anonymous); ``submit`` and ``page``
per annotator: a crowd worker's Annotator (the worker id and platform session their start link
bound, however many browsers or cookie jars enter it) or a logged-in user (pages and API
count together); ``crowd_start``, ``crowd_new`` (new crowd workers) and ``login`` per client IP.
An exceeded limit answers 429 with ``Retry-After`` (seconds). Counts live in the "throttle"
cache, which every web process shares (Redis with EVALAPP_CACHE_URL, each process's own memory
while Redis does not answer: evalapp/caches.py; else diskcache's SQLite shards in var/throttle): three processes accept the
limit once, not three times. The client address comes from REMOTE_ADDR, or from
X-Forwarded-For as set by EVALAPP_TRUSTED_PROXIES trusted proxies (DRF's NUM_PROXIES), never
from what a client wrote there itself. Skips, reports, "next comparison" posts and a page's
release or keep of its HIT's lease count against the ``submit`` rate with the answers: each is a
worker's action on a HIT; ``page`` counts the HIT page's GETs.
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

from .access import session_names_a_worker


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
    """Answers to HITs through the API: per user (the API's callers are users; a member's answers
    on the pages count under the same key, ``annotator_ident``), else per IP."""

    scope = "submit"

    def get_cache_key(self, request, view) -> str:
        user = getattr(request, "user", None)
        ident = f"user:{user.pk}" if user is not None and user.is_authenticated else f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


def annotator_ident(worker) -> str:
    """Whom a crowd page's request counts for (``worker``: access.StudyWorker): a crowd
    worker's Annotator, the worker id and platform session their start link bound, so every
    browser and cookie jar that entered it shares one count; a logged-in member's user."""
    return f"annotator:{worker.annotator.pk}" if worker.is_crowd else f"user:{worker.user.pk}"


class _WorkerThrottle(_SettingsRateThrottle):
    """The ``scope``'s rate for one annotator (``annotator_ident``), or None: the client address."""

    def __init__(self, scope: str, ident: str | None) -> None:
        self.scope, self.ident = scope, ident
        super().__init__()

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.ident or f"ip:{self.get_ident(request)}"}


class RateLimited(Exception):
    """A crowd page's request past its annotator's rate (``throttle_page`` answers it: 429)."""

    def __init__(self, wait: float | None) -> None:
        super().__init__(wait)
        self.wait = wait


def throttle_worker(request: HttpRequest, worker) -> None:
    """Count this request of ``worker`` (access.StudyWorker) against the rate of the scope its
    ``throttle_page`` decorator named; RateLimited past it. Views call it once they know who
    annotates, before any work; it counts a request once (a view retried after a transient
    database error is not counted again), and nothing for a request no decorator marked."""
    scope = getattr(request, "_evalapp_worker_scope", None)
    if scope is None or getattr(request, "_evalapp_worker_counted", False):
        return
    request._evalapp_worker_counted = True
    throttle = _WorkerThrottle(scope, annotator_ident(worker))
    if not throttle.allow_request(request, None):
        raise RateLimited(throttle.wait())


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


# Counted per client address before the view runs.
PAGE_THROTTLES = {cls.scope: cls for cls in (CrowdStartThrottle, LoginThrottle)}
# Counted per annotator by the view (throttle_worker), once it knows who annotates.
WORKER_SCOPES = ("submit", "page")


def too_many_requests(request: HttpRequest, wait: float | None) -> HttpResponse:
    retry_after = max(1, math.ceil(wait or 1))
    body = render_to_string("429.html", {"retry_after": retry_after}, request=request)
    response = HttpResponse(body, status=429)
    response["Retry-After"] = str(retry_after)
    return response


def throttle_page(scope: str, methods: tuple[str, ...] = ("GET", "POST")):
    """Decorate a Django view: answer 429 (with Retry-After) past the ``scope``'s rate.

    Only requests whose method is in ``methods`` count (a login page may be shown freely;
    its POSTs are the guesses). A per-address scope counts before the view runs. A per-annotator
    scope (WORKER_SCOPES) is counted by the view through ``throttle_worker`` once it knows who
    annotates (no statement of its own: the view reads that anyway), so every view under such a
    scope calls it; a request that can name no annotator (no user, no crowd entry in its
    session) counts per client address before the view runs.
    """
    if scope not in PAGE_THROTTLES and scope not in WORKER_SCOPES:
        raise ValueError(f"unknown throttle scope {scope!r}")

    def decorate(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            if request.method not in methods:
                return view(request, *args, **kwargs)
            if scope in PAGE_THROTTLES:
                throttle = PAGE_THROTTLES[scope]()
            elif not (request.user.is_authenticated or session_names_a_worker(request.session)):
                throttle = _WorkerThrottle(scope, None)
                request._evalapp_worker_counted = True
            else:
                request._evalapp_worker_scope = scope
                try:
                    return view(request, *args, **kwargs)
                except RateLimited as limited:
                    return too_many_requests(request, limited.wait)
            if not throttle.allow_request(request, None):
                return too_many_requests(request, throttle.wait())
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
