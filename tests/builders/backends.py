"""The database and Redis as the tests see them: the database's URL, whether Redis answers,
what a writing statement looks like."""
from __future__ import annotations

import re
import socket

from django.db import connection


REDIS = ("127.0.0.1", 6379)

# An SQL statement that writes (GET never writes: tests/serving/test_get_never_writes.py).
WRITE_STATEMENT = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


def redis_answers() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(REDIS) == 0


def database_url() -> str:
    """The test database as a URL, for a worker process started by a test."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
