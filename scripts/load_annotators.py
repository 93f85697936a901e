"""Load test: simulated crowd workers annotate a study on a running evalapp server.

    python scripts/load_annotators.py http://127.0.0.1:8000 SLUG --workers 8 --max-seconds 60

Each worker enters through the Prolific start link (its own session), then loops: GET the
HIT page, answer (at random, or by a fixed preference), POST the form — exactly what a
browser without JavaScript does. Bounded by --max-hits and --max-seconds; it stops by
itself. Only loopback addresses are accepted as targets. Prints throughput and latency
percentiles as JSON.
"""
from __future__ import annotations

import argparse
import http.cookiejar
import json
import random
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

FORM = re.compile(r'<form method="post" action="([^"]+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
KEY = re.compile(r'name="key" value="([^"]+)"')


def _check_loopback(url: str) -> None:
    host = urllib.parse.urlparse(url).hostname or ""
    if not (host == "localhost" or host.startswith("127.") or host == "::1"):
        raise SystemExit(f"refusing to load {host!r}: only loopback addresses are load-tested")


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def worker(base: str, slug: str, name: str, deadline: float, budget: dict, lock: threading.Lock,
           stats: dict, seed: int) -> None:
    rng = random.Random(seed)
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def timed(request, kind):
        started = time.perf_counter()
        try:
            with opener.open(request, timeout=30) as response:
                body = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as error:
            body, status = error.read().decode(), error.code
        elapsed = time.perf_counter() - started
        with lock:
            stats[kind].append(elapsed)
            if status >= 400:
                stats["errors"].append(f"{kind} {status}")
        return status, body

    status, body = timed(f"{base}/s/{slug}/start/?PROLIFIC_PID={name}&STUDY_ID=load&SESSION_ID={name}", "get")
    while time.monotonic() < deadline:
        form = FORM.search(body)
        if not form:
            break  # no more work for this worker
        with lock:
            if budget["left"] <= 0:
                return
            budget["left"] -= 1
        data = urllib.parse.urlencode({
            "csrfmiddlewaretoken": CSRF.search(body).group(1),
            "key": KEY.search(body).group(1),
            "answer": rng.choice(["left", "left", "tie", "right"]),
            "seconds": f"{rng.uniform(5, 40):.1f}",
        }).encode()
        request = urllib.request.Request(base + form.group(1), data=data,
                                         headers={"Referer": f"{base}/s/{slug}/annotate/"})
        status, body = timed(request, "post")  # follows the redirect to the next HIT (a GET)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_url")
    parser.add_argument("slug")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--max-hits", type=int, default=500, help="submits in total, over all workers")
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    base = args.base_url.rstrip("/")
    _check_loopback(base)
    stats: dict = {"get": [], "post": [], "errors": []}
    budget = {"left": args.max_hits}
    lock = threading.Lock()
    deadline = time.monotonic() + args.max_seconds
    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(base, args.slug, f"load-{args.seed}-{n}", deadline, budget,
                                                     lock, stats, args.seed * 1000 + n))
               for n in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    submits = len(stats["post"])
    print(json.dumps({
        "workers": args.workers,
        "submits": submits,
        "seconds": round(seconds, 2),
        "submits_per_second": round(submits / seconds, 2) if seconds else None,
        "submit_then_next_hit_ms_p50": _percentile(stats["post"], 0.5),
        "submit_then_next_hit_ms_p95": _percentile(stats["post"], 0.95),
        "first_hit_ms_p50": _percentile(stats["get"], 0.5),
        "errors": len(stats["errors"]),
        "error_examples": sorted(set(stats["errors"]))[:5],
    }))
    return 0 if not stats["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
