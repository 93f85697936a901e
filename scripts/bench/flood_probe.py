"""One crowd session flooding its HIT page while another visitor logs in, timed (issue 36).

    python scripts/bench/flood_probe.py BASE_URL SLUG USERNAME PASSWORD [--threads 12] [--seconds 15]

Enters one crowd worker through the study's start link, then has ``--threads`` threads GET that
worker's HIT page (``/s/SLUG/annotate/``) as fast as the server answers, with the worker's
cookies, for ``--seconds``; meanwhile another client logs in as USERNAME once a second and each
login is timed. The audit saw such a login take many seconds when the HIT page rendered long
answers on every GET and was not rate limited (docs/benchmarks.md). Prints one JSON object: the flood's answers by
status (200 rendered, 429 refused by the page's rate limit) and the logins' times. Loopback
targets only; bounded in time.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.parse
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.load_annotators import CSRF, Client, check_loopback  # noqa: E402


def login_ms(base: str, username: str, password: str) -> float:
    client = Client(base)
    started = time.perf_counter()
    status, body = client.request("GET", "/accounts/login/")
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": CSRF.search(body).group(1), "username": username,
                                   "password": password, "next": "/help/"}).encode()
    client.request("POST", "/accounts/login/", form, {"Referer": f"{base}/accounts/login/"})
    elapsed = (time.perf_counter() - started) * 1000
    if "sessionid" not in client.cookies:
        raise SystemExit(f"login as {username!r} failed")
    client.close()
    return round(elapsed, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("slug")
    parser.add_argument("username")
    parser.add_argument("password")
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args(argv)
    check_loopback(args.base)
    worker = Client(args.base)
    status, _ = worker.request("GET", f"/s/{args.slug}/start/?PROLIFIC_PID=flooder&STUDY_ID=x&SESSION_ID=flood-1")
    if status != 200:
        raise SystemExit(f"start link: HTTP {status}")
    quiet = [login_ms(args.base, args.username, args.password) for _ in range(3)]
    statuses: Counter = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    def flood() -> None:
        client = Client(args.base)
        client.cookies.update(worker.cookies)
        while time.monotonic() < deadline:
            status, _ = client.request("GET", f"/s/{args.slug}/annotate/")
            with lock:
                statuses[status] += 1
        client.close()

    threads = [threading.Thread(target=flood) for _ in range(args.threads)]
    for thread in threads:
        thread.start()
    during = []
    while time.monotonic() < deadline - 1:
        during.append(login_ms(args.base, args.username, args.password))
        time.sleep(1)
    for thread in threads:
        thread.join()
    print(json.dumps({"threads": args.threads, "seconds": args.seconds,
                      "flood_answers": {str(k): v for k, v in sorted(statuses.items())},
                      "login_ms_quiet_median": statistics.median(quiet),
                      "login_ms_during_flood_median": statistics.median(during) if during else None,
                      "login_ms_during_flood_max": max(during) if during else None, "logins": len(during)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
