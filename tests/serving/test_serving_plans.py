"""Every query of the serving loop uses an index (SQLite's EXPLAIN QUERY PLAN), the loop stays
within its number of statements (SQLite and PostgreSQL), and on PostgreSQL its statements whose
plan depends on the data are planned on every run, never on a generic plan.

The loop (submit + next HIT, as htmx sends it) must not scan a table whose size grows with the
study (judgements, comparisons, assignments, outputs): serving cost stays flat as a study fills.
Its CPU cost is mostly per statement (the ORM builds each, the database parses and plans it), so
the count is held down too; docs/serving.md lists the statements.
"""
import json
import re
import tempfile

import pytest
from django.core.signals import request_started
from django.db import connection
from django.db.backends.signals import connection_created
from django.test import Client
from django.test.utils import CaptureQueriesContext
from psycopg import pq

from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.crowd import start_worker

pytestmark = pytest.mark.django_db(transaction=True)
GROWING = ("annotation_judgement", "annotation_comparison", "annotation_assignment", "annotation_output")
# Tables the loop must not walk by the study either: a lease that read every item of the study
# (2,000 at an arena's scale) to draw one was a sixth of the web processes' time under load.
WALKED_BY_STUDY = (*GROWING, "annotation_item")
FORM = re.compile(r'<form method="post" action="([^"]+/hits/\d+/)"')
KEY = re.compile(r'name="key" value="([^"]+)"')
BY_STUDY = re.compile(r"USING (?:COVERING )?INDEX (\S+) \(study_id=\?\)$")


def _one_submit_and_next_hit(client) -> list[dict]:
    """The statements of one crowd worker's submit + next HIT (htmx), in a fresh study."""
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=90)))
    start_worker(client, study.slug, "plans")
    body = client.get(f"/s/{study.slug}/annotate/").content.decode()
    with CaptureQueriesContext(connection) as captured:
        response = client.post(FORM.search(body).group(1), {"key": KEY.search(body).group(1), "answer": "left"},
                               HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and FORM.search(response.content.decode())
    return captured.captured_queries


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="plans are checked on SQLite (PostgreSQL "
                    "plans sequential scans of a test's tiny tables whatever the indexes)")
def test_submit_and_next_hit_use_indexes_only(client):
    queries = _one_submit_and_next_hit(client)
    selects = [q["sql"] for q in queries if q["sql"].startswith("SELECT")]
    scans = []
    with connection.cursor() as cursor:
        for sql in selects:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            for *_, detail in cursor.fetchall():
                if detail.startswith("SCAN") and any(f"SCAN {t}" in detail for t in GROWING) \
                        and "USING" not in detail:
                    scans.append((detail, sql[:160]))
                # An index searched by the study alone walks all the study's rows: a scan too
                # (the judgements of an annotator once walked the study's every comparison).
                # The plan names the table's alias, the index its table.
                by_study = BY_STUDY.search(detail)
                if by_study and (any(f" {t} " in f"{detail} " for t in WALKED_BY_STUDY)
                                 or by_study.group(1).startswith(tuple(f"{t}_" for t in WALKED_BY_STUDY))):
                    scans.append((detail, sql[:160]))
    assert scans == []


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="plans are checked on SQLite")
def test_a_lease_reads_the_first_open_pairs_without_sorting_them_all(client):
    """A lease reads the first OPEN_PAIRS_TRIED_FIRST open pairs in the index's order (closest
    to full first, ties by the pair's random tie-break): ordering by a RANDOM() drawn per row
    sorted every open pair of the study in a temporary b-tree per lease (19,900 at 200 systems,
    2.5 ms of a submit + next HIT's 8.4 ms of CPU; docs/benchmarks.md)."""
    queries = _one_submit_and_next_hit(client)
    reads = [q["sql"] for q in queries
             if q["sql"].startswith("SELECT") and 'FROM "annotation_pairstate" WHERE "study_id"' in q["sql"]]
    assert reads, "the lease read no open pairs"
    sorted_all = []
    with connection.cursor() as cursor:
        for sql in reads:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plan = [detail for *_, detail in cursor.fetchall()]
            if any("TEMP B-TREE" in detail for detail in plan):
                sorted_all.append((plan, sql[:200]))
    assert sorted_all == []


# Reads and writes of one submit + next HIT (docs/serving.md lists them; on PostgreSQL the WITH
# statements that hold several writes count one each); transaction control
# (BEGIN, COMMIT) not counted. PostgreSQL adds the lease's row lock of the pair it picks. Before
# the submit and the lease were trimmed: 20 on SQLite, 21 on PostgreSQL (and one more each with
# the worker's exclusion read under the pair's lock, services/quality.py); 19 and 20 before the
# HIT's comparison, item and outputs were read in one statement; 18 and 19 before issue 41 (the
# exclusion and the comparison's judgements read in one statement; on PostgreSQL a submit's four
# writes, a lease's three, and the open pairs with the first one's lock, one statement each);
# 17 and 12 before the worker's judgement count and live lease were read in one statement
# (PostgreSQL's counted without its WITH statements until then: 10 with them); PostgreSQL 9
# since the lease's write returns the HIT's texts.
LOOP_STATEMENTS = {"sqlite": 16, "postgresql": 9}


def test_submit_and_next_hit_stay_within_their_statements(client):
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=90)))
    start_worker(client, study.slug, "count")
    body = client.get(f"/s/{study.slug}/annotate/").content.decode()
    for _ in range(3):  # a few, so that the count does not hang on one lucky path
        with CaptureQueriesContext(connection) as captured:
            response = client.post(FORM.search(body).group(1), {"key": KEY.search(body).group(1), "answer": "left"},
                                   HTTP_HX_REQUEST="true")
        body = response.content.decode()
        assert response.status_code == 200 and FORM.search(body)
        statements = [q["sql"] for q in captured.captured_queries if q["sql"].startswith(("SELECT", "INSERT", "UPDATE", "WITH"))]
        assert len(statements) <= LOOP_STATEMENTS[connection.vendor], "\n".join(s[:120] for s in statements)


# The loop's statements whose best plan depends on their parameters and on tables that grow
# with use, by their text: the annotator's judgement count, their live lease, and the lease's
# read of a pair's items (docs/serving.md, "Query plans and statements").
PLANNED_PER_RUN = {
    "the judgement count": re.compile(r'SELECT COUNT\(\*\) FROM "annotation_judgement" j WHERE j."annotator_id"'),
    "the live lease": re.compile(r'FROM "annotation_assignment" a WHERE a."annotator_id" = .* a."expires_at" > '),
    "the lease's item read": re.compile(r'FROM "annotation_item" i LEFT JOIN "annotation_comparison" c '),
}


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's plan cache")
def test_the_loop_plans_its_data_dependent_statements_on_every_run(client):
    """PostgreSQL settles on a generic plan for a prepared statement after five runs and keeps it
    for the connection. A study's serving tables start empty and grow with use, so a generic
    plan made at its start stayed: the annotator's judgement count scanned every comparison for
    each of their judgements, slower with every judgement under load at 50 x 2,000
    (docs/benchmarks.md). The statements whose plan depends on the data are never prepared (an
    unnamed statement is planned for its parameters on every run); the lookups by key are, and
    run on the generic plan PostgreSQL chooses for them (planning every run was two fifths of the
    backend's CPU per submit + next HIT)."""
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=90)))
    start_worker(client, study.slug, "plans")
    body = client.get(f"/s/{study.slug}/annotate/").content.decode()
    with CaptureQueriesContext(connection) as captured:
        for _ in range(12):
            response = client.post(FORM.search(body).group(1), {"key": KEY.search(body).group(1), "answer": "left"},
                                   HTTP_HX_REQUEST="true")
            body = response.content.decode()
            assert response.status_code == 200 and FORM.search(body)
    ran = {name for name, pattern in PLANNED_PER_RUN.items()
           if sum(1 for q in captured.captured_queries if pattern.search(q["sql"])) >= 10}
    assert ran == set(PLANNED_PER_RUN), ran  # each runs on every submit + next HIT
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        prepared = cursor.fetchall()
    assert [(name, statement[:80]) for statement, *_ in prepared
            for name, pattern in PLANNED_PER_RUN.items() if pattern.search(statement)] == []
    # The study by its slug, every request's first statement: prepared, on a generic plan.
    by_slug = [row for row in prepared if row[0].startswith('SELECT "id", ') and 'FROM "annotation_study" WHERE "slug"'
               in row[0]]
    assert by_slug and by_slug[0][1] > 0, prepared


# The tables the statements planned on every run may read only by a probe of an index per row
# of their outer query (a subplan), never by a join the planner searches: the count + live lease
# reads the comparisons (the study of each judgement and of the live lease) that way, the item
# read its outputs, judgements and skips.
PROBED = {"the judgement count": {"annotation_comparison"},
          "the lease's item read": {"annotation_output", "annotation_judgement", "annotation_assignment"}}


def _joined(plan: dict, probed: set[str], in_subplan: bool = False) -> list[str]:
    """The ``probed`` tables a plan reads outside a subplan."""
    in_subplan = in_subplan or plan.get("Parent Relationship") == "SubPlan"
    found = [plan["Relation Name"]] if plan.get("Relation Name") in probed and not in_subplan else []
    return found + [name for child in plan.get("Plans", ()) for name in _joined(child, probed, in_subplan)]


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's planner")
def test_the_statements_planned_on_every_run_keep_their_exists_as_subplans(client):
    """The statements planned on every run (above) are planned for each cycle, and each EXISTS
    that PostgreSQL pulled up into a semi-join, or table joined, was one more relation in its
    join search: the lease's item read planned in 0.39 ms (twice its run), the count of the
    worker's judgements could drive from the study's comparisons. Fenced (store._fence), every
    EXISTS is a subplan, a probe of an index by the outer row's key (docs/serving.md, "Where the
    backend's time goes")."""
    queries = _one_submit_and_next_hit(client)
    found = {}
    with connection.cursor() as cursor:
        for query in queries:
            name = next((name for name, pattern in PLANNED_PER_RUN.items()
                         if name in PROBED and pattern.search(query["sql"])), None)
            if name is None:
                continue
            cursor.execute("EXPLAIN (FORMAT JSON) " + query["sql"])
            plan = cursor.fetchone()[0][0]["Plan"]
            found[name] = (query["sql"].count("EXISTS ("), json.dumps(plan).count('"Subplan Name": "SubPlan'),
                           _joined(plan, PROBED[name]))
    assert set(found) == set(PROBED), found
    assert all(exists == subplans and not joined for exists, subplans, joined in found.values()), found


def _between_requests(**kwargs) -> None:
    """What a server does when a request starts (Django's close_old_connections, which the test
    client turns off): a reused connection is then health-checked before its first statement."""
    connection.close_if_unusable_or_obsolete()


class RoundTrips:
    """The round trips to PostgreSQL while the block runs, counted from libpq's trace of the
    connection's messages (every round trip ends with the server's ReadyForQuery): transaction
    control, health checks and statement preparations included, which Django's query log
    leaves out. Each request starts as under a server (``_between_requests``). ``sent``: the
    client's messages, for a failure's message."""

    def __enter__(self):
        self.files = []
        request_started.connect(_between_requests, weak=False)
        connection_created.connect(self._trace, weak=False)
        connection.ensure_connection()
        self._trace(None, connection)
        return self

    def _trace(self, sender, connection, **kwargs) -> None:
        traced = tempfile.TemporaryFile(mode="w+")
        connection.connection.pgconn.trace(traced.fileno())
        connection.connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        self.files.append((connection.connection.pgconn, traced))

    def __exit__(self, *exc) -> None:
        connection_created.disconnect(self._trace)
        request_started.disconnect(_between_requests)
        lines = []
        for pgconn, traced in self.files:
            if pgconn.status == pq.ConnStatus.OK:
                pgconn.untrace()
            traced.seek(0)
            lines += traced.read().splitlines()
            traced.close()
        self.count = sum(1 for line in lines if "\tReadyForQuery\t" in line)
        self.sent = "\n".join(line[:140] for line in lines
                              if line.startswith("F\t") and ("\tQuery\t" in line or "\tBind\t" in line))


# Round trips to PostgreSQL of one submit + next HIT (htmx), and of a new crowd worker's first
# HIT (the start link that leases it and the annotate page it redirects to: what
# scripts/bench/scale_probe.py times), once the loop's statements are prepared on the
# connection (docs/serving.md, "Round trips"). Before they were cut: 17 and 30 (a health
# check's SELECT 1 per request, the crowd worker read per request, the worker's count and live
# lease in two statements; at the start link the entry read twice, get_or_create's reads and
# savepoints, the new session's key looked up and its INSERT in a transaction of its own); 14
# and 16 before the lease's write returned the HIT's texts (store.lease_texts).
LOOP_ROUND_TRIPS = 13
FIRST_HIT_ROUND_TRIPS = 16


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="round trips to the PostgreSQL server")
def test_submit_and_next_hit_and_a_first_hit_stay_within_their_round_trips(client):
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=200)))
    first_hits = []
    for n in range(4):  # the later ones: the loop's statements prepared on the connection
        worker = Client()
        with RoundTrips() as trips:
            start_worker(worker, study.slug, f"first{n}")
            assert FORM.search(worker.get(f"/s/{study.slug}/annotate/").content.decode())
        first_hits.append(trips)
    assert min(t.count for t in first_hits) <= FIRST_HIT_ROUND_TRIPS, ([t.count for t in first_hits],
                                                                        first_hits[-1].sent)
    start_worker(client, study.slug, "trips")
    body = client.get(f"/s/{study.slug}/annotate/").content.decode()
    cycles = []
    for _ in range(6):
        with RoundTrips() as trips:
            response = client.post(FORM.search(body).group(1), {"key": KEY.search(body).group(1), "answer": "left"},
                                   HTTP_HX_REQUEST="true")
        body = response.content.decode()
        assert response.status_code == 200 and FORM.search(body)
        cycles.append(trips)
    assert min(t.count for t in cycles[3:]) <= LOOP_ROUND_TRIPS, ([t.count for t in cycles], cycles[-1].sent)
