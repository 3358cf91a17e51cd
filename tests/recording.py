"""An embedder that notes each call before passing it on: which texts a component encoded, and on which thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


class Recording:
    """Wraps ``inner`` (same model id and dimension); ``note`` gets the texts of every ``embed`` call first."""

    def __init__(self, inner: Any, note: Callable[[list[str]], object]) -> None:
        self.inner, self.note = inner, note
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def embed(self, texts: Sequence[str], side: str = "passage") -> Any:
        self.note(list(texts))
        return self.inner.embed(texts, side)


def thread_names(names: list[str]) -> Callable[[list[str]], object]:
    """A ``note`` that appends the calling thread's name to ``names``."""
    return lambda _texts: names.append(threading.current_thread().name)
