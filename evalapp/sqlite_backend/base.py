"""SQLite for a served study: write transactions queue for the database instead of polling it.

SQLite admits one writer at a time. A writer that finds the file locked polls it with growing
sleeps (up to 100 ms each), so under many concurrent annotators a waiting request can miss
hand-over after hand-over and wait seconds (docs/benchmarks.md). Here
every transaction (``BEGIN IMMEDIATE``, the settings' transaction mode) first takes this
process's writer lock and then an exclusive ``flock`` on ``<database>.writers``, both released
when it commits or rolls back: writers of all threads and processes then wait in the kernel and
are woken the moment the writer before them is done. Reads never wait (WAL).
"""
from __future__ import annotations

import fcntl
import os
import threading

from django.db.backends.sqlite3 import base

# A process-wide lock (not per connection): Django gives each thread its own connection.
_process_writer = threading.Lock()
_lock_files: dict[str, tuple[int, int]] = {}  # database path -> (pid, fd)
_lock_files_guard = threading.Lock()


def _lock_file(path: str) -> int | None:
    """This process's descriptor of the database's writers lock file (None: in-memory db)."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    with _lock_files_guard:
        pid, fd = _lock_files.get(path, (None, None))
        if pid != os.getpid():  # opened before a fork: a child needs its own open file
            fd = os.open(path + ".writers", os.O_RDWR | os.O_CREAT, 0o600)
            _lock_files[path] = (os.getpid(), fd)
        return fd


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_writer_lock = False

    def _start_transaction_under_autocommit(self):
        fd = _lock_file(str(self.settings_dict["NAME"]))
        if not _process_writer.acquire(timeout=self.settings_dict["OPTIONS"].get("timeout", 20)):
            raise self.Database.OperationalError("database is locked (another writer held it too long)")
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            self._holds_writer_lock = True
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_writer_lock()
            raise

    def _release_writer_lock(self):
        if self._holds_writer_lock:
            self._holds_writer_lock = False
            fd = _lock_file(str(self.settings_dict["NAME"]))
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            _process_writer.release()

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_writer_lock()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_writer_lock()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._release_writer_lock()
