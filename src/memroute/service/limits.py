"""How much the service does at once: rate limits (per key, and per client address for requests without a
valid key) and the worker threads of library calls.

Concurrency model: the event loop only parses requests and writes answers. Every library call (store,
embedding, recall, routing) runs in a worker thread through :class:`Runner`, at most ``server_threads`` at
once; the others wait, and beyond ``server_queue`` waiting requests the answer is 503 with Retry-After,
so a burst never piles up unbounded work. One :class:`memroute.Memory` is shared by every thread: the
SQLite store serialises its connection with a lock (WAL mode lets other processes read meanwhile), the
PostgreSQL store hands each call a connection from its pool, and the embedding cache and the routing
caches are locked. Numeric work releases the GIL, so two cores serve two requests at a time.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from memroute.errors import RateLimitError, ServiceError

T = TypeVar("T")
_MAX_BUCKETS = 10_000


class RateLimiter:
    """A token bucket per key: ``burst`` requests at once, refilled at ``per_minute`` a minute."""

    def __init__(self, per_minute: int, burst: int) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(max(burst, 1))
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, key: str, whose: str = "this key") -> None:
        """Take one token for ``key``, or raise ``RateLimitError`` saying when one will be there."""
        if self.rate <= 0:
            return
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                wait = math.ceil((1.0 - tokens) / self.rate)
                raise RateLimitError(f"rate limit of {self.rate * 60:.0f} requests per minute reached for {whose}; "
                                     f"retry in {wait} s", status=429, retry_after=wait,
                                     detail={"per_minute": round(self.rate * 60), "burst": int(self.burst)})
            self._buckets[key] = (tokens - 1.0, now)
            while len(self._buckets) > _MAX_BUCKETS:  # forget the longest-idle keys (they are full again)
                self._buckets.popitem(last=False)


class Runner:
    """Runs blocking library calls in worker threads, ``threads`` at a time, with at most ``queue`` waiting."""

    def __init__(self, threads: int, queue: int) -> None:
        self.threads = max(threads, 1)
        self.queue = max(queue, 0)
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        if self._limiter is None:  # created on first use, inside the server's event loop
            self._limiter = anyio.CapacityLimiter(self.threads)
        stats = self._limiter.statistics()
        if stats.borrowed_tokens >= self.threads and stats.tasks_waiting >= self.queue:
            raise ServiceError(f"the service is busy ({self.threads} requests running, {stats.tasks_waiting} "
                               "waiting); retry in a second", status=503, kind="ServiceBusy", retry_after=1)
        return await anyio.to_thread.run_sync(fn, limiter=self._limiter)
