"""The load harness sends the load its scenario states: no burst of its own making."""
import random
import threading
import time

from scripts.bench import load_annotators

PAGE = ('<form method="post" action="/s/x/hits/7/"><input type="hidden" name="csrfmiddlewaretoken" value="t">'
        '<input type="hidden" name="key" value="k"></form>')


def test_a_worker_still_thinking_when_the_run_ends_does_not_submit():
    # Sleeping until the deadline and submitting then made every such worker submit in the same
    # instant: the p99 of a 100-worker run was that burst.
    sent = []

    def timed(method, path, kind, data=None, headers=None):
        sent.append((kind, time.monotonic()))
        return 200, PAGE

    deadline = time.monotonic() + 0.2  # every think time (0.5-1.5 x 1 s) ends after it
    stats = {"acknowledged": []}
    load_annotators._work(None, "x", "w", "htmx", 1000, deadline, {"left": 10}, threading.Lock(), stats,
                          random.Random(1), "http://127.0.0.1/", timed)
    assert [kind for kind, _ in sent] == ["first"]
    assert stats["acknowledged"] == []
