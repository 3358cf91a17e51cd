"""Running one LLM step under a policy: budget, timeout, cache, contract check, and the rule fallback.

Every step returns a :class:`StepOutcome` whose ``value`` is usable whatever happened: the LLM's validated
answer, or the rule-based result with ``fallback`` naming why: ``disabled`` and ``not_needed`` (the policy
skipped the step; no call), ``budget`` and ``after_failure`` (a budget, or an earlier failed call of the
same request, prevented the call; ``unavailable``: the endpoint failed ``unavailable_after`` times in a row
and is resting), or what went wrong with a call: ``timeout``, ``connection``,
``http_<status>``, ``not_openai``, ``too_large``, ``contract``. Nothing an LLM says is trusted beyond its
contract: callers check ids against their candidates and quotes against the user's text.

Each call is counted in the Prometheus metrics ``llm_calls_total{step, outcome}``, ``llm_latency_ms{step}``,
``llm_tokens_total{step, direction}``, and each fallback that was not a policy skip in
``llm_fallbacks_total{step, reason}``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from memroute.llm.client import LLM, LLMError
from memroute.llm.contracts import parse_json
from memroute.llm.policy import Budget, LlmPolicy, MinuteWindow
from memroute.llm.prompts import Prompt, estimate_tokens
from memroute.observability import LLM_CALLS, LLM_FALLBACKS, LLM_LATENCY, LLM_TOKENS

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

POLICY_SKIPS = frozenset({"disabled", "not_needed"})
# A transport-level failure says the endpoint is unwell: the request's later steps are not tried.
_TRANSPORT = ("timeout", "connection", "not_openai", "too_large", "http_")


@dataclass(frozen=True, slots=True)
class StepOutcome(Generic[T]):
    step: str
    value: T
    used_llm: bool
    fallback: str | None
    """Why the rule-based value was used (None when the LLM's answer was)."""
    detail: str = ""
    """What the policy said (why the step was called or skipped), or what went wrong."""
    latency_ms: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cached: bool = False
    called: bool = False
    """A request was sent to the endpoint (False for policy skips, budget refusals and cache hits)."""

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def record(self, **output: Any) -> dict[str, Any]:
        """What the trace keeps of this step; ``output`` summarises what the LLM's answer changed."""
        out: dict[str, Any] = {"step": self.step, "called": self.called, "used_llm": self.used_llm,
                               "fallback": self.fallback, "detail": self.detail,
                               "latency_ms": round(self.latency_ms, 1), "tokens_in": self.tokens_in,
                               "tokens_out": self.tokens_out, "cached": self.cached}
        if output:
            out["output"] = output
        return out


class LlmAssistant:
    """An LLM with its policy, minute window and answer cache; shared by recall and routing."""

    def __init__(self, llm: LLM, policy: LlmPolicy | None = None) -> None:
        self.llm = llm
        self.policy = policy or LlmPolicy()
        self.window = MinuteWindow()
        self._cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()
        self._failures = 0
        """Transport failures in a row, over all requests; any answer resets it."""
        self._failed_at = 0.0
        self._failure = ""

    def budget(self) -> Budget:
        """A fresh budget for one request (one recall or one route)."""
        return Budget(self.policy, self.window)

    def run(self, step: str, prompt: Prompt, contract: type[M], convert: Callable[[M], T], fallback: T,
            budget: Budget, why: str | None = "always") -> StepOutcome[T]:
        """Ask the LLM, validate against ``contract``, ``convert`` (which may raise ``LLMError`` for
        violations such as unknown ids); on any failure return ``fallback``. ``why`` is the policy's reason
        to call (:meth:`LlmPolicy.why_call`); None skips the step as not needed."""
        if not self.policy.enabled(step):
            return StepOutcome(step, fallback, False, "disabled", f"step {step!r} is not in the policy's steps")
        if why is None:
            return StepOutcome(step, fallback, False, "not_needed", "only_when_needed: the rules are sure of this "
                               "input (self-contained, not short, clear top scores)")
        key = self._key(step, prompt)
        cached = self._cached(key)
        started = time.monotonic()
        tokens_in = tokens_out = 0
        if cached is None:
            if budget.failure is not None:
                return self._fallback(StepOutcome(step, fallback, False, "after_failure",
                                                  f"an earlier call of this request failed ({budget.failure})"))
            resting = self._resting()
            if resting is not None:
                return self._fallback(StepOutcome(step, fallback, False, "unavailable", resting))
            refusal = budget.refusal(prompt.estimated_tokens)
            if refusal is not None:
                return self._fallback(StepOutcome(step, fallback, False, "budget", refusal))
            timeout = min(self.policy.step_timeout_s, budget.remaining_s())
            try:
                completion = self.llm.complete(prompt.messages, json_mode=True, max_tokens=prompt.max_tokens,
                                               timeout_s=timeout)
            except LLMError as exc:
                budget.spend(prompt.estimated_input_tokens)
                if exc.reason.startswith(_TRANSPORT):
                    budget.failure = exc.reason
                    self._failed(exc.reason)
                return self._fallback(StepOutcome(step, fallback, False, exc.reason, str(exc), _ms(started),
                                                  called=True))
            with self._lock:
                self._failures = 0
            text = completion.text
            # Servers that report no usage are charged an estimate from the characters.
            tokens_in = completion.prompt_tokens or prompt.estimated_input_tokens
            tokens_out = completion.completion_tokens or estimate_tokens(text)
            budget.spend(tokens_in + tokens_out)
        else:
            text = cached
        try:
            value = convert(parse_json(text, contract))
        except LLMError as exc:
            return self._fallback(StepOutcome(step, fallback, False, exc.reason, str(exc), _ms(started), tokens_in,
                                              tokens_out, cached is not None, cached is None))
        if cached is None:
            self._store(key, text)
        outcome = StepOutcome(step, value, True, None, why, _ms(started), tokens_in, tokens_out, cached is not None,
                              cached is None)
        self._count(outcome)
        return outcome

    def _failed(self, reason: str) -> None:
        with self._lock:
            self._failures += 1
            self._failed_at = time.monotonic()
            self._failure = reason

    def _resting(self) -> str | None:
        """Why the endpoint is not asked now (it failed too often in a row, recently), or None."""
        with self._lock:
            if not self.policy.unavailable_after or self._failures < self.policy.unavailable_after:
                return None
            left = self.policy.unavailable_s - (time.monotonic() - self._failed_at)
            if left <= 0:
                return None  # rested: the next call probes it
            return (f"the endpoint failed {self._failures} times in a row (last: {self._failure}); not asked "
                    f"again for {left:.0f} s")

    def _fallback(self, outcome: StepOutcome[T]) -> StepOutcome[T]:
        self._count(outcome)
        LLM_FALLBACKS.labels(outcome.step, outcome.fallback or "").inc()
        return outcome

    @staticmethod
    def _count(outcome: StepOutcome[Any]) -> None:
        if not outcome.called:
            return
        LLM_CALLS.labels(outcome.step, outcome.fallback or "ok").inc()
        LLM_LATENCY.labels(outcome.step).observe(outcome.latency_ms)
        LLM_TOKENS.labels(outcome.step, "in").inc(outcome.tokens_in)
        LLM_TOKENS.labels(outcome.step, "out").inc(outcome.tokens_out)

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


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000
