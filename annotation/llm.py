"""One OpenAI-compatible chat-completions endpoint, called with the official ``openai`` client
(any base URL: OpenAI, a vLLM or llama.cpp server, a gateway; no vendor's own API). What a
judge run sends and gets back (services/judges.py, docs/judges.md).

A call that meets a 429, a 5xx, a timeout or a lost connection is tried again after a wait
that doubles from ``backoff`` seconds (with up to 25 % jitter, at most 60 s, or the server's
Retry-After when it gives one and it is shorter than a minute), ``max_retries`` times; the
client's own retries are off so that every retry is counted here. Any other refusal (400,
401, 403, 404, 422) ends the call at once. No message raised from here holds the API key.
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import openai

MAX_WAIT = 60.0
RETRY_STATUSES = frozenset({408, 409, 429})


class EndpointError(Exception):
    """A call that failed for good: a refusal retrying cannot mend, or every retry used."""


@dataclass(frozen=True)
class ChatAnswer:
    """The first choice's text and the tokens the endpoint reported (0 when it reported none)."""
    content: str
    prompt_tokens: int
    completion_tokens: int
    retries: int
    seconds: float


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= MAX_WAIT else None


class ChatEndpoint:
    """Calls one endpoint from many threads (the client is shared; it is thread-safe)."""

    def __init__(self, *, base_url: str, api_key: str, timeout: float, max_retries: int, backoff: float,
                 sleep: Callable[[float], None] = time.sleep):
        self._key = api_key
        self._client = openai.OpenAI(api_key=api_key or "none", base_url=base_url, timeout=timeout, max_retries=0)
        self._max_retries = max_retries
        self._backoff = backoff
        self._sleep = sleep
        self._random = random.Random()
        self._lock = threading.Lock()

    def close(self) -> None:
        self._client.close()

    def _clean(self, text: str) -> str:
        """``text`` without the key (an endpoint may echo a key it refused)."""
        return text.replace(self._key, "[the API key]") if self._key else text

    def _wait(self, attempt: int, given: float | None) -> None:
        with self._lock:
            jitter = 1.0 + 0.25 * self._random.random()
        self._sleep(given if given is not None else min(MAX_WAIT, self._backoff * 2 ** attempt) * jitter)

    def complete(self, *, model: str, messages: list[dict[str, str]], temperature: float) -> ChatAnswer:
        """The endpoint's answer to ``messages``; EndpointError when it cannot be had."""
        began = time.perf_counter()
        for attempt in range(self._max_retries + 1):
            last = attempt == self._max_retries
            try:
                response = self._client.chat.completions.create(model=model, messages=messages,
                                                                temperature=temperature)
            except openai.APIStatusError as error:
                status = error.status_code
                if status in (401, 403):
                    raise EndpointError(f"the endpoint refused the API key (HTTP {status})") from None
                if not (status >= 500 or status in RETRY_STATUSES):
                    raise EndpointError(f"the endpoint refused the call (HTTP {status}): "
                                        f"{self._clean(str(error))[:500]}") from None
                if last:
                    raise EndpointError(f"HTTP {status} after {attempt} retries") from None
                self._wait(attempt, _retry_after(error))
                continue
            except openai.APIConnectionError as error:  # APITimeoutError is one
                if last:
                    kind = "timed out" if isinstance(error, openai.APITimeoutError) else "could not connect"
                    raise EndpointError(f"the call {kind} after {attempt} retries") from None
                self._wait(attempt, None)
                continue
            if not response.choices:
                raise EndpointError("the endpoint answered without a choice")
            usage = response.usage
            return ChatAnswer(content=response.choices[0].message.content or "",
                              prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                              completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                              retries=attempt, seconds=time.perf_counter() - began)
        raise AssertionError("unreachable")
