"""A local server that speaks OpenAI's documented chat-completions protocol, for judge runs
under test: ``POST /v1/chat/completions`` with ``model`` and ``messages`` answers
``{"id", "object": "chat.completion", "created", "model", "choices": [{"index": 0, "message":
{"role": "assistant", "content"}, "finish_reason": "stop"}], "usage": {"prompt_tokens",
"completion_tokens", "total_tokens"}}``; errors are ``{"error": {"message", "type", "code"}}``
with their HTTP status. It runs in a thread of the test process on a free loopback port; the
app reaches it with the real ``openai`` client, as it would reach any endpoint.

The judge it plays reads the two answers from MT-Bench's markers and each answer's
``(quality N)``; equal qualities are a tie (``[[C]]``), and otherwise it is position-biased:
with probability ``2 * first_share - 1`` it names the answer shown first whatever the texts,
else the better one, so that over both orders the first-shown answer wins ``first_share`` of
the non-tie verdicts. Every draw is deterministic: a hash of the model and the user message.
It can refuse every ``fail_every``-th request (500 and 429 in turn), answer ``unparsed_share``
of them without a verdict, take ``delay`` seconds per answer, and demand an API key.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ANSWER = r"\[The Start of Assistant {0}'s Answer\]\n(.*?)\n\[The End of Assistant {0}'s Answer\]"
_QUALITY = re.compile(r"\(quality (\d+)\)")


def _draw(model: str, text: str, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}\0{model}\0{text}".encode()).hexdigest()
    return int(digest[:13], 16) / 16 ** 13


def quality(text: str) -> int:
    found = _QUALITY.search(text)
    return int(found.group(1)) if found else 0


def fake_verdict(model: str, user: str, *, first_share: float, unparsed_share: float = 0.0) -> str | None:
    """The letter the fake judge gives for a user message (None: it answers without one)."""
    if _draw(model, user, "unparsed") < unparsed_share:
        return None
    a = re.search(_ANSWER.format("A"), user, re.S)
    b = re.search(_ANSWER.format("B"), user, re.S)
    qa, qb = quality(a.group(1) if a else ""), quality(b.group(1) if b else "")
    if qa == qb:
        return "C"
    if _draw(model, user, "position") < 2 * first_share - 1:
        return "A"
    return "A" if qa > qb else "B"


class FakeJudgeServer:
    """Start with ``start()`` (returns the base URL, ``…/v1``), stop with ``stop()``; or use it as
    a context manager. Counters (under ``lock``): requests, answers (Counter of letters, None
    for no verdict), failures (Counter of statuses), tokens, authorizations seen, system
    prompts seen, the most answers being prepared at once (with a delay)."""

    def __init__(self, *, first_share: float = 0.7, fail_every: int = 0, delay: float = 0.0,
                 unparsed_share: float = 0.0, api_key: str | None = None):
        self.first_share, self.fail_every, self.delay = first_share, fail_every, delay
        self.unparsed_share, self.api_key = unparsed_share, api_key
        self.lock = threading.Lock()
        self.requests = 0
        self.answers: Counter = Counter()
        self.failures: Counter = Counter()
        self.prompt_tokens = self.completion_tokens = 0
        self.authorizations: set[str] = set()
        self.systems: set[str] = set()
        self.models: set[str] = set()
        self.in_flight = self.most_in_flight = 0
        self._server: ThreadingHTTPServer | None = None

    # -- the protocol ---------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler) -> tuple[int, dict, dict]:
        if handler.path.rstrip("/") != "/v1/chat/completions":
            return 404, {"error": {"message": "not found", "type": "invalid_request_error", "code": None}}, {}
        length = int(handler.headers.get("content-length") or 0)
        try:
            body = json.loads(handler.rfile.read(length) or b"{}")
            model, messages = body["model"], body["messages"]
        except (ValueError, KeyError, TypeError):
            return 400, {"error": {"message": "model and messages are required", "type": "invalid_request_error",
                                   "code": None}}, {}
        authorization = handler.headers.get("authorization", "")
        with self.lock:
            self.requests += 1
            number = self.requests
            self.authorizations.add(authorization)
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            return 401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                   "code": "invalid_api_key"}}, {}
        if self.fail_every and number % self.fail_every == 0:
            status = 500 if (number // self.fail_every) % 2 else 429
            with self.lock:
                self.failures[status] += 1
            kind = "server_error" if status == 500 else "rate_limit_exceeded"
            return status, {"error": {"message": f"injected {status}", "type": kind, "code": None}}, (
                {"retry-after": "0"} if status == 429 else {})
        if self.delay:
            with self.lock:
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            time.sleep(self.delay)
            with self.lock:
                self.in_flight -= 1
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        letter = fake_verdict(model, user, first_share=self.first_share, unparsed_share=self.unparsed_share)
        content = ("Both answers were read with care. " + (f"Final verdict: [[{letter}]]" if letter
                                                           else "I cannot decide between them."))
        prompt_tokens = sum(len(m.get("content", "")) for m in messages) // 4 + 1
        completion_tokens = len(content) // 4 + 1
        with self.lock:
            self.answers[letter] += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.systems.add(system)
            self.models.add(model)
        return 200, {
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }, {}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (http.server's name)
                status, body, headers = server._answer(self)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet
                pass

        return Handler

    # -- life -----------------------------------------------------------------------------
    def start(self) -> str:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True).start()
        return self.base_url

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeJudgeServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def decisive_first_share(self) -> float:
        """Of the verdicts answered that were not a tie, the share that named the first answer."""
        decisive = self.answers["A"] + self.answers["B"]
        return self.answers["A"] / decisive if decisive else float("nan")
