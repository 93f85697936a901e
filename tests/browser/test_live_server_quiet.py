"""The browser tests' wait for the live server's last requests before the database is flushed
(tests/browser/conftest.py, ``_live_server_quiet_before_flush``; tests/builders/live_server.py):
it waits for the live server's requests, and only for them."""
import threading
from wsgiref.util import setup_testing_defaults

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started

from tests.builders.live_server import in_flight


@pytest.mark.django_db
def test_an_unclosed_response_of_the_tests_own_thread_is_not_waited_for():
    # schemathesis calls the WSGI application in the test's thread and leaves the response
    # unclosed, so no request_finished comes: counted, every later teardown waited 5 s.
    environ = {"PATH_INFO": "/", "REQUEST_METHOD": "GET"}
    setup_testing_defaults(environ)
    WSGIHandler()(environ, lambda status, headers, exc_info=None: None)
    assert in_flight.wait_for_quiet(timeout=1.0)


def test_a_request_the_live_server_answers_in_its_own_thread_is_waited_for():
    answering, answered = threading.Event(), threading.Event()

    def serve():
        request_started.send(sender=WSGIHandler, environ={})
        answering.set()
        answered.wait(5)
        request_finished.send(sender=WSGIHandler)

    server = threading.Thread(target=serve)
    server.start()
    answering.wait(5)
    try:
        assert not in_flight.wait_for_quiet(timeout=0.3)
    finally:
        answered.set()
        server.join()
    assert in_flight.wait_for_quiet(timeout=1.0)
