"""A forked worker's first requests, answered before it serves anyone.

``--preload`` builds the app once in the master (evalapp/wsgi.py), but a worker forked from it
still pays, in its first crowd request, for every memory page that request touches: the fork
shares the master's pages until Python writes to them, and reading an object writes its
reference count (copy on write), so a worker's first start link took several times a later
one's (docs/benchmarks.md); answering two read-only requests first brings it close to a warm
request's cost. Each request thread answers
them once, so that it also holds an open database connection (on PostgreSQL a new server
process is slow at its first statements on a table). It also loads the study's metric labels
(every score, read once per process), which a worker's first submit decoded a pair's state with,
stalling the first HITs of the workers behind it.

The warm-up reads and never writes (GET never writes, tests/serving/test_get_never_writes.py):
the start link without a worker id only redirects, and the annotate page of a visitor without
a session shows the study's landing. It comes from a documentation address (192.0.2.1, RFC
5737), so it uses no client's request-rate allowance.

Last, the warm-up freezes the worker's heap (``gc.freeze``): what the app, the warm-up and the
metric labels allocated lives as long as the process, and the collector's full passes walked all
of it (150,000 objects at 50 x 2,000), a pause that fell on whichever request allocated past
the threshold and made a crowd worker's first HIT several times slower (docs/benchmarks.md).
Frozen objects are still freed by reference counting; only cycles among them would outlive the
process's need, and these live as long as it does anyway.
"""
from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from wsgiref.util import setup_testing_defaults

from django.conf import settings
from django.db import connections

from annotation.models import Study
from annotation.serving import protocol_state

log = logging.getLogger(__name__)
WARM_UP_ADDRESS = "192.0.2.1"
BARRIER_SECONDS = 10


def _host() -> str | None:
    """A host name the app accepts (ALLOWED_HOSTS), or None when it names none."""
    for host in settings.ALLOWED_HOSTS:
        if host == "*":
            return "localhost"
        if host.startswith("."):
            return host[1:]
        if host:
            return host
    return None


def warm_worker(application: Callable, *, executor: Executor | None = None, threads: int = 1) -> list[str]:
    """Answer the annotator's entry requests of a running study once in this process; returns
    each response's status line ([] when there is nothing to warm). Never raises: a warm-up
    that fails leaves the worker as it was.

    ``executor``: the worker's request threads (gunicorn's gthread pool), ``threads`` of them:
    each answers the requests once and keeps its database connection (persistent connections,
    CONN_MAX_AGE), so a first request finds it open and its server process warm (PostgreSQL
    loads a table's catalogue entries in each new backend). Without one, this thread answers
    them and closes the connections it opened. Ends by freezing the heap (module doc).
    """
    try:
        host = _host()
        study = Study.objects.filter(status=Study.Status.RUNNING).order_by("-pk").first()
        if host is None or study is None:
            return []
        slug = study.slug
        started = time.perf_counter()
        # what the first submit decodes a pair's state with: the metric's labels from every score
        protocol_state.label_sources_ready(study)
        if executor is None:
            statuses = _entry(application, host, slug)
        else:
            # Each task waits for the others, so the pool starts ``threads`` threads, one per task.
            barrier = threading.Barrier(threads, timeout=BARRIER_SECONDS)
            tasks = [executor.submit(_entry_then_wait, application, host, slug, barrier) for _ in range(threads)]
            statuses = [status for task in tasks for status in task.result()]
        log.info("worker warmed in %.0f ms (%d requests)", (time.perf_counter() - started) * 1000, len(statuses))
        return statuses
    except Exception:  # noqa: BLE001 -- a warm-up must never keep a worker from serving
        log.warning("worker warm-up failed", exc_info=True)
        return []
    finally:
        connections.close_all()  # this thread's: it serves no request
        gc.freeze()  # the heap so far is the process's for good (module doc)


def _entry(application: Callable, host: str, slug: str) -> list[str]:
    return [_get(application, host, f"/s/{slug}/start/"), _get(application, host, f"/s/{slug}/annotate/")]


def _entry_then_wait(application: Callable, host: str, slug: str, barrier: threading.Barrier) -> list[str]:
    try:
        return _entry(application, host, slug)
    finally:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass  # fewer threads than asked for: the ones there are warmed


def _get(application: Callable, host: str, path: str) -> str:
    status: list[str] = []
    environ = {"PATH_INFO": path, "HTTP_HOST": host, "SERVER_NAME": host, "SERVER_PORT": "443", "HTTPS": "on",
               "wsgi.url_scheme": "https", "REMOTE_ADDR": WARM_UP_ADDRESS, "wsgi.multithread": True}
    setup_testing_defaults(environ)  # the rest of a GET's environ, as wsgiref builds it
    body = application(environ, lambda line, headers, exc_info=None: status.append(line))
    try:
        for _ in body:
            pass
    finally:
        getattr(body, "close", lambda: None)()
    return status[0] if status else ""
