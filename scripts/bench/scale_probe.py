"""The researcher's and a crowd worker's first requests on a running server, timed (scale.sh).

    python scripts/bench/scale_probe.py BASE_URL SLUG USERNAME PASSWORD

Logs in as USERNAME (a staff user), then times, each on its own keep-alive connection: the
dashboard's first view (which starts its first computation: import_study leaves it to the report
job), the seconds until it is computed, then the cached one and its HTML size, the decisions CSV,
the page of its first pair, the metrics page, and a new crowd
worker's first HIT through the start link (then four more new workers', one after another). Loopback targets only. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.load_annotators import CSRF, check_loopback, Client  # noqa: E402

# new workers timed after the first one's first HIT
MORE_WORKERS = 4
# what the dashboard shows while its first computation runs (templates/annotation/dashboard_computing.html)
COMPUTING = 'id="dashboard-computing"'
DASHBOARD_WAIT_SECONDS = 600


def _timed(client: Client, path: str, data: bytes | None = None, headers: dict | None = None) -> tuple[float, int, str]:
    started = time.perf_counter()
    status, body = client.request("POST" if data is not None else "GET", path, data, headers)
    return round((time.perf_counter() - started) * 1000, 1), status, body


def _ok(status: int, what: str) -> None:
    if status != 200:
        raise SystemExit(f"{what}: HTTP {status}")


def probe(base: str, slug: str, username: str, password: str) -> dict:
    check_loopback(base)
    researcher = Client(base)
    status, body = researcher.request("GET", "/accounts/login/")
    _ok(status, "login page")
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": CSRF.search(body).group(1), "username": username, "next": "/help/",
                                   "password": password}).encode()
    status, body = researcher.request("POST", "/accounts/login/", form, {"Referer": f"{base}/accounts/login/"})
    if "sessionid" not in researcher.cookies:
        raise SystemExit(f"login as {username!r} failed (HTTP {status})")
    result: dict = {}
    first_ms, status, page = _timed(researcher, f"/s/{slug}/dashboard/")
    _ok(status, "dashboard")
    # import_study leaves the first dashboard to the report job this view started: wait for it
    # (the page reloads itself every 3 s; polled faster here), so the cached figure is a computed
    # report's and the load below does not run beside the job.
    waited = time.perf_counter()
    while COMPUTING in page:
        if time.perf_counter() - waited > DASHBOARD_WAIT_SECONDS:
            raise SystemExit(f"dashboard still computing after {DASHBOARD_WAIT_SECONDS} s")
        time.sleep(0.5)
        _, status, page = _timed(researcher, f"/s/{slug}/dashboard/")
        _ok(status, "dashboard (computing)")
    computed_s = round(time.perf_counter() - waited, 1)
    cached_ms, status, page = _timed(researcher, f"/s/{slug}/dashboard/")
    _ok(status, "dashboard (again)")
    result.update(dashboard_first_ms=first_ms, dashboard_computed_after_s=computed_s, dashboard_cached_ms=cached_ms,
                  dashboard_html_kb=round(len(page.encode()) / 1024, 1))
    decisions_ms, status, table = _timed(researcher, f"/s/{slug}/export/decisions.csv")
    result["decisions_csv_ms"] = decisions_ms if status == 200 else f"HTTP {status}"
    rows = list(csv.reader(io.StringIO(table))) if status == 200 else []
    if len(rows) > 1:  # the first pair of the CSV (first, second are its first two columns)
        query = urllib.parse.urlencode({"first": rows[1][0], "second": rows[1][1]})
        pair_ms, status, pair_page = _timed(researcher, f"/s/{slug}/pair/?{query}")
        _ok(status, f"pair page ?{query}")
        result.update(pair_page_ms=pair_ms, pair_page_html_kb=round(len(pair_page.encode()) / 1024, 1))
    else:
        result["pair_page_ms"] = None  # no pair
    metrics_ms, status, _ = _timed(researcher, f"/s/{slug}/metrics/")
    result["metrics_page_ms"] = metrics_ms if status == 200 else f"HTTP {status}"
    researcher.close()
    # the first new worker's first HIT (the goal's number), then as many more, each a new worker
    # on its own connection: how far the first is from the usual
    times = []
    for n in range(1 + MORE_WORKERS):
        worker = Client(base)
        hit_ms, status, body = _timed(worker, f"/s/{slug}/start/?PROLIFIC_PID=scale-probe-{n}&STUDY_ID=scale"
                                              f"&SESSION_ID=probe")
        _ok(status, "crowd start link")
        times.append(hit_ms)
        worker.close()
    result["first_hit_ms"] = times[0]
    result["first_hit_ms_next_workers"] = times[1:]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_url")
    parser.add_argument("slug")
    parser.add_argument("username")
    parser.add_argument("password")
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.base_url.rstrip("/"), args.slug, args.username, args.password)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
