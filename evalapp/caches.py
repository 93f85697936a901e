"""Cache backends of the embedded deployment (declared in evalapp.settings.base)."""
from __future__ import annotations

from diskcache import DjangoCache


class ThrottleCache(DjangoCache):
    """diskcache's Django cache whose SQLite connections outlive a request.

    Django closes every cache a request used when the request ends (``close_caches`` on
    ``request_finished``), and diskcache's close drops the thread's SQLite connection: every
    counted crowd request then opened the file again and re-read its settings: 1.7-1.9 ms a
    request against 0.07 ms with the connection kept (scripts/bench/throttle_cache.py). A connection is the thread's
    own and diskcache opens a new one after a fork, so keeping it is safe; it closes with its
    thread.
    """

    def close(self, **kwargs) -> None:
        pass
