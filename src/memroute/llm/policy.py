"""When an LLM may be called, and how much: seed 004's ``LlmRoutingPolicy``, generalised to every step.

Budgets are per request (calls, tokens, wall time) and per minute (calls, tokens, over a sliding window
shared by every request of the process). A step that would exceed a budget is not called; its rule-based
result stands and the trace says ``budget``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

STEPS = ("expand", "rerank", "slots", "keywords", "intents", "route_rerank")


@dataclass(frozen=True, slots=True)
class LlmPolicy:
    steps: frozenset[str] = frozenset(STEPS)
    """Which steps may use the LLM."""
    top_n: int = 6
    """Candidates given to a rerank step (seed 004: 5-8)."""
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

    def enabled(self, step: str) -> bool:
        return step in self.steps

    def worth_calling(self, *, needs_context: bool = False, short: bool = False, cjk: bool = False,
                      top_gap: float | None = None) -> bool:
        if not self.only_when_needed:
            return True
        return needs_context or short or cjk or (top_gap is not None and top_gap < self.close_margin)


@dataclass
class Budget:
    """The spend of one request, checked against the policy and the process-wide minute window."""

    policy: LlmPolicy
    window: MinuteWindow
    started: float = field(default_factory=time.monotonic)
    calls: int = 0
    tokens: int = 0

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
