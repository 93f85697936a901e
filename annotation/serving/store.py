"""The serving store: every statement of the serving loop (lease, submit, next HIT, release,
reclaim, and a crowd worker's entry: its Annotator and CrowdSession upserts), one named
function each.

The ORM builds and compiles a statement anew on every call; on the serving loop that was more
than half of the web tier's CPU (docs/benchmarks.md, "The hot path").
The loop's statements are therefore written once, here, as plain SQL that runs unchanged on
SQLite and PostgreSQL (double-quoted identifiers, ``%s`` parameters, no vendor functions),
with three exceptions on PostgreSQL, where every statement is a round trip to the server:
a submit's four writes (``judgement_submit_write``), a lease's three with the read of its HIT's
texts (``lease_write``, ``lease_texts``) and a lease's read of the open pairs with the first
one's lock (``open_pairs_first_locked``) are one statement each there (data-modifying WITH
clauses), and one statement per write on SQLite; and the EXISTS of the statements planned on
every run end in a fence there (``_fence``).
So are an import's writes of its outputs and their metric scores (``outputs_insert``,
``metric_scores_insert``: 400,000 rows each at 200 systems x 2,000 items, where the ORM's
``bulk_create`` built and compiled a model instance per row): one INSERT the driver runs per
row (executemany) on SQLite, one COPY FROM STDIN in the binary format on PostgreSQL
(``_copy_rows``: the same prepared values, typed by the columns, several times less CPU on
both ends than a statement per row). Everything else keeps the ORM.
Nothing outside this module writes SQL for the serving tables, nor writes those two tables.

Invariants kept here (docs/architecture.md, "Serving invariants"):

- ``PairState.leased`` changes only through ``_LEASED_PLUS`` (``pair_leases_add`` and
  ``pair_save``, and on PostgreSQL inside ``lease_write`` and ``judgement_submit_write``): a
  pair is served while ``quota_left > leased``.
- A pair row is locked only by ``_pair_lock_sql`` (``pair_lock_open`` and, on PostgreSQL,
  ``open_pairs_first_locked`` for a lease, ``pair_row_locked`` for everything else), inside the
  caller's transaction.

Values cross the boundary as the ORM's own: a read converts every column with Django's own
converters for its field (the backend's ``get_db_converters`` and the field's
``from_db_value``, as the ORM's compiler does), a write prepares every column with the field's
``get_db_prep_save``. Table names come from the models. Reads return small frozen dataclasses,
or model instances where the caller needs one (an Assignment for the screens, a PairState for
the protocol codec), built with ``Model.from_db`` (other fields deferred).

On PostgreSQL a statement is prepared on the connection after a few runs and may then run on a
generic plan (evalapp/settings/base.py); the few whose best plan depends on the data are sent
unprepared, planned on every run (``planned_per_run``; docs/serving.md, "Query plans and
statements").
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from django.db import connection
from django.db.models import Model

from ..models import (
    Annotator,
    AnnotatorExclusion,
    Assignment,
    CheckItem,
    Comparison,
    CrowdSession,
    Item,
    Judgement,
    JudgementKind,
    MetricScore,
    Output,
    PairState,
    Study,
)


def _table(model: type[Model]) -> str:
    return f'"{model._meta.db_table}"'


def _select(columns: tuple[str, ...], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{column}"' for column in columns)


STUDY, ANNOTATOR, CROWD_SESSION = _table(Study), _table(Annotator), _table(CrowdSession)
ITEM, OUTPUT, COMPARISON, PAIR = _table(Item), _table(Output), _table(Comparison), _table(PairState)
ASSIGNMENT, JUDGEMENT, EXCLUSION, CHECK_ITEM = (_table(Assignment), _table(Judgement), _table(AnnotatorExclusion),
                                                _table(CheckItem))

# The columns of an Assignment and of a pair row as the loop reads them, in model order.
ASSIGNMENT_COLUMNS = ("id", "annotator_id", "comparison_id", "check_item_id", "shown_swapped", "round", "issued_at",
                      "expires_at", "state", "kind", "draw_probability")
PAIR_COLUMNS = ("id", "study_id", "first_id", "second_id", "status", "decision", "theta", "theta_se", "round",
                "quota_left", "leased", "version", "state", "criteria_state", "updated_at")
# The columns a submit writes of a new Judgement (its primary key comes back).
JUDGEMENT_COLUMNS = ("comparison_id", "check_item_id", "annotator_id", "assignment_id", "value", "answers",
                     "seconds_on_task", "read_seconds", "server_seconds", "kind", "idempotency_key", "source", "created_at")
_ASSIGNMENT_SELECT = _select(ASSIGNMENT_COLUMNS, "a.")
_PAIR_SELECT = _select(PAIR_COLUMNS)
# The one expression that moves the live-lease counter (by a parameter, or by an expression of
# the statement it is part of: ``judgement_submit_write`` on PostgreSQL).
_LEASED_PLUS = '"leased" = "leased" + {}'


# The columns an import writes of an Output and of a MetricScore (their primary keys are new).
OUTPUT_COLUMNS = ("item_id", "system_id", "sample", "text", "messages", "html")
METRIC_SCORE_COLUMNS = ("metric_id", "output_id", "value")


# --- Results ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OpenPair:
    """A pair row with a round open and quota beyond its live leases."""
    id: int
    round: int
    quota_left: int
    leased: int
    first_id: int
    second_id: int


@dataclass(frozen=True, slots=True)
class PairItem:
    """One item of a pair (both systems have an output for it) as a lease sees it.

    A pair's comparison of an item is stored when it is first leased, judged or scored for
    separability (docs/architecture.md, "Comparisons exist for what is used"): until then
    ``comparison_id`` is None and the item is free, unjudged and unscored.
    """
    item_id: int
    comparison_id: int | None
    judgement_count: int
    lease_expires_at: datetime | None   # a live or expired lease's expiry, else None
    separability: float | None
    mine: bool        # judged or skipped by the annotator
    withdrawn: bool   # the item is withdrawn


@dataclass(frozen=True, slots=True)
class EarlierJudgement:
    """A judgement already stored for a comparison (read under its pair's lock)."""
    assignment_id: int
    idempotency_key: str
    annotator_id: int


@dataclass(frozen=True, slots=True)
class ComparisonServing:
    """A comparison's serving counters."""
    judgement_count: int
    lease_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class LiveLease:
    """A LEASED assignment of a comparison, with the comparison's pair."""
    comparison_id: int
    pair_id: int


@dataclass(frozen=True, slots=True)
class HeldLease:
    """A comparison's HIT as a page that shows it asks after it (leave and keep)."""
    state: str
    expires_at: datetime
    comparison_id: int
    item_id: int
    round: int


@dataclass(frozen=True, slots=True)
class HitTexts:
    """What a comparison's HIT shows: its item (an Item, other fields deferred), its two systems
    and every sample of their outputs, ``(system_id, sample, text, messages, html)`` ordered by
    system, sample (``messages``: a conversation's turns, None for a text; ``html``: the text
    rendered at import, "" in a plain study)."""
    item: Item
    first_id: int
    second_id: int
    outputs: tuple[tuple[int, int, str, list | None, str], ...]


# --- Conversion (Django's own, per field) --------------------------------------------------

@lru_cache(maxsize=None)
def _fields(model: type[Model], columns: tuple[str, ...]) -> tuple:
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    return tuple(by_attname[column] for column in columns)


@lru_cache(maxsize=None)
def _converters(model: type[Model], columns: tuple[str, ...]) -> tuple:
    """Per column, the converters the ORM's compiler applies to a value read from the database:
    the backend's for the field's type, then the field's own (``from_db_value``)."""
    result = []
    for field in _fields(model, columns):
        column = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        result.append((tuple(found), column))
    return tuple(result)


def _read(model: type[Model], columns: tuple[str, ...], values) -> list:
    out = []
    for (converters, column), value in zip(_converters(model, columns), values):
        for convert in converters:
            value = convert(value, column, connection)
        out.append(value)
    return out


def _instance(model: type[Model], columns: tuple[str, ...], values) -> Model:
    """A ``model`` instance from ``columns`` (attnames) as a cursor read them, converted as the
    ORM converts them; the model's other fields are deferred (read on first access)."""
    return model.from_db(connection.alias, columns, _read(model, columns, values))


def _prepared(obj: Model, columns: tuple[str, ...]) -> list:
    """``obj``'s values of ``columns``, each prepared by its field as the ORM saves it."""
    return [field.get_db_prep_save(getattr(obj, field.attname), connection)
            for field in _fields(type(obj), columns)]


def _datetime(model: type[Model], attname: str, value: datetime | None):
    """A datetime parameter of a WHERE or SET, prepared by its field (SQLite: naive UTC text)."""
    return _fields(model, (attname,))[0].get_db_prep_save(value, connection)


def _unprepared(execute, sql, params, many, context):
    """Django's execute wrapper (database instrumentation: the statement still logged, its
    errors still Django's) that has psycopg send the statement unnamed, never prepared.
    PostgreSQL plans an unnamed statement for its parameters and the tables as they are on every
    run; a prepared one it may run on a generic plan, kept for the connection's life."""
    cursor = context["cursor"]
    cursor.db.validate_no_broken_transaction()
    with cursor.db.wrap_database_errors:
        return cursor.cursor.execute(sql, params, prepare=False)


def _run(cursor, sql: str, params: tuple | list, planned_per_run: bool) -> None:
    """Run one of the store's statements. ``planned_per_run``: a statement whose best plan
    depends on its parameters and on tables that grow with use (the connection lets PostgreSQL
    keep a generic plan of a prepared statement, evalapp/settings/base.py): sent unprepared on
    PostgreSQL, so that it is planned on every run (SQLite plans every statement anyway)."""
    if planned_per_run and connection.vendor == "postgresql":
        with connection.execute_wrapper(_unprepared):
            cursor.execute(sql, params)
    else:
        cursor.execute(sql, params)


def _rows(sql: str, params: tuple | list = (), *, planned_per_run: bool = False) -> list[tuple]:
    with connection.cursor() as cursor:
        _run(cursor, sql, params, planned_per_run)
        return cursor.fetchall()


def _one(sql: str, params: tuple | list = (), *, planned_per_run: bool = False) -> tuple | None:
    with connection.cursor() as cursor:
        _run(cursor, sql, params, planned_per_run)
        return cursor.fetchone()


def _execute(sql: str, params: tuple | list = ()) -> int:
    """Run a write; returns the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _insert(obj: Model, columns: tuple[str, ...]) -> None:
    """INSERT the ``columns`` of the unsaved ``obj``; sets its primary key (a saved instance)."""
    obj.pk = _one(_insert_sql(type(obj), columns), _prepared(obj, columns))[0]
    obj._state.adding = False
    obj._state.db = connection.alias


# Fields whose value a driver takes as the ORM would prepare it, when it has the field's Python
# type already (an int, a float, a str): ``_insert_many`` skips their get_db_prep_save.
_PLAIN_TYPES = frozenset({"AutoField", "BigAutoField", "BigIntegerField", "CharField", "FloatField", "ForeignKey",
                          "IntegerField", "PositiveIntegerField", "PositiveSmallIntegerField", "SmallIntegerField",
                          "TextField"})


@lru_cache(maxsize=None)
def _preparers(model: type[Model], columns: tuple[str, ...]) -> tuple:
    """Per column, the field's get_db_prep_save, or None for a plain one (``_PLAIN_TYPES``)."""
    return tuple(None if field.get_internal_type() in _PLAIN_TYPES else field.get_db_prep_save
                 for field in _fields(model, columns))


def _insert_many(model: type[Model], columns: tuple[str, ...], rows: Iterable[Sequence]) -> None:
    """INSERT one row per entry of ``rows`` (values of ``columns``, each of its field's Python
    type), prepared as the ORM saves them, in one statement the driver runs per row
    (executemany). No primary key comes back: read the rows to learn them."""
    preparers = _preparers(model, columns)
    if any(preparers):
        rows = ([value if prepare is None else prepare(value, connection) for prepare, value in zip(preparers, row)]
                for row in rows)
    if connection.vendor == "postgresql":
        _copy_rows(model, columns, rows)
        return
    with connection.cursor() as cursor:
        cursor.executemany(_insert_values_sql(model, columns), rows)


def _copy_rows(model: type[Model], columns: tuple[str, ...], rows: Iterable[Sequence]) -> None:
    """PostgreSQL: ``_insert_many``'s rows (prepared values) through one COPY FROM STDIN in the
    binary format, typed by the columns' database types: the same values as the executemany's
    INSERTs (a float's 8 bytes, a text's UTF-8, a jsonb's JSON text: no text-format escaping to
    get right), at a fraction of the client's and the server's CPU (docs/benchmarks.md, "Import").
    The statement runs on the driver's cursor: Django's execute wrappers do not see it; its
    errors are Django's (a foreign key's or a unique constraint's IntegrityError)."""
    connection.validate_no_broken_transaction()
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(_copy_sql(model, columns)) as copy:
            copy.set_types(_copy_types(model, columns))
            for row in rows:
                copy.write_row(row)


@lru_cache(maxsize=None)
def _copy_sql(model: type[Model], columns: tuple[str, ...]) -> str:
    return (f"COPY {_table(model)} (" + ", ".join(f'"{c}"' for c in columns) + ") FROM STDIN (FORMAT BINARY)")


@lru_cache(maxsize=None)
def _copy_types(model: type[Model], columns: tuple[str, ...]) -> list[str]:
    """The columns' PostgreSQL types as the schema declares them (a foreign key: its target's)."""
    return [field.db_type(connection) for field in _fields(model, columns)]


@lru_cache(maxsize=None)
def _insert_values_sql(model: type[Model], columns: tuple[str, ...]) -> str:
    return (f"INSERT INTO {_table(model)} (" + ", ".join(f'"{c}"' for c in columns) + ") VALUES ("
            + ", ".join(["%s"] * len(columns)) + ")")


@lru_cache(maxsize=None)
def _insert_sql(model: type[Model], columns: tuple[str, ...]) -> str:
    return _insert_values_sql(model, columns) + f' RETURNING "{model._meta.pk.attname}"'


def _fence() -> str:
    """What ends an EXISTS subquery that PostgreSQL must run as a subplan, once per row of the
    outer query (its key probed), rather than pull up into a semi-join of the outer query:
    ``OFFSET 0`` (which the planner keeps as a fence) on PostgreSQL, '' on SQLite (which allows
    no OFFSET without LIMIT, and runs an EXISTS as a correlated subquery anyway). Used in the
    statements planned on every run (``planned_per_run``), where each semi-join pulled up was
    one more relation in the planner's join search: the lease's read of a pair's items planned
    in 0.39 ms and ran in 0.16 ms with them, 0.18 and 0.12 ms fenced (docs/serving.md, "Where
    the backend's time goes")."""
    return " OFFSET 0" if connection.vendor == "postgresql" else ""


def _for_update(*, skip_locked: bool = False) -> str:
    """The row-lock clause of this database ('' on SQLite, whose write transaction locks all)."""
    if not connection.features.has_select_for_update:
        return ""
    return " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"


# --- Studies, workers ----------------------------------------------------------------------

@lru_cache(maxsize=None)
def _study_read() -> tuple[tuple[str, ...], str]:
    """The study's columns and the statement that reads them by slug, built once per process
    (joining ~60 quoted column names on every request was ~60 Python calls of each)."""
    columns = tuple(field.attname for field in Study._meta.concrete_fields)
    return columns, f'SELECT {_select(columns)} FROM {STUDY} WHERE "slug" = %s'


def study_of_slug(slug: str) -> Study | None:
    """The study at ``slug`` (every column): the first read of every annotator request."""
    columns, sql = _study_read()
    row = _one(sql, [slug])
    return _instance(Study, columns, row) if row is not None else None


@lru_cache(maxsize=None)
def _annotator_read() -> tuple[tuple[str, ...], str]:
    """The annotator's columns and the statement that reads a crowd worker of a study, built once."""
    columns = tuple(field.attname for field in Annotator._meta.concrete_fields)
    return columns, (f'SELECT {_select(columns, "a.")} FROM {ANNOTATOR} a '
                     f'JOIN {CROWD_SESSION} s ON s."annotator_id" = a."id" WHERE a."id" = %s AND s."study_id" = %s')


def crowd_annotator(annotator_id: int, study_id: int) -> Annotator | None:
    """The annotator ``annotator_id`` if they entered ``study_id`` as a crowd worker."""
    columns, sql = _annotator_read()
    row = _one(sql, [annotator_id, study_id])
    return _instance(Annotator, columns, row) if row is not None else None


def annotator_of_worker(platform: str, worker_id: str, session_id: str, now: datetime) -> Annotator:
    """The Annotator of a crowd worker's platform session (every column), stored (created at
    ``now``) if new: one upsert, and a read only when the row was there (Django's get_or_create
    read first, then inserted in a savepoint of its own: four round trips on PostgreSQL for a
    new worker). Two entries at once find the one row (the INSERT waits for the other's)."""
    columns, _ = _annotator_read()
    row = _one(_ANNOTATOR_INSERT.format(columns=_select(columns)),
               [platform, worker_id, session_id, _datetime(Annotator, "created_at", now)])
    if row is None:
        row = _one(f'SELECT {_select(columns)} FROM {ANNOTATOR} WHERE "platform" = %s AND "external_id" = %s '
                   'AND "session_id" = %s', [platform, worker_id, session_id])
    return _instance(Annotator, columns, row)


# The conflict target is the constraint annotator_unique_external_session.
_ANNOTATOR_INSERT = (f'INSERT INTO {ANNOTATOR} ("user_id", "platform", "external_id", "session_id", "created_at") '
                     'VALUES (NULL, %s, %s, %s, %s) ON CONFLICT ("platform", "external_id", "session_id") DO NOTHING '
                     'RETURNING {columns}')


def crowd_session_bind(study_id: int, annotator_id: int, platform_session_id: str, now: datetime) -> None:
    """Bind the annotator to the study (a CrowdSession with ``platform_session_id``, created at
    ``now``) unless they are bound already (then the binding is left as it is): one upsert, no
    savepoint (crowd_session_one_per_worker is the conflict target)."""
    _execute(f'INSERT INTO {CROWD_SESSION} ("study_id", "annotator_id", "platform_session_id", "created_at", '
             '"legacy_code_mac") VALUES (%s, %s, %s, %s, %s) ON CONFLICT ("study_id", "annotator_id") DO NOTHING',
             [study_id, annotator_id, platform_session_id, _datetime(CrowdSession, "created_at", now), ""])


def annotator_excluded(study_id: int, annotator_id: int) -> bool:
    """Whether the worker is excluded from the study; a statement of its own (a submit reads it
    under the pair's lock, docs/serving.md)."""
    return _one(f'SELECT 1 FROM {EXCLUSION} WHERE "study_id" = %s AND "annotator_id" = %s AND "excluded" LIMIT 1',
                [study_id, annotator_id]) is not None


def annotator_judgement_count(study_id: int, annotator_id: int) -> int:
    """Real judgements of the annotator in the study. Read from the annotator's judgements, each
    checked for its study (an EXISTS): as a join, SQLite walked every comparison of the study
    instead (12,000 for SummEval, per request)."""
    return _one(_judgement_count_sql(), [annotator_id, JudgementKind.REAL, study_id], planned_per_run=True)[0]


@lru_cache(maxsize=None)
def _judgement_count_sql() -> str:
    # The EXISTS fenced (``_fence``): a probe of the comparison's key per judgement of the
    # annotator, the one plan that is right at any size, planned in a fraction of the time.
    return (f'SELECT COUNT(*) FROM {JUDGEMENT} j WHERE j."annotator_id" = %s AND j."kind" = %s '
            f'AND EXISTS (SELECT 1 FROM {COMPARISON} c WHERE c."id" = j."comparison_id" AND c."study_id" = %s'
            f'{_fence()})')


# --- Assignments (HITs) --------------------------------------------------------------------

def _assignment(values) -> Assignment:
    return _instance(Assignment, ASSIGNMENT_COLUMNS, values)


def lease_current(study_id: int, annotator_id: int, now: datetime, *, with_checks: bool) -> Assignment | None:
    """The annotator's live lease in the study (a check's too ``with_checks``), the oldest."""
    row = _one(_lease_current_sql(with_checks), _lease_current_params(study_id, annotator_id, now, with_checks),
               planned_per_run=True)
    return _assignment(row) if row is not None else None


def lease_current_and_judgement_count(study_id: int, annotator_id: int, now: datetime, *,
                                      with_checks: bool) -> tuple[Assignment | None, int]:
    """``lease_current`` and ``annotator_judgement_count``, read in one statement: every screen
    of an annotator asks both (a round trip fewer per request on PostgreSQL)."""
    row = _one(_LEASE_CURRENT_AND_COUNT.format(count=_judgement_count_sql(), lease=_lease_current_sql(with_checks)),
               [annotator_id, JudgementKind.REAL, study_id, *_lease_current_params(study_id, annotator_id, now,
                                                                                    with_checks)],
               planned_per_run=True)
    return (_assignment(row[1:]) if row[1] is not None else None), row[0]


_LEASE_CURRENT_AND_COUNT = "SELECT ({count}), lease.* FROM (SELECT 1) AS one LEFT JOIN ({lease}) AS lease ON TRUE"


@lru_cache(maxsize=None)
def _lease_current_sql(with_checks: bool) -> str:
    # The study of the lease's comparison (or check) asked by a fenced EXISTS (``_fence``), a
    # probe of its primary key per live lease of the annotator, not a join to plan: the
    # statement is planned on every run.
    fence = _fence()
    return (f"SELECT {_ASSIGNMENT_SELECT} FROM {ASSIGNMENT} a "
            'WHERE a."annotator_id" = %s AND a."state" = %s AND a."expires_at" > %s AND ('
            f'EXISTS (SELECT 1 FROM {COMPARISON} c WHERE c."id" = a."comparison_id" AND c."study_id" = %s{fence})'
            + (f' OR EXISTS (SELECT 1 FROM {CHECK_ITEM} k WHERE k."id" = a."check_item_id" AND k."study_id" = %s{fence})'
               if with_checks else "")
            + ') ORDER BY a."issued_at" LIMIT 1')


def _lease_current_params(study_id: int, annotator_id: int, now: datetime, with_checks: bool) -> list:
    return ([annotator_id, Assignment.State.LEASED, _datetime(Assignment, "expires_at", now), study_id]
            + ([study_id] if with_checks else []))


def hit_of_study(study: Study, assignment_id: int) -> Assignment | None:
    """The HIT ``assignment_id`` of ``study`` (a comparison's or a check's), or None; a
    comparison's comes with its comparison (``study`` attached) and its item's external id, as
    a submit needs them: one statement."""
    row = _one(
        f'SELECT {_ASSIGNMENT_SELECT}, c."pair_id", c."item_id", c."first_id", c."second_id", i."external_id" '
        f'FROM {ASSIGNMENT} a LEFT JOIN {COMPARISON} c ON c."id" = a."comparison_id" '
        f'LEFT JOIN {ITEM} i ON i."id" = c."item_id" LEFT JOIN {CHECK_ITEM} k ON k."id" = a."check_item_id" '
        'WHERE a."id" = %s AND (c."study_id" = %s OR k."study_id" = %s)', [assignment_id, study.pk, study.pk])
    if row is None:
        return None
    assignment = _assignment(row[:len(ASSIGNMENT_COLUMNS)])
    if assignment.comparison_id is not None:
        pair_id, item_id, first_id, second_id, external_id = row[len(ASSIGNMENT_COLUMNS):]
        comparison = _instance(Comparison, ("id", "study_id", "item_id", "first_id", "second_id", "pair_id"),
                               [assignment.comparison_id, study.pk, item_id, first_id, second_id, pair_id])
        comparison.study = study
        comparison.item = _instance(Item, ("id", "study_id", "external_id"), [item_id, study.pk, external_id])
        assignment.comparison = comparison
    return assignment


def assignment_insert(assignment: Assignment) -> None:
    """Store a new lease (sets its primary key)."""
    _insert(assignment, ASSIGNMENT_COLUMNS[1:])


def lease_write(study_id: int, pair: OpenPair, item_id: int, assignment: Assignment, *, taking_over: bool) -> None:
    """A lease's writes: the pair's live-lease counter up by one (``taking_over``: instead, the
    comparison's expired lease ended, the counter left as it is), the comparison's lease set to
    the assignment's expiry (``assignment.comparison_id`` None: the item's first lease in the
    pair, its comparison stored with ``comparison_leased_new``'s upsert, and the assignment's
    ``comparison_id`` set), and the new ``assignment`` stored (its primary key set). Call holding
    the pair's lock.

    PostgreSQL: one statement (data-modifying WITH clauses: two round trips and statements fewer
    per lease), which also reads the HIT's texts (``lease_texts``: a round trip fewer again);
    SQLite, where a statement costs no round trip, one statement each.
    """
    expires = _datetime(Comparison, "lease_expires_at", assignment.expires_at)
    if connection.vendor != "postgresql":
        if taking_over:
            leases_of_comparison_expire(assignment.comparison_id)
        else:
            pair_leases_add(pair.id, +1)
        if assignment.comparison_id is None:
            assignment.comparison_id = comparison_leased_new(study_id, pair, item_id, assignment.expires_at)
        else:
            comparison_lease_set(assignment.comparison_id, assignment.expires_at)
        assignment_insert(assignment)
        return
    first = [Assignment.State.EXPIRED, assignment.comparison_id, Assignment.State.LEASED] if taking_over else [pair.id]
    new = assignment.comparison_id is None
    comparison = ([study_id, item_id, pair.first_id, pair.second_id, pair.id, expires] if new
                  else [expires, assignment.comparison_id])
    values = _prepared(assignment, ASSIGNMENT_COLUMNS[1:])
    # The assignment's comparison comes from the comparison's clause (its second value).
    found = _rows(_lease_write_sql(taking_over, new), [*first, *comparison, values[0], *values[2:], item_id,
                                                       pair.first_id, pair.second_id])
    assignment.pk, assignment.comparison_id = found[0][:2]
    assignment._state.adding, assignment._state.db = False, connection.alias
    if all(row[2 + len(_HIT_ITEM_COLUMNS)] is not None for row in found):  # every row an output's
        assignment._lease_texts = _hit_texts_of([row[2:] for row in found], pair.first_id, pair.second_id)


def lease_texts(assignment: Assignment) -> HitTexts | None:
    """What the HIT ``assignment`` shows if ``lease_write`` read it with the lease (PostgreSQL:
    the item and the two systems are known before the write, so its statement returns them, a
    round trip fewer per HIT leased), else None (read them with ``hit_texts``). The texts'
    columns are written by the import alone (a withdrawal writes only ``Item.withdrawn``, which
    they leave out): the texts read in the lease's transaction are the ones a later read finds."""
    return getattr(assignment, "_lease_texts", None)


@lru_cache(maxsize=None)
def _lease_write_sql(taking_over: bool, new: bool) -> str:
    """``lease_write``'s one statement on PostgreSQL: the writes, then the new assignment's id
    and comparison with the HIT's texts, a row per output of the two systems (``hit_texts``'s
    columns; LEFT JOINs, so that the assignment comes back whatever the texts)."""
    first = (_LEASES_OF_COMPARISON_EXPIRE if taking_over
             else f'UPDATE {PAIR} SET {_LEASED_PLUS.format("1")} WHERE "id" = %s')
    comparison = (_COMPARISON_LEASED_NEW if new else
                  f'UPDATE {COMPARISON} SET "lease_expires_at" = %s WHERE "id" = %s RETURNING "id"')
    columns = ASSIGNMENT_COLUMNS[1:]
    return (f'WITH moved AS ({first}), leased AS ({comparison}), inserted AS ('
            f'INSERT INTO {ASSIGNMENT} (' + ", ".join(f'"{c}"' for c in columns) + ') VALUES (%s, '
            '(SELECT "id" FROM leased), ' + ", ".join(["%s"] * (len(columns) - 2))
            + ') RETURNING "id", "comparison_id") '
            f'SELECT inserted."id", inserted."comparison_id", {_HIT_TEXTS_SELECT} FROM inserted '
            f'LEFT JOIN {ITEM} i ON i."id" = %s '
            f'LEFT JOIN {OUTPUT} o ON o."item_id" = i."id" AND o."system_id" IN (%s, %s) '
            'ORDER BY o."system_id", o."sample"')


def assignment_submitted(assignment_id: int, *, only_if_leased: bool) -> bool:
    """Mark the assignment SUBMITTED; ``only_if_leased``: only while it is LEASED (the one write
    that both checks and ends a live lease). True when a row changed."""
    if only_if_leased:
        return _execute(f'UPDATE {ASSIGNMENT} SET "state" = %s WHERE "id" = %s AND "state" = %s',
                        [Assignment.State.SUBMITTED, assignment_id, Assignment.State.LEASED]) == 1
    return _execute(f'UPDATE {ASSIGNMENT} SET "state" = %s WHERE "id" = %s',
                    [Assignment.State.SUBMITTED, assignment_id]) == 1


def leases_of_comparison_expire(comparison_id: int) -> None:
    """End the LEASED assignments of a comparison (an expired lease taken over)."""
    _execute(_LEASES_OF_COMPARISON_EXPIRE, [Assignment.State.EXPIRED, comparison_id, Assignment.State.LEASED])


_LEASES_OF_COMPARISON_EXPIRE = f'UPDATE {ASSIGNMENT} SET "state" = %s WHERE "comparison_id" = %s AND "state" = %s'


def lease_live(assignment_id: int) -> LiveLease | None:
    """The assignment's comparison and pair if it is a LEASED comparison's HIT, else None."""
    row = _one(f'SELECT a."comparison_id", c."pair_id" FROM {ASSIGNMENT} a '
               f'JOIN {COMPARISON} c ON c."id" = a."comparison_id" WHERE a."id" = %s AND a."state" = %s',
               [assignment_id, Assignment.State.LEASED])
    return LiveLease(*row) if row is not None else None


def lease_end(assignment_id: int, state: str) -> None:
    """Set a LEASED assignment's final state (expired or skipped)."""
    _execute(f'UPDATE {ASSIGNMENT} SET "state" = %s WHERE "id" = %s', [state, assignment_id])


def lease_expire(assignment_id: int, state: str = Assignment.State.EXPIRED) -> bool:
    """End a LEASED assignment as ``state`` (expired or skipped), free its comparison and take it
    off its pair's live-lease counter; False (nothing written) when it is not a live comparison
    lease. Call holding the pair's lock."""
    lease = lease_live(assignment_id)
    if lease is None:
        return False
    lease_end(assignment_id, state)
    comparison_lease_set(lease.comparison_id, None)
    pair_leases_add(lease.pair_id, -1)
    return True


def lease_held(assignment_id: int) -> HeldLease | None:
    """The state and expiry of a comparison's HIT, with its comparison's item (None for a check)."""
    row = _one(f'SELECT a."state", a."expires_at", a."comparison_id", c."item_id", a."round" FROM {ASSIGNMENT} a '
               f'JOIN {COMPARISON} c ON c."id" = a."comparison_id" WHERE a."id" = %s', [assignment_id])
    if row is None:
        return None
    state, expires_at = _read(Assignment, ("state", "expires_at"), row[:2])
    return HeldLease(state, expires_at, *row[2:])


def lease_renew(assignment_id: int, comparison_id: int, expires: datetime) -> None:
    """Move a LEASED assignment's expiry (and its comparison's) to ``expires``. Call holding the
    pair's lock."""
    _execute(f'UPDATE {ASSIGNMENT} SET "expires_at" = %s WHERE "id" = %s AND "state" = %s',
             [_datetime(Assignment, "expires_at", expires), assignment_id, Assignment.State.LEASED])
    comparison_lease_set(comparison_id, expires)


def lease_resume(assignment_id: int, comparison_id: int, expires: datetime) -> None:
    """Make an EXPIRED assignment its comparison's live lease again, until ``expires`` (the
    caller moved the pair's counter, or took over an expired lease). Call holding the pair's lock."""
    _execute(f'UPDATE {ASSIGNMENT} SET "state" = %s, "expires_at" = %s WHERE "id" = %s AND "state" = %s',
             [Assignment.State.LEASED, _datetime(Assignment, "expires_at", expires), assignment_id,
              Assignment.State.EXPIRED])
    comparison_lease_set(comparison_id, expires)


def pair_of_assignment(assignment_id: int) -> int | None:
    """The pair of the assignment's comparison (None for a check)."""
    row = _one(f'SELECT c."pair_id" FROM {ASSIGNMENT} a JOIN {COMPARISON} c ON c."id" = a."comparison_id" '
               'WHERE a."id" = %s', [assignment_id])
    return row[0] if row is not None else None


def leases_expired_of_pair(pair_id: int, now: datetime) -> list[int]:
    """The real comparisons' LEASED assignments of the pair past their expiry (repeats hold no
    counter: they simply lapse)."""
    return [pk for pk, in _rows(
        f'SELECT a."id" FROM {ASSIGNMENT} a JOIN {COMPARISON} c ON c."id" = a."comparison_id" '
        'WHERE c."pair_id" = %s AND a."state" = %s AND a."kind" = %s AND a."expires_at" < %s',
        [pair_id, Assignment.State.LEASED, JudgementKind.REAL, _datetime(Assignment, "expires_at", now)])]


def pairs_with_expired_leases(study_id: int, now: datetime) -> set[int]:
    """The study's pairs with a comparison whose lease has expired."""
    return {pk for pk, in _rows(f'SELECT DISTINCT "pair_id" FROM {COMPARISON} '
                                'WHERE "study_id" = %s AND "lease_expires_at" < %s',
                                [study_id, _datetime(Comparison, "lease_expires_at", now)])}


# --- Comparisons ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _pair_items_sql(available_only: bool, one_at_random: bool, skips_free: bool = False, among: int = 0) -> str:
    """The items of a pair with their comparison if it is stored (LEFT JOIN on the comparison's
    unique (item, first, second)); ``available_only``: only those a lease may take
    (``skips_free``: the annotator's skipped ones too); ``among``: only the items of that many
    ids given last. Every EXISTS is fenced (``_fence``): the items are the outer query's rows,
    each subquery a probe of an index by its key."""
    fence = _fence()
    judged_by = (f'EXISTS (SELECT 1 FROM {JUDGEMENT} j WHERE j."comparison_id" = c."id" AND j."annotator_id" = %s'
                 f'{fence})')
    skipped_by = (f'EXISTS (SELECT 1 FROM {ASSIGNMENT} s WHERE s."comparison_id" = c."id" AND s."annotator_id" = %s '
                  f'AND s."state" = %s{fence})')
    if available_only:
        skipped = "" if skips_free else f" AND NOT {skipped_by}"
        mine, where = "FALSE", (
            ' AND NOT i."withdrawn" AND (c."id" IS NULL OR (c."judgement_count" < %s '
            f'AND (c."lease_expires_at" IS NULL OR c."lease_expires_at" <= %s) AND NOT {judged_by}{skipped}))')
    else:
        mine, where = f'(c."id" IS NOT NULL AND ({judged_by} OR {skipped_by}))', ""
    return (f'SELECT i."id", c."id", COALESCE(c."judgement_count", 0), c."lease_expires_at", c."separability", {mine}, '
            f'i."withdrawn" FROM {ITEM} i LEFT JOIN {COMPARISON} c '
            'ON c."item_id" = i."id" AND c."first_id" = %s AND c."second_id" = %s '
            'WHERE i."study_id" = %s '
            f'AND EXISTS (SELECT 1 FROM {OUTPUT} o WHERE o."item_id" = i."id" AND o."system_id" = %s{fence}) '
            f'AND EXISTS (SELECT 1 FROM {OUTPUT} o WHERE o."item_id" = i."id" AND o."system_id" = %s{fence})'
            + where + (f' AND i."id" IN ({", ".join(["%s"] * among)})' if among else "")
            + (" ORDER BY RANDOM() LIMIT 1" if one_at_random else ""))


def pair_items(study_id: int, pair: OpenPair, annotator_id: int, *, ratings_per_item: int | None = None,
               now: datetime | None = None, one_at_random: bool = False, skips_free: bool = False,
               among: Sequence[int] = ()) -> list[PairItem]:
    """The pair's items as a lease sees them. With ``ratings_per_item`` and ``now``: only the
    items a lease to the annotator may take (not withdrawn; no comparison yet, or one with
    fewer judgements, no live lease and no judgement or skip by the annotator -- ``skips_free``:
    their skips do not count), and with ``one_at_random`` one of those drawn by the database
    (or none). Without: every item of the pair (a stratified draw bins all of them).
    ``among``: only the items with these ids (the index finds them: no scan of the pair)."""
    available_only = ratings_per_item is not None
    head = [pair.first_id, pair.second_id, study_id, pair.first_id, pair.second_id]
    if available_only:
        params = [*head, ratings_per_item, _datetime(Comparison, "lease_expires_at", now), annotator_id]
        if not skips_free:
            params += [annotator_id, Assignment.State.SKIPPED]
    else:
        params = [annotator_id, annotator_id, Assignment.State.SKIPPED, *head]
    rows = _rows(_pair_items_sql(available_only, one_at_random, skips_free, len(among)), [*params, *among],
                 planned_per_run=True)
    return [PairItem(item_id, comparison_id, *_read(Comparison, _PAIR_ITEM_COLUMNS, rest[:3]), mine=bool(rest[3]),
                     withdrawn=_read(Item, ("withdrawn",), rest[4:5])[0])
            for item_id, comparison_id, *rest in rows]


_PAIR_ITEM_COLUMNS = ("judgement_count", "lease_expires_at", "separability")


def study_item_ids(study_id: int) -> list[int]:
    """The ids of the study's items (withdrawn ones included)."""
    return [pk for (pk,) in _rows(f'SELECT "id" FROM {ITEM} WHERE "study_id" = %s ORDER BY "id"', [study_id])]


def study_item_kinds(study_id: int) -> dict[int, str]:
    """Item id -> its kind of prompt (``Item.prompt_kind``) of every item of the study that has
    one ({} when none has)."""
    return dict(_rows(f'SELECT "id", "prompt_kind" FROM {ITEM} WHERE "study_id" = %s AND "prompt_kind" <> %s',
                      [study_id, ""]))


def comparison_leased_new(study_id: int, pair: OpenPair, item_id: int, expires: datetime) -> int:
    """Store the pair's comparison of the item, leased until ``expires`` (its first lease);
    returns its id. Call holding the pair's lock. (The separability job may have stored it
    meanwhile, unleased and unjudged: the upsert takes that row.)"""
    return _one(_COMPARISON_LEASED_NEW, [study_id, item_id, pair.first_id, pair.second_id, pair.id,
                                         _datetime(Comparison, "lease_expires_at", expires)])[0]


_COMPARISON_LEASED_NEW = (
    f'INSERT INTO {COMPARISON} ("study_id", "item_id", "first_id", "second_id", "pair_id", "judgement_count", '
    '"lease_expires_at") VALUES (%s, %s, %s, %s, %s, 0, %s) ON CONFLICT ("item_id", "first_id", "second_id") '
    'DO UPDATE SET "pair_id" = excluded."pair_id", "lease_expires_at" = excluded."lease_expires_at" RETURNING "id"')


def comparison_lease_set(comparison_id: int, expires: datetime | None) -> None:
    """Set (or, None, clear) the comparison's live-lease expiry."""
    _execute(f'UPDATE {COMPARISON} SET "lease_expires_at" = %s WHERE "id" = %s',
             [_datetime(Comparison, "lease_expires_at", expires), comparison_id])


def comparison_serving(comparison_id: int) -> ComparisonServing:
    """The comparison's judgement count and lease expiry."""
    row = _one(f'SELECT "judgement_count", "lease_expires_at" FROM {COMPARISON} WHERE "id" = %s', [comparison_id])
    return ComparisonServing(*_read(Comparison, ("judgement_count", "lease_expires_at"), row))


def comparison_judged(comparison_id: int, *, lease_ended: bool) -> None:
    """Count a judgement of the comparison (``lease_ended``: and free it of its live lease)."""
    _execute(f'UPDATE {COMPARISON} SET "judgement_count" = "judgement_count" + 1'
             + (', "lease_expires_at" = NULL' if lease_ended else "") + ' WHERE "id" = %s', [comparison_id])


def hit_texts(comparison_id: int) -> HitTexts:
    """The comparison's item and the outputs of its two systems, in one statement."""
    found = _rows(
        f'SELECT c."first_id", c."second_id", {_HIT_TEXTS_SELECT} '
        f'FROM {COMPARISON} c JOIN {ITEM} i ON i."id" = c."item_id" '
        f'JOIN {OUTPUT} o ON o."item_id" = c."item_id" AND o."system_id" IN (c."first_id", c."second_id") '
        'WHERE c."id" = %s ORDER BY o."system_id", o."sample"', [comparison_id])
    return _hit_texts_of([row[2:] for row in found], found[0][0], found[0][1])


# The item's columns in the model's field order (Model.from_db places values by that order),
# then each output's.
_HIT_ITEM_COLUMNS = ("id", "study_id", "external_id", "input", "input_messages", "reference", "input_html",
                     "reference_html")
_HIT_TEXTS_SELECT = (_select(_HIT_ITEM_COLUMNS, "i.") + ', o."system_id", o."sample", o."text", o."messages", '
                     'o."html"')


def _hit_texts_of(rows: list, first_id: int, second_id: int) -> HitTexts:
    """``HitTexts`` from rows of ``_HIT_TEXTS_SELECT``, one per output."""
    item = _instance(Item, _HIT_ITEM_COLUMNS, rows[0][:len(_HIT_ITEM_COLUMNS)])
    return HitTexts(item=item, first_id=first_id, second_id=second_id,
                    outputs=tuple((system_id, sample, text, _read(Output, ("messages",), [messages])[0], html)
                                  for *_, system_id, sample, text, messages, html in rows))


# --- Judgements ----------------------------------------------------------------------------

def submit_reads(study_id: int, annotator_id: int, comparison_id: int) -> tuple[bool, list[EarlierJudgement]]:
    """Whether the worker is excluded from the study, and the judgements stored for the
    comparison: a submit's two reads under the pair's lock, in one statement of their own (after
    the statement that took the lock: on PostgreSQL a statement's snapshot predates the lock
    wait of the statement that took it, docs/serving.md)."""
    rows = _rows(_SUBMIT_READS, [study_id, annotator_id, comparison_id])
    return bool(rows[0][0]), [EarlierJudgement(*row[1:]) for row in rows if row[1] is not None]


_SUBMIT_READS = (
    f'SELECT EXISTS (SELECT 1 FROM {EXCLUSION} WHERE "study_id" = %s AND "annotator_id" = %s AND "excluded"), '
    f'j."assignment_id", j."idempotency_key", j."annotator_id" FROM (SELECT 1) AS one '
    f'LEFT JOIN {JUDGEMENT} j ON j."comparison_id" = %s')


def judgement_submit_write(judgement: Judgement, row: PairState, columns: tuple[str, ...]) -> ComparisonServing | None:
    """A submit's writes: store ``judgement`` (sets its primary key; uniqueness is the database's),
    mark its assignment SUBMITTED if it is still LEASED (the one write that both checks and ends
    a live lease), count it on its comparison (and free the comparison of the lease it ended),
    write ``columns`` of the pair row ``row`` and take the ended lease off the pair's counter.

    Returns None when the assignment held its lease; else (an expired lease: nothing ended, the
    assignment left as it was) the comparison's counters as they were before this write, for the
    caller to accept the answer (then ``assignment_submitted(..., only_if_leased=False)``) or
    refuse it by rolling the transaction back. Call holding the pair's lock.

    PostgreSQL: one statement (the four writes as data-modifying WITH clauses: three round trips
    and statements fewer per submit); SQLite, where a statement costs no round trip, the same
    writes one statement each.
    """
    comparison_id, assignment_id = judgement.comparison_id, judgement.assignment_id
    if connection.vendor != "postgresql":
        _insert(judgement, JUDGEMENT_COLUMNS)
        held = assignment_submitted(assignment_id, only_if_leased=True)
        before = None if held else comparison_serving(comparison_id)
        comparison_judged(comparison_id, lease_ended=held)
        pair_save(row, columns, leases_change=-1 if held else 0)
        return before
    found = _one(_submit_write_sql(columns), [
        *_prepared(judgement, JUDGEMENT_COLUMNS), Assignment.State.SUBMITTED, assignment_id, Assignment.State.LEASED,
        comparison_id, comparison_id, *_prepared(row, columns), row.pk])
    judgement.pk = found[0]
    judgement._state.adding, judgement._state.db = False, connection.alias
    return None if found[1] else ComparisonServing(*_read(Comparison, ("judgement_count", "lease_expires_at"), found[2:]))


@lru_cache(maxsize=None)
def _submit_write_sql(columns: tuple[str, ...]) -> str:
    """``judgement_submit_write``'s one statement on PostgreSQL. Its clauses see the tables as the
    statement found them (one snapshot): ``before`` reads the comparison's counters before the
    write, and the comparison's and the pair's writes ask ``ended`` whether the lease ended."""
    return (f'WITH inserted AS ({_insert_sql(Judgement, JUDGEMENT_COLUMNS)}), '
            f'ended AS (UPDATE {ASSIGNMENT} SET "state" = %s WHERE "id" = %s AND "state" = %s RETURNING "id"), '
            f'before AS (SELECT "judgement_count", "lease_expires_at" FROM {COMPARISON} WHERE "id" = %s), '
            f'counted AS (UPDATE {COMPARISON} SET "judgement_count" = "judgement_count" + 1, "lease_expires_at" = '
            'CASE WHEN EXISTS (SELECT 1 FROM ended) THEN NULL ELSE "lease_expires_at" END WHERE "id" = %s), '
            f'saved AS ({_pair_save_sql(columns, "CASE WHEN EXISTS (SELECT 1 FROM ended) THEN -1 ELSE 0 END")}) '
            'SELECT (SELECT "id" FROM inserted), EXISTS (SELECT 1 FROM ended), '
            'before."judgement_count", before."lease_expires_at" FROM before')


# --- Pair rows -----------------------------------------------------------------------------

def open_pairs(study_id: int, open_status: str, *, first: int | None = None) -> list[OpenPair]:
    """The study's pairs with status ``open_status`` and quota beyond their live leases, the
    round closest to full first, ties in random order (the pair's ``tie``, drawn anew at every
    write of its state); ``first``: only that many of them (a lease tries a few: building and
    sorting all 1,225 of a 50-system study per lease was a tenth of the web processes' time).
    Read in the order of ``pair_state_serving_idx``: a tie-break drawn by RANDOM() in the read
    sorted every open pair of the study (19,900 at 200 systems) for each lease."""
    return [OpenPair(*row) for row in _rows(
        f'SELECT {_OPEN_PAIR_SELECT} FROM {PAIR} WHERE {_OPEN_PAIR_WHERE} '
        f'ORDER BY {_OPEN_PAIR_ORDER}' + (" LIMIT %s" if first else ""),
        [study_id, open_status, *([first] if first else [])])]


_OPEN_PAIR_SELECT = '"id", "round", "quota_left", "leased", "first_id", "second_id"'
_OPEN_PAIR_WHERE = '"study_id" = %s AND "status" = %s AND "quota_left" > "leased"'
_OPEN_PAIR_ORDER = '"quota_left" - "leased", "tie"'  # pair_state_serving_idx's order


def open_pairs_first_locked(study_id: int, open_status: str, *, first: int) -> tuple[list[OpenPair], bool]:
    """``open_pairs(study_id, open_status, first=first)``, and whether the first of them is now
    locked for the caller's transaction as ``pair_lock_open(..., skip_locked=True)`` locks it
    (False: skipped, no longer open, or no pair). A lease's first two statements in one on
    PostgreSQL; on SQLite, whose write transaction holds the database, the first alone (False).
    Call inside ``transaction.atomic``."""
    if not connection.features.has_select_for_update:
        return open_pairs(study_id, open_status, first=first), False
    rows = _rows(_open_pairs_first_locked_sql(), [study_id, open_status, first, open_status])
    return [OpenPair(*row[:6]) for row in rows], bool(rows) and rows[0][6]


def _pair_lock_sql(select: str, *, open_status: str | None, skip_locked: bool, pair: str = "%s") -> str:
    """The one statement that locks a pair row (FOR UPDATE on PostgreSQL; on SQLite the write
    transaction holds the database); ``pair``: the SQL of the pair's id (a parameter)."""
    return (f'SELECT {select} FROM {PAIR} WHERE "id" = {pair}'
            + (' AND "status" = %s AND "quota_left" > "leased"' if open_status is not None else "")
            + _for_update(skip_locked=skip_locked))


@lru_cache(maxsize=None)
def _open_pairs_first_locked_sql() -> str:
    """The open pairs (read once, so that the order is the same where it is read twice) and the
    lock of the first, as ``pair_lock_open`` takes it."""
    lock = _pair_lock_sql('"id"', open_status="", skip_locked=True,
                          pair=f'(SELECT "id" FROM candidates ORDER BY {_OPEN_PAIR_ORDER} LIMIT 1)')
    return (f'WITH candidates AS MATERIALIZED (SELECT {_OPEN_PAIR_SELECT}, "tie" FROM {PAIR} '
            f'WHERE {_OPEN_PAIR_WHERE} ORDER BY {_OPEN_PAIR_ORDER} LIMIT %s), locked AS ({lock}) '
            f'SELECT {_select(("id", "round", "quota_left", "leased", "first_id", "second_id"), "candidates.")}, '
            'candidates."id" IN (SELECT "id" FROM locked) FROM candidates '
            'ORDER BY candidates."quota_left" - candidates."leased", candidates."tie"')


def pair_lock_open(pair_id: int, open_status: str, *, skip_locked: bool) -> bool:
    """Lock the pair row if it still has unmet quota (False when skipped or no longer open)."""
    return _one(_pair_lock_sql('"id"', open_status=open_status, skip_locked=skip_locked),
                [pair_id, open_status]) is not None


def pair_row_locked(pair_id: int) -> PairState:
    """The pair row (every column), locked for the caller's transaction. Call inside
    ``transaction.atomic``."""
    return _instance(PairState, PAIR_COLUMNS,
                     _one(_pair_lock_sql(_PAIR_SELECT, open_status=None, skip_locked=False), [pair_id]))


def pair_leases_add(pair_id: int, change: int) -> None:
    """Move the pair's live-lease counter by ``change``. Call holding the pair's lock."""
    _execute(_PAIR_LEASES_ADD, [change, pair_id])


_PAIR_LEASES_ADD = f'UPDATE {PAIR} SET {_LEASED_PLUS.format("%s")} WHERE "id" = %s'


def pair_save(row: PairState, columns: tuple[str, ...], *, leases_change: int = 0) -> None:
    """Write ``columns`` of the locked pair row from ``row`` and move its live-lease counter by
    ``leases_change``, in one statement. Call holding the pair's lock."""
    _execute(_pair_save_sql(columns), [*_prepared(row, columns), leases_change, row.pk])


def pairs_save(rows: Sequence[PairState], columns: tuple[str, ...]) -> None:
    """Write ``columns`` of many pair rows from ``rows`` (a round close, a protocol's start):
    ``pair_save``'s statement run once per row by the driver (executemany). Django's
    ``bulk_update`` builds a CASE WHEN per row and column instead, which at 4,950 pairs cost
    most of an import's time resolving 89,100 expressions."""
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(_pair_save_sql(columns), [[*_prepared(row, columns), 0, row.pk] for row in rows])


@lru_cache(maxsize=None)
def _pair_save_sql(columns: tuple[str, ...], change: str = "%s") -> str:
    # A write of the pair's state draws its serving tie-break anew (PairState.tie; RANDOM() on
    # both databases): a pair whose next round opens takes a fresh place among the open pairs
    # equally close to full, as a RANDOM() drawn by every lease's read gave it.
    return (f'UPDATE {PAIR} SET ' + ", ".join(f'"{c}" = %s' for c in columns) + f", {_LEASED_PLUS.format(change)}"
            + ', "tie" = RANDOM() WHERE "id" = %s')


# --- An import's outputs and metric scores -----------------------------------------------------

def outputs_insert(rows: Iterable[Sequence]) -> None:
    """New Output rows, one per entry of ``rows``: values of OUTPUT_COLUMNS (ints, strs, the
    messages as the JSONField takes them). Their ids: read them (``Output`` by item and system)."""
    _insert_many(Output, OUTPUT_COLUMNS, rows)


def metric_scores_insert(rows: Iterable[Sequence]) -> None:
    """New MetricScore rows, one per entry of ``rows``: values of METRIC_SCORE_COLUMNS (ints, a float)."""
    _insert_many(MetricScore, METRIC_SCORE_COLUMNS, rows)
