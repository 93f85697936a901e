"""The session engine: Django's cached_db, with two round trips fewer on a new session.

A crowd worker's start link creates their session (docs/serving.md, "Round trips"):

- Django draws a new key and asks the database whether a session has it before the INSERT, a
  read that can only say no (32 random characters of 36: 165 bits). The INSERT of a new
  session (``save(must_create=True)``) refuses a key already taken, and ``create`` then draws
  another: no session is overwritten without the read either.
- Django writes the session in a transaction of its own, which on PostgreSQL is a BEGIN and a
  COMMIT around one statement, that commits alone outside a transaction. SQLite keeps the
  transaction: its writes queue for the database in one (evalapp/sqlite_backend), and a
  session written inside a caller's transaction keeps its savepoint.
"""
from __future__ import annotations

from django.contrib.sessions.backends import cached_db, db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS, CreateError, UpdateError
from django.db import DatabaseError, IntegrityError, connections, router
from django.utils.crypto import get_random_string


class _DatabaseSession(db.SessionStore):
    def save(self, must_create=False):
        """Django's ``db`` save, its one statement sent alone on PostgreSQL outside a transaction."""
        using = router.db_for_write(self.model)
        if self.session_key is None or connections[using].vendor != "postgresql" or \
                connections[using].in_atomic_block:
            return super().save(must_create)
        obj = self.create_model_instance(self._get_session(no_load=must_create))
        try:
            obj.save(force_insert=must_create, force_update=not must_create, using=using)
        except IntegrityError:
            if must_create:
                raise CreateError
            raise
        except DatabaseError:
            if not must_create:
                raise UpdateError
            raise


class SessionStore(cached_db.SessionStore, _DatabaseSession):
    """cached_db (its cache written after the database) over ``_DatabaseSession``."""

    def _get_new_session_key(self) -> str:
        return get_random_string(32, VALID_KEY_CHARS)
