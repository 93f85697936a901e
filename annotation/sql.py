"""Hand-written SQL for the serving loop: the few statements every submit + next HIT runs.

The ORM builds and compiles a statement anew on every call; on the serving loop that was more
than half of the web tier's CPU (docs/serving.md: 17 ms per submit + next HIT, 21 statements).
The loop's statements are therefore written once, here and in their callers, as plain SQL that
runs unchanged on SQLite and PostgreSQL (double-quoted identifiers, ``%s`` parameters, no
vendor functions). Everything else keeps the ORM.

Values cross the boundary as the ORM's own: ``insert`` and ``update`` adapt each value with its
field, ``instance`` reads a row back into a model instance (datetimes aware, JSON decoded), and
``db_datetime`` adapts a datetime compared in a WHERE (SQLite stores naive UTC text).
"""
from __future__ import annotations

import json
from datetime import datetime, timezone as dt_timezone
from functools import lru_cache

from django.db import connection
from django.db.models import Model

# The tables the loop touches, named once (the models' db_table).
STUDY = '"annotation_study"'
ANNOTATOR = '"annotation_annotator"'
CROWD_SESSION = '"annotation_crowdsession"'
ITEM = '"annotation_item"'
OUTPUT = '"annotation_output"'
COMPARISON = '"annotation_comparison"'
PAIR = '"annotation_pairstate"'
ASSIGNMENT = '"annotation_assignment"'
JUDGEMENT = '"annotation_judgement"'
EXCLUSION = '"annotation_annotatorexclusion"'
CHECK_ITEM = '"annotation_checkitem"'


def rows(sql: str, params: tuple | list = ()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def one(sql: str, params: tuple | list = ()) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def execute(sql: str, params: tuple | list = ()) -> int:
    """Run a write; returns the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def for_update(*, skip_locked: bool = False) -> str:
    """The row-lock clause of this database ('' on SQLite, whose write transaction locks all)."""
    if not connection.features.has_select_for_update:
        return ""
    return " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"


def db_datetime(value: datetime | None):
    """A datetime parameter, adapted as the ORM adapts it (SQLite: naive UTC text)."""
    return connection.ops.adapt_datetimefield_value(value)


def instance(model: type[Model], columns: tuple[str, ...], values) -> Model:
    """A ``model`` instance from ``columns`` (attnames) as a cursor read them, each value made what
    the ORM would make of it (datetimes aware, JSON decoded); the model's other fields are
    deferred (read on first access)."""
    readers = _readers(model, columns)
    return model.from_db(connection.alias, columns,
                         [value if read is None or value is None else read(value) for read, value in zip(readers, values)])


def insert(obj: Model, columns: tuple[str, ...]) -> None:
    """INSERT the ``columns`` (attnames) of the unsaved ``obj``, each adapted as the ORM adapts
    its field; sets its primary key, and ``obj`` is then a saved instance."""
    obj.pk = one(_insert_sql(type(obj), columns), _prepared(obj, columns))[0]
    obj._state.adding = False
    obj._state.db = connection.alias


def update(obj: Model, columns: tuple[str, ...]) -> int:
    """UPDATE the ``columns`` (attnames) of ``obj``'s row to its values; returns the rows changed."""
    return execute(_update_sql(type(obj), columns), [*_prepared(obj, columns), obj.pk])


def _prepared(obj: Model, columns: tuple[str, ...]) -> list:
    return [getattr(obj, column) if adapt is None or getattr(obj, column) is None else adapt(getattr(obj, column))
            for column, adapt in zip(columns, _writers(type(obj), columns))]


@lru_cache(maxsize=None)
def _writers(model: type[Model], columns: tuple[str, ...]) -> tuple:
    """Per column, what the ORM does to a value before the driver gets it (None: nothing the
    driver does not do itself; the loop writes numbers, text and booleans, datetimes and JSON)."""
    def writer(field):
        kind = field.get_internal_type()
        if kind == "DateTimeField":
            return db_datetime
        if kind == "JSONField":
            return lambda value: field.get_db_prep_save(value, connection)
        return None

    return tuple(writer(field) for field in _fields(model, columns))


@lru_cache(maxsize=None)
def _fields(model: type[Model], columns: tuple[str, ...]) -> tuple:
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    return tuple(by_attname[column] for column in columns)


@lru_cache(maxsize=None)
def _readers(model: type[Model], columns: tuple[str, ...]) -> tuple:
    """Per column, what turns a cursor's value into the ORM's (None: the value as it is)."""
    def reader(field):
        kind = field.get_internal_type()
        if kind == "DateTimeField":
            return _aware
        if kind == "JSONField":
            return _from_json
        if kind == "BooleanField":
            return bool
        return None

    return tuple(reader(field) for field in _fields(model, columns))


@lru_cache(maxsize=None)
def _insert_sql(model: type[Model], columns: tuple[str, ...]) -> str:
    return (f'INSERT INTO "{model._meta.db_table}" (' + ", ".join(f'"{c}"' for c in columns) + ") VALUES ("
            + ", ".join(["%s"] * len(columns)) + f') RETURNING "{model._meta.pk.attname}"')


@lru_cache(maxsize=None)
def _update_sql(model: type[Model], columns: tuple[str, ...]) -> str:
    return (f'UPDATE "{model._meta.db_table}" SET ' + ", ".join(f'"{c}" = %s' for c in columns)
            + f' WHERE "{model._meta.pk.attname}" = %s')


def _aware(value: datetime) -> datetime:
    """SQLite's converter gives naive UTC; PostgreSQL's value is aware already."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt_timezone.utc)


def _from_json(value):
    """Text on SQLite, text or decoded on PostgreSQL."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value
