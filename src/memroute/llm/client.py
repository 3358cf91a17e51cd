"""The ``LLM`` protocol and one client for OpenAI-compatible chat completions.

OpenAI, vLLM, llama.cpp's server, Ollama (``/v1``) and most corporate gateways speak the same
``POST {base_url}/chat/completions`` protocol. The client pools connections (httpx), retries only what
retrying can fix (429 and 5xx, and connections that failed before a byte was answered) with exponential
backoff inside the call's deadline, never reads more than ``max_response_bytes`` of an answer, and turns
every failure into an :class:`LLMError` saying which one it was, so that a caller can fall back to its
rule-based result and record why.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from memroute.errors import ConfigError, MemrouteError


class LLMError(MemrouteError):
    """An LLM call failed; ``reason`` is one of: timeout, connection, http_<status>, not_openai, too_large."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    attempts: int


class LLM(Protocol):
    model: str

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = True, max_tokens: int = 512,
                 timeout_s: float | None = None) -> Completion: ...

    async def acomplete(self, messages: list[dict[str, str]], *, json_mode: bool = True, max_tokens: int = 512,
                        timeout_s: float | None = None) -> Completion: ...


_RETRY_STATUS = {429, 500, 502, 503, 504}
_KEYED_HOSTS = ("api.openai.com",)


def needs_key(base_url: str) -> bool:
    """Whether the endpoint is a hosted API that refuses every call without a key."""
    return any(host in base_url for host in _KEYED_HOSTS)


class OpenAICompatibleLLM:
    """Chat completions over HTTP. ``api_key`` is required for api.openai.com and optional elsewhere."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 5.0,
                 retries: int = 2, backoff_s: float = 0.25, max_response_bytes: int = 2_000_000,
                 temperature: float = 0.0, require_key: bool = False) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"LLM base URL {base_url!r} must start with http:// or https:// "
                              "(e.g. http://localhost:11434/v1 for Ollama)")
        if not model:
            raise ConfigError("an LLM needs a model name (MEMROUTE_LLM_MODEL)")
        if (require_key or needs_key(base_url)) and not api_key:
            raise ConfigError(f"the LLM endpoint {base_url} needs an API key: set MEMROUTE_LLM_API_KEY, or name the "
                              "variable that holds it with MEMROUTE_LLM_API_KEY_ENV (OPENAI_API_KEY is read for "
                              "api.openai.com)")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_response_bytes = max_response_bytes
        self.temperature = temperature
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=8)
        self._client = httpx.Client(limits=limits, headers=self._headers)
        self._aclient: httpx.AsyncClient | None = None
        self._json_mode_supported = True

    def _payload(self, messages: list[dict[str, str]], json_mode: bool, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                                "temperature": self.temperature, "stream": False}
        if json_mode and self._json_mode_supported:
            body["response_format"] = {"type": "json_object"}
        return body

    # ------------------------------------------------------------- shared by the sync and async calls
    def _timeout(self, timeout_s: float | None) -> LLMError:
        return LLMError("timeout", f"{self.base_url}: no answer within {timeout_s or self.timeout_s:.1f} s")

    def _append_capped(self, buf: bytearray, chunk: bytes, deadline: float, timeout_s: float | None) -> None:
        """httpx's timeouts bound each read, not the whole answer: a server that trickles bytes is cut at the
        call's deadline here."""
        buf += chunk
        if len(buf) > self.max_response_bytes:
            raise LLMError("too_large", f"{self.base_url}: answer larger than {self.max_response_bytes:,} bytes")
        if time.monotonic() > deadline:
            raise self._timeout(timeout_s)

    def _pause(self, attempt: int, deadline: float) -> float | None:
        """How long to wait before retrying, or None when no retry is left or it would miss the deadline."""
        if attempt > self.retries:
            return None
        pause = self.backoff_s * (2 ** (attempt - 1))
        return pause if time.monotonic() + pause < deadline else None

    def _drop_json_mode(self, status: int, raw: bytes, json_mode: bool) -> bool:
        """An older server refused ``response_format``: ask for JSON in the prompt only, and say to resend."""
        if status == 400 and json_mode and self._json_mode_supported and b"response_format" in raw:
            self._json_mode_supported = False
            return True
        return False

    # ---------------------------------------------------------------------------------------------- sync
    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = True, max_tokens: int = 512,
                 timeout_s: float | None = None) -> Completion:
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(timeout_s)
            try:
                with self._client.stream("POST", f"{self.base_url}/chat/completions",
                                         json=self._payload(messages, json_mode, max_tokens),
                                         timeout=httpx.Timeout(remaining)) as response:
                    buf = bytearray()
                    for chunk in response.iter_bytes():
                        self._append_capped(buf, chunk, deadline, timeout_s)
                    status, raw = response.status_code, bytes(buf)
            except httpx.TimeoutException:
                raise self._timeout(timeout_s) from None
            except httpx.TransportError as exc:
                pause = self._pause(attempt, deadline)
                if pause is None:
                    raise LLMError("connection", f"{self.base_url}: cannot connect ({exc})") from exc
                time.sleep(pause)
                continue
            if self._drop_json_mode(status, raw, json_mode):
                continue
            pause = self._pause(attempt, deadline) if status in _RETRY_STATUS else None
            if pause is not None:
                time.sleep(pause)
                continue
            return self._completion(status, raw, started, attempt)

    # --------------------------------------------------------------------------------------------- async
    async def acomplete(self, messages: list[dict[str, str]], *, json_mode: bool = True, max_tokens: int = 512,
                        timeout_s: float | None = None) -> Completion:
        if self._aclient is None:
            self._aclient = httpx.AsyncClient(limits=httpx.Limits(max_connections=16), headers=self._headers)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(timeout_s)
            try:
                async with self._aclient.stream("POST", f"{self.base_url}/chat/completions",
                                                json=self._payload(messages, json_mode, max_tokens),
                                                timeout=httpx.Timeout(remaining)) as response:
                    buf = bytearray()
                    async for chunk in response.aiter_bytes():
                        self._append_capped(buf, chunk, deadline, timeout_s)
                    status, raw = response.status_code, bytes(buf)
            except httpx.TimeoutException:
                raise self._timeout(timeout_s) from None
            except httpx.TransportError as exc:
                pause = self._pause(attempt, deadline)
                if pause is None:
                    raise LLMError("connection", f"{self.base_url}: cannot connect ({exc})") from exc
                await asyncio.sleep(pause)
                continue
            if self._drop_json_mode(status, raw, json_mode):
                continue
            pause = self._pause(attempt, deadline) if status in _RETRY_STATUS else None
            if pause is not None:
                await asyncio.sleep(pause)
                continue
            return self._completion(status, raw, started, attempt)

    # ------------------------------------------------------------------------------------------ parsing
    def _completion(self, status: int, raw: bytes, started: float, attempts: int) -> Completion:
        if status != 200:
            snippet = raw[:200].decode("utf-8", "replace")
            # 404 / 405 on POST .../chat/completions almost always means a base URL without /v1 or a
            # server that is not OpenAI-compatible (Ollama's native /api, a web page): say so.
            hint = (f"; is {self.base_url} an OpenAI-compatible base URL (often ending in /v1, e.g. "
                    "http://localhost:11434/v1 for Ollama)?") if status in (404, 405) else ""
            raise LLMError(f"http_{status}", f"{self.base_url} answered HTTP {status}: {snippet}{hint}")
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"]["content"]
            if not isinstance(text, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError("not_openai", f"{self.base_url} did not answer in the OpenAI chat-completions format "
                                         f"({exc}); is it an OpenAI-compatible endpoint (often ending in /v1)?"
                           ) from exc
        usage = data.get("usage") or {}
        return Completion(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                          (time.monotonic() - started) * 1000, attempts)

    def close(self) -> None:
        self._client.close()
