"""CPU and queries per submit + next HIT, through the WSGI handler (no server, no network).

    python scripts/bench/hot_path.py                              # SQLite in a temporary directory
    python scripts/bench/hot_path.py --database-url postgres://postgres@127.0.0.1:5432/postgres
    python scripts/bench/hot_path.py --profile 25                 # and the 25 costliest functions
    python scripts/bench/hot_path.py --profile-close 25           # the 25 costliest of the round closes alone
    python scripts/bench/hot_path.py --statements 12              # the 12 costliest statements (CPU in execute;
                                                                  # on PostgreSQL the backend's CPU in each)

Imports the SummEval relevance bundle (120 pairs) into a fresh database (SQLite: a file in a
temporary directory, removed at the end; PostgreSQL: a database ``perf_bench_<pid>``, or
``--database-name``, created on the given server and dropped at the end), enters ``--workers`` crowd workers through the start link, then times ``--cycles``
submits, round-robin over the workers, each the htmx POST that stores the answer and returns
the next HIT — the request the load harness times as "submit + next HIT". Deployment settings:
``evalapp.settings.dev`` with DEBUG off, round closes inline but timed apart (a close runs in
Celery or a thread in deployment, not in the request).

It measures CPU time, not wall time, so other processes on the machine barely move it: this
process's CPU (Django, the driver) per cycle, and on PostgreSQL also the CPU of the server
backends that served its connections — every one of them: Django replaces a connection older
than CONN_MAX_AGE (from /proc; 10 ms ticks, so read it over many cycles; pg_backends counts them).
Prints one JSON object: cpu_ms_per_cycle, queries_per_cycle, python_calls_per_cycle (deterministic), pg_backend_cpu_ms_per_cycle,
pg_round_trips_per_cycle (libpq's count, transaction control and health checks included),
close_cpu_ms_mean, closes: the median of --repeat runs of the cycles (and the least CPU of them,
cpu_ms_per_cycle_min, the steadiest figure on a busy machine); and in wall time, the median
submit + next HIT (submit_next_ms_median, a close's own time left out) and the median GET of the
HIT page (hit_page_ms_median, every worker's page --page-gets times over); and a new crowd
worker's first HIT, the start link and the page it redirects to, each worker's but the first
(first_hit_ms_median, its CPU first_hit_cpu_ms_median, on PostgreSQL the backend's CPU
first_hit_pg_backend_cpu_ms_mean).

Long answers (issue 36): ``--bundle var/long_chat.jsonl.gz --metric judge_score`` after
``python scripts/bench/long_chat.py --words 1300 1300 --out var/long_chat.jsonl.gz``.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import shutil
import statistics
import sys
import tempfile
import time
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode, urlsplit

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "data" / "bundles" / "summeval_relevance.jsonl.gz"
FORM = re.compile(r'<form method="post" action="([^"]+/hits/\d+/)"')
NEXT = re.compile(r'<form method="post" action="([^"]+/next/)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
KEY = re.compile(r'name="key" value="([^"]+)"')


class Browser:
    """One crowd worker's cookies, talking to the WSGI application directly."""

    def __init__(self, app):
        self.app = app
        self.cookies: dict[str, str] = {}

    def request(self, method: str, url: str, data: dict | None = None, htmx: bool = False) -> tuple[int, str]:
        parts = urlsplit(url)
        body = urlencode(data or {}).encode()
        environ = {
            "REQUEST_METHOD": method, "PATH_INFO": parts.path, "QUERY_STRING": parts.query,
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr, "wsgi.version": (1, 0),
            "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
            "HTTP_COOKIE": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
            "HTTP_REFERER": "http://127.0.0.1/",
        }
        if method == "POST":
            environ["CONTENT_TYPE"] = "application/x-www-form-urlencoded"
            environ["CONTENT_LENGTH"] = str(len(body))
        if htmx:
            environ["HTTP_HX_REQUEST"] = "true"
        status_headers = {}

        def start_response(status, headers, exc_info=None):
            status_headers["status"] = int(status.split()[0])
            status_headers["headers"] = headers

        chunks = self.app(environ, start_response)
        try:
            text = b"".join(chunks).decode()
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        for name, value in status_headers["headers"]:
            if name.lower() == "set-cookie":
                cookie = SimpleCookie(value)
                for key, morsel in cookie.items():
                    self.cookies[key] = morsel.value
        return status_headers["status"], text


def _setup(database_url: str | None, database_name: str | None = None) -> tuple[str | None, str]:
    """Environment for a fresh database; returns (PostgreSQL database to drop, var dir)."""
    var_dir = tempfile.mkdtemp(prefix="evalapp-bench-")
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "evalapp.settings.dev", "DJANGO_DEBUG": "0", "EVALAPP_VAR_DIR": var_dir,
        "EVALAPP_BACKGROUND_WORK": "inline", "EVALAPP_THROTTLE_SUBMIT": "100000/minute", "EVALAPP_THROTTLE_PAGE": "100000/minute",
        "EVALAPP_THROTTLE_CROWD_START": "100000/minute", "EVALAPP_THROTTLE_CROWD_NEW": "100000/minute", "DJANGO_LOG_LEVEL": "WARNING",
    })
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("EVALAPP_CACHE_URL", None)
    dropped = None
    if database_url:
        import psycopg

        name = database_name or f"perf_bench_{os.getpid()}"
        base = urlsplit(database_url)
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = base._replace(path=f"/{name}").geturl()
        dropped = name
    else:
        os.environ.pop("DATABASE_URL", None)
    return dropped, var_dir


def _drop(database_url: str, name: str) -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _backend_run_ns(pid: int | None) -> int:
    """A PostgreSQL backend's time on a CPU since it was forked, in nanoseconds (the kernel's
    /proc/<pid>/schedstat: fine enough to split among statements, where /proc/<pid>/stat counts
    10 ms ticks)."""
    if pid is None:
        return 0
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _backend_cpu_ms(pid: int) -> float:
    """A PostgreSQL backend's CPU (user + system) since it was forked, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


class BackendCpu:
    """The CPU of every PostgreSQL backend this process's connections were served by. Django
    replaces a connection older than CONN_MAX_AGE, and a backend's CPU is gone from /proc once
    it exits: each backend's CPU is read when Django closes its connection, and added to the
    live backend's."""

    def __init__(self, connection):
        self.connection = connection
        self.closed_ms = 0.0
        self.pid: int | None = None
        self.connections = 0
        original_close = connection._close

        def close_counting():
            if self.pid is not None:
                self.closed_ms += _backend_cpu_ms(self.pid)
                self.pid = None
            original_close()

        connection._close = close_counting

    def opened(self, sender, connection, **kwargs) -> None:  # django.db.backends.signals.connection_created
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.pid = cursor.fetchone()[0]
        self.connections += 1

    def total_ms(self) -> float:
        return self.closed_ms + (_backend_cpu_ms(self.pid) if self.pid is not None else 0.0)

class WireTrace:
    """The round trips to PostgreSQL while the block runs (of the connection, and of any that
    replaces it meanwhile), from libpq's trace of its messages: each round trip ends with the
    server's ReadyForQuery. ``sent``: the messages the client sent (a simple Query, or Parse /
    Bind ... Sync of the extended protocol). Nothing on SQLite (``round_trips`` None)."""

    def __init__(self, connection):
        self.connection = connection
        self.round_trips: int | None = None
        self.sent: list[str] = []
        self.traced: list = []

    def _trace(self, sender=None, connection=None, **kwargs) -> None:
        import psycopg

        pgconn = (connection or self.connection).connection.pgconn
        file = tempfile.TemporaryFile(mode="w+")
        pgconn.trace(file.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        self.traced.append((pgconn, file))

    def __enter__(self):
        if self.connection.vendor == "postgresql":
            from django.db.backends.signals import connection_created

            self.connection.ensure_connection()
            self._trace()
            connection_created.connect(self._trace, weak=False)
        return self

    def __exit__(self, *exc) -> None:
        if not self.traced:
            return
        import psycopg
        from django.db.backends.signals import connection_created

        connection_created.disconnect(self._trace)
        lines = []
        for pgconn, file in self.traced:
            if pgconn.status == psycopg.pq.ConnStatus.OK:
                pgconn.untrace()
            file.seek(0)
            lines += file.read().splitlines()
            file.close()
        self.round_trips = sum(1 for line in lines if "\tReadyForQuery\t" in line)
        self.sent = [line.split("\t", 3)[-1][:150] for line in lines
                     if line.startswith("F\t") and ("\tQuery\t" in line or "\tParse\t" in line
                                                    or "\tBind\t" in line or "\tSync" in line)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", help="a PostgreSQL server (postgres://...); default SQLite")
    parser.add_argument("--database-name", help="PostgreSQL: the database to create (dropped first and at the end; "
                        "default perf_bench_<pid>), e.g. one named for a session sharing the server")
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--cycles", type=int, default=300, help="timed submits per repeat")
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="print the N costliest functions (cumulative)")
    parser.add_argument("--profile-entry", type=int, default=0,
                        help="print the N costliest functions of the workers' entries (start link + first HIT; "
                             "the first worker's left out)")
    parser.add_argument("--profile-close", type=int, default=0,
                        help="print the N costliest functions of the round closes alone (cumulative)")
    parser.add_argument("--statements", type=int, default=0,
                        help="print the N statements of the timed runs (closes included) with the most CPU "
                             "spent in their execute call (SQLite's own work for a statement that computes its "
                             "rows before the first, a sort or an aggregate; rows streamed from an index are "
                             "partly computed while fetched, not counted here), per run and in all; on "
                             "PostgreSQL ranked by the backend's CPU in each (/proc/<pid>/schedstat, ns), "
                             "COMMIT apart (it runs the deferred foreign-key checks)")
    parser.add_argument("--bundle", type=Path, default=BUNDLE,
                        help="the study to serve (default: SummEval relevance, 120 pairs); e.g. an arena "
                             "from `python -m protocol.arena make`")
    parser.add_argument("--metric", default="bert_score_f", help="the bundle's metric (arena bundles: judge_score)")
    parser.add_argument("--show-sql", action="store_true",
                        help="print the statements of one cycle (stderr); on PostgreSQL also its round trips "
                             "to the server as libpq sent them (transaction control and health checks included)")
    parser.add_argument("--page-gets", type=int, default=5, help="GETs of each worker's HIT page, timed")
    parser.add_argument("--mode", choices=["htmx", "form"], default="htmx",
                        help="form: POST, then GET the annotate page (no JavaScript)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    dropped, var_dir = _setup(args.database_url, args.database_name)
    try:
        return _run(args)
    finally:
        if dropped:
            _drop(args.database_url, dropped)
        # The SQLite database (its WAL and lock files) and the file caches: each run made its own.
        shutil.rmtree(var_dir, ignore_errors=True)


def _run(args) -> int:
    import django

    django.setup()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from django.db import connection
    from django.db.backends.signals import connection_created

    from annotation.services import runtime
    from annotation.services.studies import study_import

    call_command("migrate", verbosity=0)
    study = study_import(source=args.bundle, slug="hot-path", metric=args.metric)
    app = get_wsgi_application()

    close_cpu: list[float] = []
    close_wall: list[float] = []
    close_backend_ms: list[float] = []
    backends = BackendCpu(connection) if connection.vendor == "postgresql" else None
    if backends:
        connection.ensure_connection()
        backends.opened(None, connection)
        connection_created.connect(backends.opened, weak=False)

    def backend_cpu_ms() -> float:
        return backends.total_ms() if backends else 0.0
    close_inline = runtime.rounds_close

    counting: list[cProfile.Profile] = []  # the call counter, paused during a close
    # CPU time, not wall time: the machine's other load would otherwise count as the profiled code's
    close_profiler = cProfile.Profile(time.process_time) if args.profile_close else None

    def timed_close(*, study_id):
        for counter in counting:
            counter.disable()
        started, backend_started, wall = time.process_time(), backend_cpu_ms(), time.perf_counter()
        if close_profiler:
            close_profiler.enable()
        try:
            return close_inline(study_id=study_id)
        finally:
            if close_profiler:
                close_profiler.disable()
            close_cpu.append(time.process_time() - started)
            close_wall.append(time.perf_counter() - wall)
            close_backend_ms.append(backend_cpu_ms() - backend_started)
            for counter in counting:
                counter.enable()

    runtime.rounds_close = timed_close  # so that the close's CPU is counted apart from the request's
    queries = [0]
    shown: list[str] = []

    # statement -> [runs, CPU s in execute, the backend's CPU ns (PostgreSQL)], over the timed runs
    statement_cpu: dict[str, list] = {}
    timing = [False]

    def timed(key: str, run):
        started, backend_started = time.process_time(), _backend_run_ns(backends.pid if backends else None)
        try:
            return run()
        finally:
            entry = statement_cpu.setdefault(key, [0, 0.0, 0])
            entry[0] += 1
            entry[1] += time.process_time() - started
            if backends:
                entry[2] += _backend_run_ns(backends.pid) - backend_started

    def count(execute, sql, params, many, context):
        queries[0] += 1
        if args.show_sql:
            shown.append(sql)
        if not (args.statements and timing[0]):
            return execute(sql, params, many, context)
        # psycopg sends a transaction's BEGIN with its first statement: counted there
        return timed(("many: " if many else "") + sql, lambda: execute(sql, params, many, context))

    if args.statements and backends:
        # a COMMIT runs the deferred foreign-key checks of the transaction's inserts (Django
        # declares PostgreSQL's foreign keys DEFERRABLE INITIALLY DEFERRED)
        commit = connection._commit

        def commit_timed():
            return timed("COMMIT", commit) if timing[0] else commit()

        connection._commit = commit_timed

    connection.execute_wrappers.append(count)
    slug = study.slug
    browsers, pages = [], []
    # a new crowd worker's first HIT (the start link and the annotate page it redirects to):
    # wall time, this process's CPU and the backend's, each worker's; the first is the process's
    # first request and is left out of the medians
    entry_wall, entry_cpu, entry_backend = [], [], []
    entry_profiler = cProfile.Profile(time.process_time) if args.profile_entry else None
    for n in range(args.workers):
        browser = Browser(app)
        if entry_profiler and n == 1:
            entry_profiler.enable()
        wall, cpu, backend_before = time.perf_counter(), time.process_time(), backend_cpu_ms()
        status, _ = browser.request("GET", f"/s/{slug}/start/?PROLIFIC_PID=bench{n}&STUDY_ID=b&SESSION_ID=s{n}")
        assert status == 302, status
        status, page = browser.request("GET", f"/s/{slug}/annotate/")
        assert status == 200, status
        entry_wall.append(1000 * (time.perf_counter() - wall))
        entry_cpu.append(1000 * (time.process_time() - cpu))
        entry_backend.append(backend_cpu_ms() - backend_before)
        browsers.append(browser)
        pages.append(page)
    if entry_profiler:
        entry_profiler.disable()

    def cycle(n: int) -> None:
        browser, page = browsers[n], pages[n]
        form = FORM.search(page)
        if form is None:
            ready = NEXT.search(page)
            if ready is None:
                raise SystemExit(f"worker {n} has no work left: use fewer --cycles")
            _, page = browser.request("POST", ready.group(1), {"csrfmiddlewaretoken": CSRF.search(page).group(1)},
                                      htmx=True)
            form = FORM.search(page)
        data = {"csrfmiddlewaretoken": CSRF.search(page).group(1), "key": KEY.search(page).group(1),
                "answer": ("left", "tie", "right")[n % 3], "seconds": "12.5"}
        closes_before, started = sum(close_wall), time.perf_counter()
        status, page = browser.request("POST", form.group(1), data, htmx=args.mode == "htmx")
        if args.mode == "form" and status == 302:
            status, page = browser.request("GET", f"/s/{slug}/annotate/")
        cycle_wall.append(time.perf_counter() - started - (sum(close_wall) - closes_before))
        if status != 200:
            raise SystemExit(f"submit answered {status}: {page[:300]}")
        pages[n] = page

    cycle_wall: list[float] = []
    done = 0
    for _ in range(args.warmup):
        cycle(done % args.workers)
        done += 1
    if args.show_sql:
        shown.clear()
        with WireTrace(connection) as wire:
            cycle(done % args.workers)
        done += 1
        print(f"{len(shown)} statements in one submit + next HIT:", *shown, sep="\n", file=sys.stderr)
        if wire.round_trips is not None:
            print(f"{wire.round_trips} round trips to PostgreSQL in one submit + next HIT (libpq's messages sent):",
                  *wire.sent, sep="\n", file=sys.stderr)
        shown.clear()
        args.show_sql = False
    runs = []
    cycle_wall.clear()
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    for _ in range(args.repeat):
        queries[0] = 0
        close_cpu.clear()
        close_backend_ms.clear()
        backend_before = backend_cpu_ms()
        if profiler:
            profiler.enable()
        timing[0] = True
        started = time.process_time()
        for _ in range(args.cycles):
            cycle(done % args.workers)
            done += 1
        cpu = time.process_time() - started - sum(close_cpu)
        timing[0] = False
        if profiler:
            profiler.disable()
        runs.append({"cpu_ms_per_cycle": cpu * 1000 / args.cycles, "queries_per_cycle": queries[0] / args.cycles,
                     "pg_backend_cpu_ms_per_cycle": (backend_cpu_ms() - backend_before
                                                     - sum(close_backend_ms)) / args.cycles,
                     "closes": len(close_cpu),
                     "close_cpu_ms_mean": 1000 * statistics.mean(close_cpu) if close_cpu else None,
                     "close_pg_backend_cpu_ms_mean": statistics.mean(close_backend_ms) if close_backend_ms else None})
    timed_wall = list(cycle_wall)  # the timed runs' cycles (the counting run below is slower)
    # Function calls per cycle (cProfile, one more run): deterministic, so it shows a change in
    # the work done even when the machine is too busy for CPU times to agree within 10 %.
    # PostgreSQL: the same run's round trips (libpq's trace; closes included, as in queries_per_cycle).
    counter = cProfile.Profile()
    counting.append(counter)
    with WireTrace(connection) as wire_counted:
        counter.enable()
        for _ in range(args.cycles):
            cycle(done % args.workers)
            done += 1
        counter.disable()
    calls = sum(entry[1] for entry in pstats.Stats(counter).stats.values())
    counting.clear()
    page_wall = []
    for _ in range(args.page_gets):
        for browser in browsers:
            started = time.perf_counter()
            status, _ = browser.request("GET", f"/s/{slug}/annotate/")
            page_wall.append(time.perf_counter() - started)
            assert status == 200, status
    result = {"database": connection.vendor, "mode": args.mode, "workers": args.workers, "cycles": args.cycles,
              "repeat": args.repeat}
    for key in runs[0]:
        values = [r[key] for r in runs if r[key] is not None]
        result[key] = round(statistics.median(values), 2) if values else None
    # The least of the repeats: other processes on the machine only ever add to CPU time
    # (cache and frequency contention), so the minimum is the steadiest estimate.
    result["python_calls_per_cycle"] = round(calls / args.cycles)
    result["cpu_ms_per_cycle_min"] = round(min(r["cpu_ms_per_cycle"] for r in runs), 2)
    result["cpu_ms_per_cycle_runs"] = [round(r["cpu_ms_per_cycle"], 2) for r in runs]
    result["submit_next_ms_median"] = round(1000 * statistics.median(timed_wall), 2)
    result["hit_page_ms_median"] = round(1000 * statistics.median(page_wall), 2) if page_wall else None
    result["hit_page_bytes_median"] = int(statistics.median(len(p.encode()) for p in pages))
    later = slice(1, None) if len(entry_wall) > 1 else slice(None)
    result["first_hit_ms_median"] = round(statistics.median(entry_wall[later]), 2)
    result["first_hit_cpu_ms_median"] = round(statistics.median(entry_cpu[later]), 2)
    if backends:  # 10 ms ticks: the mean over the workers, not each one's
        result["first_hit_pg_backend_cpu_ms_mean"] = round(statistics.mean(entry_backend[later]), 2)
    if backends:
        result["pg_backends"] = backends.connections
        result["pg_round_trips_per_cycle"] = round(wire_counted.round_trips / args.cycles, 2)
    print(json.dumps(result))
    if args.statements:
        cycles = args.repeat * args.cycles
        if backends:
            print(f"statements with the most backend CPU, {args.repeat} x {cycles // args.repeat} cycles (closes "
                  "included): backend ms per cycle, runs per cycle, backend us per run, this process's us per run")
            ranked = sorted(statement_cpu.items(), key=lambda kv: -kv[1][2])
            for sql, (runs, cpu, backend_ns) in ranked[:args.statements]:
                print(f"{backend_ns / 1e6 / cycles:7.3f} ms {runs / cycles:6.2f} {backend_ns / 1e3 / runs:8.1f} us "
                      f"{1e6 * cpu / runs:8.1f} us  {' '.join(sql.split())[:120]}")
            print(f"{sum(e[2] for e in statement_cpu.values()) / 1e6 / cycles:7.3f} ms per cycle in all")
        else:
            print(f"statements with the most CPU in execute, {args.repeat} x {args.cycles} cycles (closes included):")
            for sql, (runs, cpu, _) in sorted(statement_cpu.items(), key=lambda kv: -kv[1][1])[:args.statements]:
                print(f"{1000 * cpu:9.1f} ms {runs:7d} runs {1e6 * cpu / runs:9.1f} us  {' '.join(sql.split())[:140]}")
    if entry_profiler:
        out = io.StringIO()
        pstats.Stats(entry_profiler, stream=out).sort_stats(os.environ.get("BENCH_SORT", "cumulative")).print_stats(
            args.profile_entry)
        print(out.getvalue())
    if close_profiler:
        out = io.StringIO()
        pstats.Stats(close_profiler, stream=out).sort_stats(os.environ.get("BENCH_SORT", "cumulative")).print_stats(
            args.profile_close)
        print(out.getvalue())
    if profiler:
        if os.environ.get("BENCH_DUMP"):
            profiler.dump_stats(os.environ["BENCH_DUMP"])
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats(os.environ.get("BENCH_SORT", "cumulative"))
        stats.print_stats(args.profile)
        if os.environ.get("BENCH_CALLEES"):
            stats.print_callees(os.environ["BENCH_CALLEES"])
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
