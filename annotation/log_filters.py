"""Logging filters (wired in settings.LOGGING)."""
from __future__ import annotations

import logging


class ForbiddenWithoutTraceback(logging.Filter):
    """A 403 is an expected answer, not a fault: log it as one line with its reason, no traceback.

    Django logs ``PermissionDenied`` with the exception attached, which prints a full
    traceback for every refused request; the reason alone is what an operator needs.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403 and record.exc_info:
            reason = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({reason})" if str(reason) else record.getMessage()
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True
