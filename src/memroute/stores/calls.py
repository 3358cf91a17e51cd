"""Store calls as data, so that one pipeline runs on a sync :class:`Store` and on an :class:`AsyncStore`.

A pipeline (``Memory``'s methods, ``recall``) is a generator: it yields a :class:`Call` (one store method by
name, with its arguments) or a :class:`Gather` (several searches at once) and receives the result; what it
returns is the answer. :func:`run_steps` drives it on a sync store; :func:`run_steps_async` awaits the
store calls on the event loop and runs the CPU work between them (tokenising, embedding, fusion, rerank)
in a worker thread, so a long rerank does not stall other tasks. Both stores have the same method names.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from memroute.stores.base import AsyncStore, Store

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """``store.<method>(*args)``; the result is what it returns."""

    method: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Gather:
    """Several calls whose results do not depend on each other; the result is a (result, milliseconds) per
    call, in order. ``parallel`` lets a sync store run them in two threads (an async store always runs them
    concurrently, each on a pooled connection)."""

    calls: tuple[Call, ...]
    parallel: bool = False


Steps = Generator[Call | Gather, Any, T]


def run_steps(store: Store, steps: Steps[T]) -> T:
    """Drive a pipeline on a sync store (in the calling thread)."""
    value: Any = None
    while True:
        try:
            step = steps.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(step, Call):
            value = getattr(store, step.method)(*step.args)
        elif step.parallel and len(step.calls) > 1:
            with ThreadPoolExecutor(max_workers=2) as pool:
                value = list(pool.map(lambda c: _timed(store, c), step.calls))
        else:
            value = [_timed(store, c) for c in step.calls]


def _timed(store: Store, call: Call) -> tuple[Any, float]:
    t0 = time.perf_counter()
    result = getattr(store, call.method)(*call.args)
    return result, (time.perf_counter() - t0) * 1000


async def run_steps_async(store: AsyncStore, steps: Steps[T]) -> T:
    """Drive a pipeline on an async store: store calls awaited here, the code between them in a thread."""
    value: Any = None
    while True:
        done, step = await asyncio.to_thread(_advance, steps, value)
        if done:
            return step  # type: ignore[no-any-return]
        if isinstance(step, Call):
            value = await getattr(store, step.method)(*step.args)
        else:
            value = await asyncio.gather(*(_timed_async(store, c) for c in step.calls))


def _advance(steps: Steps[T], value: Any) -> tuple[bool, Any]:
    # StopIteration cannot cross a Future (asyncio turns it into a TypeError): hand the answer back instead
    try:
        return False, steps.send(value)
    except StopIteration as stop:
        return True, stop.value


async def _timed_async(store: AsyncStore, call: Call) -> tuple[Any, float]:
    t0 = time.perf_counter()
    result = await getattr(store, call.method)(*call.args)
    return result, (time.perf_counter() - t0) * 1000
