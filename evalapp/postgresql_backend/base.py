from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    def close_if_health_check_failed(self):
        if (self.connection is not None and self.health_check_enabled and not self.health_check_done
                and not self.pool and self._idle_and_quiet()):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _idle_and_quiet(self) -> bool:
        """Whether the connection is open, in no transaction, and the server has sent nothing
        since its last statement (its socket has nothing to read): a poll, no round trip."""
        pgconn = self.connection.pgconn
        if self.connection.closed or self.connection.broken or pgconn.status != pq.ConnStatus.OK \
                or pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return False
        try:
            readable, _, _ = select.select([pgconn.socket], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable
