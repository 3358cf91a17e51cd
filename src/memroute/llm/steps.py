"""Running one LLM step under a policy: budget, timeout, cache, contract check, and the rule fallback.

Every step returns a :class:`StepOutcome` whose ``value`` is usable whatever happened: the LLM's validated
answer, or the rule-based result with ``fallback`` naming why (``disabled``, ``not_needed``, ``budget:
calls per request``, ``timeout``, ``http_500``, ``contract``, ...). Nothing an LLM says is trusted beyond
its contract: callers check ids against their candidates and quotes against the user's text.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from memroute.llm.client import LLM, LLMError
from memroute.llm.contracts import parse_json
from memroute.llm.policy import Budget, LlmPolicy, MinuteWindow
from memroute.llm.prompts import Prompt

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class StepOutcome(Generic[T]):
    step: str
    value: T
    used_llm: bool
    fallback: str | None
    """Why the rule-based value was used (None when the LLM's answer was)."""
    detail: str = ""
    latency_ms: float = 0.0
    tokens: int = 0
    cached: bool = False


class LlmAssistant:
    """An LLM with its policy, minute window and answer cache; shared by recall and routing."""

    def __init__(self, llm: LLM, policy: LlmPolicy | None = None) -> None:
        self.llm = llm
        self.policy = policy or LlmPolicy()
        self.window = MinuteWindow()
        self._cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def budget(self) -> Budget:
        """A fresh budget for one request (one recall or one route)."""
        return Budget(self.policy, self.window)

    def run(self, step: str, prompt: Prompt, contract: type[M], convert: Callable[[M], T], fallback: T,
            budget: Budget, worth_calling: bool = True) -> StepOutcome[T]:
        """Ask the LLM, validate against ``contract``, ``convert`` (which may raise ``LLMError`` for
        violations such as unknown ids); on any failure return ``fallback``."""
        if not self.policy.enabled(step):
            return StepOutcome(step, fallback, False, "disabled")
        if not worth_calling:
            return StepOutcome(step, fallback, False, "not_needed")
        key = self._key(step, prompt)
        cached = self._cached(key)
        started = time.monotonic()
        if cached is None:
            refusal = budget.refusal(prompt.estimated_tokens)
            if refusal is not None:
                return StepOutcome(step, fallback, False, "budget", refusal)
            timeout = min(self.policy.step_timeout_s, budget.remaining_s())
            try:
                completion = self.llm.complete(prompt.messages, json_mode=True, max_tokens=prompt.max_tokens,
                                               timeout_s=timeout)
            except LLMError as exc:
                budget.spend(prompt.estimated_tokens)
                return StepOutcome(step, fallback, False, exc.reason, str(exc), (time.monotonic() - started) * 1000)
            tokens = completion.prompt_tokens + completion.completion_tokens or prompt.estimated_tokens
            budget.spend(tokens)
            text = completion.text
        else:
            text, tokens = cached, 0
        try:
            value = convert(parse_json(text, contract))
        except LLMError as exc:
            return StepOutcome(step, fallback, False, exc.reason, str(exc), (time.monotonic() - started) * 1000,
                               tokens)
        if cached is None:
            self._store(key, text)
        return StepOutcome(step, value, True, None, "", (time.monotonic() - started) * 1000, tokens,
                           cached is not None)

    def _key(self, step: str, prompt: Prompt) -> str:
        raw = json.dumps([self.llm.model, step, prompt.version, prompt.messages], ensure_ascii=False)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def _cached(self, key: str) -> str | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is None or time.monotonic() - hit[0] > self.policy.cache_ttl_s:
                return None
            return hit[1]

    def _store(self, key: str, text: str) -> None:
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (time.monotonic(), text)
