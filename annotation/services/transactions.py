"""Retrying a unit of database work after a transient failure.

A PostgreSQL connection can be terminated under a request (a restart, a failover, an
administrator's ``pg_terminate_backend``), and SQLite can report "database is locked" when a
writer holds the lock past the busy timeout. Both surface as ``OperationalError`` or
``InterfaceError``; the transaction they interrupted was rolled back, so running the unit again
on a fresh connection is safe — provided the unit is the whole transaction (never retry inside
an outer ``atomic``: its earlier work is gone) and is idempotent on success (serving's are: a
lease returns the annotator's current lease, a submit is keyed).
"""
from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)
T = TypeVar("T")
ATTEMPTS = 4


def retry_transient(fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn`` again (up to ATTEMPTS times, short backoff) after a transient database error.

    Precondition: ``fn`` opens and commits its own transaction(s) and is called outside any
    ``atomic`` block; inside one the error is re-raised at once.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for attempt in range(ATTEMPTS):
            try:
                return fn(*args, **kwargs)
            except (OperationalError, InterfaceError) as error:
                if connection.in_atomic_block or attempt == ATTEMPTS - 1:
                    raise
                log.warning("%s: transient database error, retrying (%d): %s", fn.__qualname__, attempt + 1,
                            str(error).splitlines()[0] if str(error) else type(error).__name__)
                # A dead connection is replaced by a fresh one at the next query.
                connection.close()
                time.sleep(0.02 * 2 ** attempt)
        raise AssertionError("unreachable")

    return wrapper

