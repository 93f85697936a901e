"""Hand-written SQL for the serving loop: the few statements every submit + next HIT runs.

The ORM builds and compiles a statement anew on every call; on the serving loop that was more
than half of the web tier's CPU (docs/serving.md: 17 ms per submit + next HIT, 21 statements).
The loop's statements are therefore written once, here and in their callers, as plain SQL that
runs unchanged on SQLite and PostgreSQL (double-quoted identifiers, ``%s`` parameters, no
vendor functions). Everything else keeps the ORM.

Values cross the boundary through the two helpers below, so that a datetime is written and
compared exactly as the ORM writes it (SQLite stores naive UTC text) and read back aware.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone as dt_timezone

from django.db import connection

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


def aware(value) -> datetime | None:
    """A datetime column as read by a cursor, made aware (SQLite's converter gives naive UTC)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=dt_timezone.utc)


def db_json(value) -> str:
    return json.dumps(value)


def from_json(value):
    """A JSON column as read by a cursor (text on SQLite, text or decoded on PostgreSQL)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value
