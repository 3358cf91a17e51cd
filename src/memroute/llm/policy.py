"""When an LLM may be called, and how much: seed 004's ``LlmRoutingPolicy``, generalised to every step.

Budgets are per request (calls, tokens, wall time) and per minute (calls, tokens, over a sliding window
shared by every request of the process). A step that would exceed a budget is not called; its rule-based
result stands and the trace says ``budget``. Once a call of a request has failed at the transport level
(timeout, connection, HTTP error, oversized or non-OpenAI answer), the request's later steps are not
tried (``after_failure``): a dead endpoint costs one timeout per request, not one per step; and after
``unavailable_after`` such failures in a row, no request asks it for ``unavailable_s`` (``unavailable``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from memroute.errors import ConfigError

STEPS = ("expand", "rerank", "slots", "keywords", "intents", "route_rerank")
DEFAULT_STEPS = frozenset(STEPS) - {"slots"}
"""Slot extraction (seed 002's query frame) serves guided code investigation: on only when asked for."""


@dataclass(frozen=True, slots=True)
class LlmPolicy:
    steps: frozenset[str] = DEFAULT_STEPS
    """Which steps may use the LLM: expand, rerank, slots (recall); keywords, intents, route_rerank (routing)."""
    top_n: int = 6
    """Agents given to the routing rerank step (seed 004: 5-8)."""
    recall_top_n: int = 12
    """Memories given to the recall rerank step (seed 001 gives 20-40; 12 keeps the prompt near 2,000 tokens)."""
    step_timeout_s: float = 3.0
    request_timeout_s: float = 6.0
    calls_per_request: int = 3
    tokens_per_request: int = 6_000
    calls_per_minute: int = 120
    tokens_per_minute: int = 200_000
    blend: float = 0.4
    """Weight of the LLM's scores in a blended ranking (seed 004: 0.6 rule + 0.4 LLM)."""
    only_when_needed: bool = True
    """Call only when the rules are unsure: the message needs context, is short, is CJK, or the top rule
    scores are close (see :meth:`worth_calling`)."""
    close_margin: float = 0.1
    cache_ttl_s: float = 600.0
    unavailable_after: int = 3
    """Consecutive transport failures (over all requests) after which the endpoint is taken as down (0:
    never) ..."""
    unavailable_s: float = 30.0
    """... and not asked for this long: a dead endpoint then costs nothing instead of a timeout per request.
    Then one call probes it again."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.steps) - set(STEPS))
        if unknown:
            raise ConfigError(f"unknown LLM step(s) {', '.join(unknown)}; steps are {', '.join(STEPS)}")
        for name in ("top_n", "recall_top_n", "calls_per_request", "calls_per_minute", "unavailable_after"):
            if getattr(self, name) < 0:
                raise ConfigError(f"LlmPolicy.{name} cannot be negative")
        if self.step_timeout_s <= 0 or self.request_timeout_s <= 0:
            raise ConfigError("LLM timeouts must be positive (seconds)")
        if not 0.0 <= self.blend <= 1.0:
            raise ConfigError(f"LlmPolicy.blend must be between 0 and 1, got {self.blend}")

    def enabled(self, step: str) -> bool:
        return step in self.steps

    def why_call(self, *, needs_context: bool = False, short: bool = False, cjk: bool = False,
                 top_gap: float | None = None, unsure: bool = False) -> str | None:
        """Why a step is worth its cost for this input, or None when the rules are sure enough."""
        if not self.only_when_needed:
            return "always (only_when_needed is off)"
        if needs_context:
            return "the message needs its conversation"
        if cjk:
            return "Japanese or Korean message"
        if short:
            return "short message"
        if top_gap is not None and top_gap < self.close_margin:
            return f"top rule scores within {self.close_margin} ({top_gap:.3f} apart)"
        if unsure:
            return "the rule-based ranking is unsure"
        return None


@dataclass
class Budget:
    """The spend of one request, checked against the policy and the process-wide minute window."""

    policy: LlmPolicy
    window: MinuteWindow
    started: float = field(default_factory=time.monotonic)
    calls: int = 0
    tokens: int = 0
    failure: str | None = None
    """The reason an earlier call of this request failed at the transport level (see the module doc)."""

    def refusal(self, estimated_tokens: int) -> str | None:
        """Why a call may not be made now, or None."""
        p = self.policy
        if self.calls >= p.calls_per_request:
            return "calls per request"
        if self.tokens + estimated_tokens > p.tokens_per_request:
            return "tokens per request"
        if time.monotonic() - self.started >= p.request_timeout_s:
            return "time per request"
        return self.window.refusal(p, estimated_tokens)

    def remaining_s(self) -> float:
        return max(0.0, self.policy.request_timeout_s - (time.monotonic() - self.started))

    def spend(self, tokens: int) -> None:
        self.calls += 1
        self.tokens += tokens
        self.window.add(tokens)


class MinuteWindow:
    """Calls and tokens of the last 60 seconds, shared by all requests of a process."""

    def __init__(self) -> None:
        self._events: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def _trim(self, now: float) -> None:
        while self._events and now - self._events[0][0] > 60.0:
            self._events.popleft()

    def refusal(self, policy: LlmPolicy, estimated_tokens: int) -> str | None:
        with self._lock:
            self._trim(time.monotonic())
            if len(self._events) >= policy.calls_per_minute:
                return "calls per minute"
            if sum(t for _, t in self._events) + estimated_tokens > policy.tokens_per_minute:
                return "tokens per minute"
        return None

    def add(self, tokens: int) -> None:
        with self._lock:
            self._events.append((time.monotonic(), tokens))
