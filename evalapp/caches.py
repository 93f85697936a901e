"""Cache backends (declared in evalapp.settings.base): the embedded default's throttle store, and
the deployment's Redis caches that outlive a Redis outage."""
from __future__ import annotations

import logging
import threading
import time

from diskcache import DjangoCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class ThrottleCache(DjangoCache):
    """diskcache's Django cache whose SQLite connections outlive a request.

    Django closes every cache a request used when the request ends (``close_caches`` on
    ``request_finished``), and diskcache's close drops the thread's SQLite connection: every
    counted crowd request then opened the file again and re-read its settings, about 25 times the
    cost of a kept connection (docs/benchmarks.md; scripts/bench/throttle_cache.py). A connection is the thread's
    own and diskcache opens a new one after a fork, so keeping it is safe; it closes with its
    thread.
    """

    def close(self, **kwargs) -> None:
        pass


class _Outage:
    """What this process knows of one Redis server's outage (shared by every thread's cache
    object of every alias on that server)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.down_since: float | None = None   # monotonic; None while Redis answers
        self.retry_at = 0.0                     # until then, the local fallback without asking Redis
        self.warned_at = -1e9                   # the last warning (at most one per WARN_SECONDS)
        self.unsynced: set[str] = set()         # keys written to the fallback during the outage
        self.overflow = False                   # more of them than UNSYNCED_MAX


_OUTAGES: dict[str, _Outage] = {}
_OUTAGES_LOCK = threading.Lock()

# Methods that change what a key holds: their keys are removed from Redis when it answers again,
# since Redis still holds what they held before the outage (a session changed meanwhile would
# otherwise be read back as it was).
_WRITES = {"add", "set", "touch", "delete", "incr", "decr", "set_many", "delete_many"}


class ResilientRedisCache(RedisCache):
    """Django's Redis cache that keeps answering while Redis does not.

    When Redis refuses, times out or drops a call, this process uses a local in-memory cache
    instead (a rate limit then counts per process, a session is read from the database, a
    round close is coalesced per process), asks Redis again after ``retry_seconds`` (calls in
    between do not wait for it), and logs a warning when the outage starts and at most once
    every ``WARN_SECONDS`` while it lasts, not once per request. When Redis answers again, the
    keys written during the outage are deleted from it first (it still holds their old
    values) and the recovery is logged. OPTIONS: ``retry_seconds`` (default 5), and redis-py's
    connection options (the settings bound ``socket_connect_timeout`` and ``socket_timeout``,
    so a Redis that accepts and never answers costs one call a second, not minutes).
    """

    WARN_SECONDS = 60
    UNSYNCED_MAX = 100_000

    def __init__(self, server, params):
        options = dict(params.get("OPTIONS") or {})
        self.retry_seconds = float(options.pop("retry_seconds", 5))
        super().__init__(server, {**params, "OPTIONS": options})
        self._server_name = server if isinstance(server, str) else ",".join(server)
        with _OUTAGES_LOCK:
            self._outage = _OUTAGES.setdefault(self._server_name, _Outage())
        # Shared by name with every other cache object of this server in the process (LocMem
        # keeps its entries per name); keys carry this alias's prefix, as in Redis.
        self._fallback = LocMemCache(f"evalapp-redis-fallback:{self._server_name}", {
            "TIMEOUT": params.get("TIMEOUT", 300), "KEY_PREFIX": params.get("KEY_PREFIX", ""),
            "VERSION": params.get("VERSION", 1), "KEY_FUNCTION": params.get("KEY_FUNCTION"),
            "OPTIONS": {"MAX_ENTRIES": 50_000, "CULL_FREQUENCY": 4}})

    def _call(self, name: str, keys: list, *args, **kwargs):
        outage = self._outage
        if outage.down_since is not None:
            if time.monotonic() < outage.retry_at:
                return self._local(name, keys, *args, **kwargs)
            try:
                self._resync()
            except RedisError as error:
                self._went_down(error)
                return self._local(name, keys, *args, **kwargs)
        try:
            return getattr(super(), name)(*args, **kwargs)
        except RedisError as error:
            self._went_down(error)
            return self._local(name, keys, *args, **kwargs)

    def _local(self, name: str, keys: list, *args, **kwargs):
        if name in _WRITES:
            outage = self._outage
            version = kwargs.get("version")
            with outage.lock:
                for key in keys:
                    if len(outage.unsynced) >= self.UNSYNCED_MAX:
                        outage.overflow = True
                        break
                    outage.unsynced.add(self.make_key(key, version=version))
        return getattr(self._fallback, name)(*args, **kwargs)

    def _went_down(self, error: Exception) -> None:
        outage = self._outage
        now = time.monotonic()
        with outage.lock:
            first = outage.down_since is None
            if first:
                outage.down_since = now
            outage.retry_at = now + self.retry_seconds
            warn = now - outage.warned_at >= self.WARN_SECONDS
            if warn:
                outage.warned_at = now
            down_for = now - outage.down_since
        if warn:
            log.warning("Redis cache %s unreachable (%s: %s)%s: this process counts rate limits and keeps "
                        "cached values in its own memory, reads sessions from the database, and asks Redis "
                        "again every %.0f s", self._server_name, type(error).__name__, error,
                        "" if first else f" for {down_for:.0f} s", self.retry_seconds)

    def _resync(self) -> None:
        """Redis again, after an outage: first delete from it every key written meanwhile (it
        still holds what they held before), then forget the fallback's values (the next outage
        starts from misses, not from this one's values). RedisError while it still does not answer."""
        outage = self._outage
        removed = 0
        while True:
            with outage.lock:
                if outage.down_since is None:
                    return
                stale = sorted(outage.unsynced)
            if stale:
                for start in range(0, len(stale), 1000):
                    self._cache.delete_many(stale[start:start + 1000])
                removed += len(stale)
                with outage.lock:
                    outage.unsynced.difference_update(stale)
            else:
                self._cache.get_client(write=True).ping()
            with outage.lock:
                if outage.unsynced:  # written by another thread meanwhile
                    continue
                if outage.down_since is None:
                    return
                down_for, overflow = time.monotonic() - outage.down_since, outage.overflow
                outage.down_since, outage.overflow = None, False
                self._fallback.clear()
                break
        log.warning("Redis cache %s answers again after %.0f s; %d keys written meanwhile removed from it%s",
                    self._server_name, down_for, removed,
                    f" (more than {self.UNSYNCED_MAX} were written: the others may be read as they were before "
                    "the outage until they expire)" if overflow else "")

    # Every public method of Django's RedisCache, through _call (the keys a write changes first).
    def add(self, key, *args, **kwargs):
        return self._call("add", [key], key, *args, **kwargs)

    def get(self, key, *args, **kwargs):
        return self._call("get", [key], key, *args, **kwargs)

    def set(self, key, *args, **kwargs):
        return self._call("set", [key], key, *args, **kwargs)

    def touch(self, key, *args, **kwargs):
        return self._call("touch", [key], key, *args, **kwargs)

    def delete(self, key, *args, **kwargs):
        return self._call("delete", [key], key, *args, **kwargs)

    def get_many(self, keys, *args, **kwargs):
        return self._call("get_many", list(keys), keys, *args, **kwargs)

    def has_key(self, key, *args, **kwargs):
        return self._call("has_key", [key], key, *args, **kwargs)

    def incr(self, key, *args, **kwargs):
        return self._call("incr", [key], key, *args, **kwargs)

    def set_many(self, data, *args, **kwargs):
        return self._call("set_many", list(data), data, *args, **kwargs)

    def delete_many(self, keys, *args, **kwargs):
        return self._call("delete_many", list(keys), keys, *args, **kwargs)

    def clear(self):
        return self._call("clear", [])
