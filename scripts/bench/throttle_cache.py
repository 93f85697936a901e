"""What one rate-limit count costs as the clients a server has seen grow (the "throttle" cache).

    python scripts/bench/throttle_cache.py [--sizes 100 2000 10000] [--writes 500]

For the embedded default's backend (as evalapp.settings.base declares it: evalapp.caches.ThrottleCache),
diskcache's own DjangoCache and Django's file cache it used before, each in a fresh temporary
directory: fills the cache with N entries (one per client, as the throttles write them), then
times ``writes`` writes and reads of 20 keys (a crowd's active clients), and ``writes`` counted
requests as a web process runs them: a read and a write, then the close Django asks of every
cache a request used when the request ends. Prints one JSON object: ms per write, per read and
per request, per size.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def backends() -> dict[str, tuple[str, dict]]:
    """name -> (backend, options): the embedded default's own declaration (read from
    evalapp.settings.base without EVALAPP_CACHE_URL) and Django's file cache as it was set."""
    os.environ.pop("EVALAPP_CACHE_URL", None)
    from evalapp.settings import base

    embedded = base.CACHES["throttle"]
    return {"embedded": (embedded["BACKEND"], embedded.get("OPTIONS", {})),
            "diskcache": ("diskcache.DjangoCache", embedded.get("OPTIONS", {})),
            "django_file": ("django.core.cache.backends.filebased.FileBasedCache", {"MAX_ENTRIES": 20000})}


def measure(name: str, backend: str, options: dict, sizes: list[int], writes: int) -> dict:
    from django.core.cache import caches

    with tempfile.TemporaryDirectory() as location:
        from django.conf import settings

        settings.CACHES[name] = {"BACKEND": backend, "LOCATION": location, "OPTIONS": options}
        cache = caches[name]
        out, filled = {}, 0
        for size in sizes:
            while filled < size:
                cache.set(f"throttle_submit_user:{filled}", [time.time()], 60)
                filled += 1
            started = time.perf_counter()
            for k in range(writes):
                cache.set(f"throttle_submit_user:active{k % 20}", [time.time()], 60)
            written = time.perf_counter()
            for k in range(writes):
                cache.get(f"throttle_submit_user:active{k % 20}")
            read = time.perf_counter()
            for k in range(writes):
                key = f"throttle_submit_user:active{k % 20}"
                cache.set(key, (cache.get(key) or []) + [time.time()], 60)
                cache.close()  # what request_finished does (django.core.cache.close_caches)
            out[str(size)] = {"write_ms": round((written - started) / writes * 1000, 3),
                              "read_ms": round((read - written) / writes * 1000, 3),
                              "request_ms": round((time.perf_counter() - read) / writes * 1000, 3)}
        cache.close()
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 2000, 10000])
    parser.add_argument("--writes", type=int, default=500)
    args = parser.parse_args(argv)
    import django
    from django.conf import settings

    chosen = backends()
    settings.configure(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})
    django.setup()
    print(json.dumps({name: {"backend": backend, **measure(name, backend, options, sorted(args.sizes), args.writes)}
                      for name, (backend, options) in chosen.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
