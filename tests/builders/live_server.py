"""What the browser tests wait for before the database is flushed: the live server's requests
still in flight (tests/browser/conftest.py, ``_live_server_quiet_before_flush``)."""
import threading
import time

from django.core.signals import request_finished, request_started


class RequestsInFlight:
    """Requests the live server (a thread of this process) has started and not yet finished,
    counted by Django's own request signals, and when the last one ended.

    Requests made in the tests' own thread are not counted: they are not the live server's
    (which answers in threads of its own) and never run beside a flush, and many of them send
    request_started and no request_finished (schemathesis's calls of the WSGI application
    leave their responses unclosed). Counted, tests/api/test_schemathesis.py's 500-odd
    requests kept the count above 0 for the rest of its test process, and every browser test
    after it there waited the full 5 s at its teardown (40 of them in a run of the suite)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0
        self.last_change = time.monotonic()

    def started(self, **kwargs):
        if threading.get_ident() == TESTS_THREAD:
            return
        with self.lock:
            self.count += 1
            self.last_change = time.monotonic()

    def finished(self, **kwargs):
        if threading.get_ident() == TESTS_THREAD:
            return
        with self.lock:
            self.count = max(0, self.count - 1)
            self.last_change = time.monotonic()

    def wait_for_quiet(self, *, quiet_seconds: float = 0.1, timeout: float = 5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.count == 0 and time.monotonic() - self.last_change >= quiet_seconds:
                    return True
            time.sleep(0.02)
        return False


# The thread that imports this module (through tests/browser/conftest.py) collects and runs
# the tests.
TESTS_THREAD = threading.get_ident()
in_flight = RequestsInFlight()
request_started.connect(in_flight.started, dispatch_uid="browser-tests-in-flight-started")
request_finished.connect(in_flight.finished, dispatch_uid="browser-tests-in-flight-finished")
