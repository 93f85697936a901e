"""Load and consistency harness: simulated crowd workers annotate a study on a running server.

    python scripts/bench/load_annotators.py BASE_URL SLUG --workers N --max-seconds S
    python scripts/bench/load_annotators.py http://127.0.0.1:8000 summeval-relevance --scenario embedded

Each worker enters through the Prolific start link (its own session), then loops: answer the
HIT on its page (at random), submit — as a browser with JavaScript does (htmx: one POST that
returns the next HIT), or with ``--mode form`` as one without (POST, redirect, GET). Bounded
by --max-seconds and --max-hits; it stops by itself. Only loopback addresses are targets.

At the end it checks the database (``manage.py serving_audit``, run from this checkout with
this process's environment, so give it the server's DATABASE_URL): duplicates (a comparison
judged beyond ratings_per_item, an annotator judging one twice), lost judgements (submits the
server acknowledged that are not stored) and protocol consistency. Prints one JSON object:
submits_per_second, submit_then_next_hit_ms_p50/p95/p99, first_hit_ms_p50/p95, errors
(5xx and failed connections), refused (4xx answers, e.g. a HIT no longer needed), duplicates,
lost, protocol_consistent; no_work_waits and no_work_seconds (a worker told there is no work for
them right now waits the screen's recheck delay, as its page does, then asks again). Exit status 0 when errors, duplicates and lost are 0 and the
protocol is consistent.
"""
from __future__ import annotations

import argparse
import http.client
import http.cookies
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORM = re.compile(r'<form method="post" action="([^"]+/hits/\d+/)"')
# With no live lease the page offers the next comparison (htmx presses this button on load).
NEXT = re.compile(r'<form method="post" action="([^"]+/next/)"')
# "No work for you right now" (others hold every open comparison, e.g. while a ranking design
# waits for its step's last round): htmx asks again after the delay, so a worker waits there.
RECHECK = re.compile(r'<form class="recheck" method="post" action="([^"]+/next/)"[^>]*?'
                     r'hx-trigger="load delay:(\d+(?:\.\d+)?)s"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
KEY = re.compile(r'name="key" value="([^"]+)"')
RUBRIC_OPTION = re.compile(r'name="criterion-([a-z][a-z0-9_]*)" value="(-?\d)"')
RUBRIC_REASON = re.compile(r'name="reason-([a-z][a-z0-9_]*)"')
# name -> (workers, seconds, mean think time per HIT in ms, ramp-up seconds). A closed loop
# with no think time measures saturation: each worker waits only for the server, so latency
# grows with the queue (Little's law: latency = workers / throughput). The targets' scenarios
# give each worker a think time so that the offered load is the target throughput: 20 workers
# thinking 0.25 s offer at most 80 submits/s, 100 workers thinking 1 s at most 100/s. Workers
# arrive spread over the ramp-up (10 a second), as a crowd does; ramp 0 is a burst: every
# worker opens the start link at the same instant.
SCENARIOS = {
    "smoke": (4, 10, 0, 0),
    "embedded": (20, 60, 250, 2),
    "deployment": (100, 60, 1000, 10),
    "saturation": (20, 60, 0, 0),
    "burst": (20, 30, 250, 0),
    "crowd": (200, 120, 5000, 20),
}


def check_loopback(url: str) -> None:
    host = urllib.parse.urlparse(url).hostname or ""
    if not (host == "localhost" or host.startswith("127.") or host == "::1"):
        raise SystemExit(f"refusing to load {host!r}: only loopback addresses are load-tested")


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


class Client:
    """One simulated browser: its cookies and one keep-alive HTTP connection (as a browser keeps).

    Lean on purpose: the load generator shares the machine's cores with the server it measures,
    so its own CPU per request (urllib's handler chain and cookie policy cost several times
    this) would be taken from the server. Redirects are followed (GET), as a browser does.
    """

    def __init__(self, base: str):
        parts = urllib.parse.urlsplit(base)
        self.host, self.port = parts.hostname, parts.port or 80
        self.cookies: dict[str, str] = {}
        self.connection: http.client.HTTPConnection | None = None

    def _send(self, method: str, path: str, body: bytes | None, headers: dict) -> tuple[int, str, str | None]:
        for attempt in (0, 1):
            fresh = self.connection is None
            if fresh:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
            all_headers = {**headers, "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
            if body is not None:
                all_headers["Content-Type"] = "application/x-www-form-urlencoded"
            try:
                self.connection.request(method, path, body=body, headers=all_headers)
                response = self.connection.getresponse()
                text = response.read().decode()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if fresh or attempt:  # only a kept-alive connection the server closed is retried
                    raise
                continue
            except OSError:
                self.close()
                raise
            for value in response.headers.get_all("Set-Cookie") or ():
                for name, morsel in http.cookies.SimpleCookie(value).items():
                    self.cookies[name] = morsel.value
            if response.will_close:
                self.close()
            return response.status, text, response.headers.get("Location")
        raise AssertionError("unreachable")

    def request(self, method: str, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
        status, text, location = self._send(method, url, data, headers or {})
        while status in (301, 302, 303) and location:
            status, text, location = self._send("GET", urllib.parse.urlsplit(location)._replace(
                scheme="", netloc="").geturl(), None, {})
        return status, text

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def worker(base: str, slug: str, name: str, mode: str, think_ms: float, start_at: float, deadline: float,
           budget: dict, lock: threading.Lock, stats: dict, seed: int) -> None:
    rng = random.Random(seed)
    time.sleep(max(start_at - time.monotonic(), 0))
    client = Client(base)
    referer = f"{base}/s/{slug}/annotate/"

    def timed(method, path, kind, data=None, headers=None):
        started = time.perf_counter()
        try:
            status, body = client.request(method, path, data, headers)
        except OSError as error:  # refused, reset, timed out
            body, status = "", 599
            with lock:
                stats["error_examples"].add(f"{kind} {type(error).__name__}")
        elapsed = time.perf_counter() - started
        with lock:
            stats[kind].append(elapsed)
            stats["trace"].append((started, elapsed, kind, status))
            if status >= 500:
                stats["errors"] += 1
                stats["error_examples"].add(f"{kind} {status}")
            elif status >= 400:
                stats["refused"] += 1
        return status, body

    try:
        _work(client, slug, name, mode, think_ms, deadline, budget, lock, stats, rng, referer, timed)
    finally:
        client.close()


def _work(client, slug, name, mode, think_ms, deadline, budget, lock, stats, rng, referer, timed) -> None:
    status, body = timed("GET", f"/s/{slug}/start/?PROLIFIC_PID={name}&STUDY_ID=load&SESSION_ID={name}", "first")
    while time.monotonic() < deadline:
        form = FORM.search(body)
        if not form:
            ready = NEXT.search(body)
            recheck = None if ready else RECHECK.search(body)
            if recheck:
                # waiting on the no-work screen as its page does (htmx asks again after the delay)
                delay = float(recheck.group(2))
                if time.monotonic() + delay >= deadline:
                    return
                time.sleep(delay)
                with lock:
                    stats["waited"].append(delay)
                ready = recheck
            if not ready:
                break  # no more work for this worker
            data = urllib.parse.urlencode({"csrfmiddlewaretoken": CSRF.search(body).group(1)}).encode()
            headers = {"Referer": referer}
            if mode == "htmx":
                headers["HX-Request"] = "true"
            status, body = timed("POST", ready.group(1), "next", data, headers)
            continue
        with lock:
            if budget["left"] <= 0:
                return
            budget["left"] -= 1
        if think_ms:
            think = rng.uniform(0.5, 1.5) * think_ms / 1000
            if time.monotonic() + think >= deadline:
                # Still thinking when the run ends: stop. (Sleeping until the deadline and
                # submitting then made every such worker submit in the same instant, a burst
                # no crowd sends, most of the slow requests of a run: docs/benchmarks.md.)
                return
            time.sleep(think)
        key = KEY.search(body).group(1)
        fields = {
            "csrfmiddlewaretoken": CSRF.search(body).group(1),
            "key": key,
            "answer": rng.choice(["left", "left", "tie", "right"]),
            "seconds": f"{rng.uniform(5, 40):.1f}",
            "read_ms": f"{rng.uniform(3000, 30000):.0f}",
        }
        # A rubric HIT (docs/bundle-format.md, "Rubrics"): a value for every criterion, a reason
        # for every reason field (required ones included).
        options: dict[str, list[str]] = {}
        for name, value in RUBRIC_OPTION.findall(body):
            options.setdefault(name, []).append(value)
        fields.update({f"criterion-{name}": rng.choice(values) for name, values in options.items()})
        fields.update({f"reason-{name}": "load test" for name in RUBRIC_REASON.findall(body)})
        data = urllib.parse.urlencode(fields).encode()
        headers = {"Referer": referer}
        if mode == "htmx":
            headers["HX-Request"] = "true"
        status, body = timed("POST", form.group(1), "submit", data, headers)  # form mode follows the redirect
        if status < 400:
            with lock:
                stats["acknowledged"].append(key)


def audit(slug: str, keys: list[str]) -> dict:
    """The database's view after the run (manage.py serving_audit with this environment)."""
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as handle:
        handle.write("\n".join(keys))
    try:
        done = subprocess.run([sys.executable, str(REPO / "manage.py"), "serving_audit", slug, "--keys", handle.name],
                              capture_output=True, text=True, timeout=300, cwd=REPO, env=os.environ.copy())
    finally:
        os.unlink(handle.name)
    if done.returncode != 0:
        return {"audit_error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_url")
    parser.add_argument("slug")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), help="preset workers / seconds / think time")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--max-seconds", type=float)
    parser.add_argument("--think-ms", type=float, help="mean think time per HIT (uniform 0.5x-1.5x)")
    parser.add_argument("--ramp-seconds", type=float, help="workers arrive evenly over this time (0: all at once)")
    parser.add_argument("--max-hits", type=int, default=100_000, help="submits in total, over all workers")
    parser.add_argument("--mode", choices=["htmx", "form"], default="htmx",
                        help="htmx: one POST returns the next HIT; form: POST, redirect, GET (no JavaScript)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-audit", action="store_true", help="skip the database check at the end")
    parser.add_argument("--trace", type=Path, help="write every request here: seconds since the start, "
                        "milliseconds taken, kind (first, submit, next), HTTP status (tab-separated)")
    args = parser.parse_args(argv)
    workers, seconds, think, ramp = SCENARIOS.get(args.scenario, (8, 60.0, 0.0, 0.0))
    workers = args.workers or workers
    seconds = args.max_seconds or seconds
    think = args.think_ms if args.think_ms is not None else think
    ramp = args.ramp_seconds if args.ramp_seconds is not None else ramp
    if not (0 < workers <= 500 and 0 < seconds <= 900 and 0 <= ramp < seconds):
        raise SystemExit("workers must be in 1..500, max-seconds in (0, 900] and ramp-seconds in [0, max-seconds)")
    base = args.base_url.rstrip("/")
    check_loopback(base)
    stats: dict = {"first": [], "submit": [], "next": [], "errors": 0, "refused": 0, "error_examples": set(),
                   "acknowledged": [], "trace": [], "waited": []}
    budget = {"left": args.max_hits}
    lock = threading.Lock()
    now = time.monotonic()
    deadline = now + seconds
    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(base, args.slug, f"load-{args.seed}-{n}", args.mode, think,
                                                     now + ramp * n / workers, deadline, budget, lock, stats,
                                                     args.seed * 1000 + n))
               for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if args.trace:
        args.trace.write_text("".join(f"{at - started:.3f}\t{taken * 1000:.1f}\t{kind}\t{status}\n"
                                      for at, taken, kind, status in sorted(stats["trace"])))
    submits = len(stats["submit"])
    result = {
        "scenario": args.scenario, "mode": args.mode, "workers": workers, "think_ms": think, "ramp_seconds": ramp,
        "submits": submits,
        "seconds": round(elapsed, 2),
        "submits_per_second": round(submits / elapsed, 2) if elapsed else None,
        "submit_then_next_hit_ms_p50": _percentile(stats["submit"], 0.5),
        "submit_then_next_hit_ms_p95": _percentile(stats["submit"], 0.95),
        "submit_then_next_hit_ms_p99": _percentile(stats["submit"], 0.99),
        "first_hit_ms_p50": _percentile(stats["first"], 0.5),
        "first_hit_ms_p95": _percentile(stats["first"], 0.95),
        "errors": stats["errors"],
        "refused": stats["refused"],
        "next_requests": len(stats["next"]),  # "next comparison" posts from a page without a lease
        # waits on the "no work right now" screen before it asked again, and their seconds in all
        "no_work_waits": len(stats["waited"]),
        "no_work_seconds": round(sum(stats["waited"]), 1),
        "error_examples": sorted(stats["error_examples"])[:5],
    }
    if not args.no_audit:
        checked = audit(args.slug, stats["acknowledged"])
        result.update({"duplicates": checked.get("duplicates"), "lost": checked.get("lost"),
                       "protocol_consistent": checked.get("protocol_consistent"),
                       "audit_problems": checked.get("problems") or checked.get("audit_error") or []})
    print(json.dumps(result))
    ok = result["errors"] == 0 and (args.no_audit or (result["duplicates"] == 0 and result["lost"] == 0
                                                      and result["protocol_consistent"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
