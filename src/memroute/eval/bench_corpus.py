"""The corpus of ``memroute bench recall``: every distinct real text of the shared data, then combinations.

An approximate index is only judged fairly on vectors that look like a real store's: noisy copies of a few
thousand vectors make tight clusters in which any graph loses neighbours (HNSW recall@10 0.35-0.82 on such a
corpus at 1M). So the memories are the distinct texts of every shared data set in the data folder
(:func:`memroute.eval.corpus.data_dir`), user and system turns and utterances alike; LoCoMo is left out (it
is the recall quality set). A text found in two sets counts once, for the first set in :data:`SOURCES`.
Texts are shuffled (seeded) and the first ``queries`` are held out as queries, never stored.

Past the distinct count, memory ``i`` is a distinct combination of two distinct real texts of one language
(``a`` + a space + ``b``, each unordered pair at most once), its vector the normalised sum of theirs: a new
point between two real ones, never a copy of a vector. The report labels how many memories are such
combinations. Without the data folder the texts are template sentences (:mod:`memroute.eval.synthetic`),
and the report says so.

Embedding ~190k texts takes minutes, so :func:`corpus_vectors` caches the vectors of the distinct texts in
``$XDG_CACHE_HOME/memroute/bench`` (``~/.cache/memroute/bench``) in a file named by a hash of the model id,
its dimension and the texts in order: another model or another set of texts is another file. These texts
are only read to measure; they are never part of memroute.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.embed.base import Embedder
from memroute.eval.corpus import data_dir
from memroute.eval.synthetic import synthetic_memories, synthetic_queries
from memroute.types import Language

COMBINED = "combination of two real texts"
TEMPLATES = "template sentences"


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _dialogue_turns(*names: str) -> Callable[[Path], Iterator[str]]:
    """User and system turns of a routing set: each record's history and its utterance."""
    def read(root: Path) -> Iterator[str]:
        for name in names:
            if (root / name).is_file():
                for rec in _jsonl(root / name):
                    for turn in rec.get("history", []):
                        yield turn.get("utterance", "") if isinstance(turn, dict) else ""
                    yield rec.get("utterance", "")
    return read


def _session_turns(name: str) -> Callable[[Path], Iterator[str]]:
    def read(root: Path) -> Iterator[str]:
        if (root / name).is_file():
            for rec in _jsonl(root / name):
                for turn in rec.get("turns", []):
                    yield turn.get("text", "")
    return read


def _intent_texts(*names: str) -> Callable[[Path], Iterator[str]]:
    def read(root: Path) -> Iterator[str]:
        for name in names:
            if (root / name).is_file():
                for rec in _jsonl(root / name):
                    yield rec.get("text", "")
    return read


SOURCES: tuple[tuple[str, Language, Callable[[Path], Iterator[str]]], ...] = (
    ("SGD", "en", _dialogue_turns("sgd_routing/dev.jsonl", "sgd_routing/train.jsonl")),
    ("RealPersonaChat", "ja", _session_turns("realpersonachat_ja/sessions.jsonl")),
    ("kochat", "ko", _intent_texts("kochat_ko_intent/dev.jsonl")),
    ("CLINC150", "en", _intent_texts("clinc150/dev.jsonl", "clinc150/train.jsonl")),
    ("JMultiWOZ-TC", "ja", _dialogue_turns("jmultiwoz_tc_routing/dev.jsonl", "jmultiwoz_tc_routing/train.jsonl")),
    ("MultiWOZ", "en", _dialogue_turns("multiwoz_routing/dev.jsonl")),
    ("Banking77", "en", _intent_texts("banking77/train.jsonl")),
)
"""Name, language and reader of each shared data set (LoCoMo, the quality set, is not one of them)."""


@dataclass(frozen=True)
class DistinctTexts:
    """Every distinct text found, in reading order, with the source each was first found in."""

    texts: list[str]
    sources: list[str]
    languages: list[Language]
    origin: str
    """Where they came from: the data folder, or template sentences and why."""


def distinct_texts(root: Path | None = None, templates: int = 20_000) -> DistinctTexts:
    """The distinct texts of the shared data under ``root`` (default :func:`data_dir`); without any, the
    distinct texts among ``templates`` template sentences."""
    root = root if root is not None else data_dir()
    seen: dict[str, tuple[str, Language]] = {}
    for name, lang, read in SOURCES:
        for raw in read(root) if root is not None else ():
            text = raw.strip() if isinstance(raw, str) else ""
            if text:
                seen.setdefault(text, (name, lang))
    if seen:
        origin = f"the shared data in {root}"
    else:
        origin = (f"{TEMPLATES}: no data folder (set $MEMROUTE_DATA_DIR or put it at ../shared/data)"
                  if root is None else f"{TEMPLATES}: no text of a known data set in {root}")
        for item in synthetic_memories(templates):
            seen.setdefault(item["text"], (TEMPLATES, "und"))
    return DistinctTexts(list(seen), [s for s, _ in seen.values()], [lang for _, lang in seen.values()], origin)


@dataclass(frozen=True)
class BenchCorpus:
    """``n`` memories and the held-out queries. Memory ``i`` is the distinct text ``parts[i][0]``, or, if
    ``parts[i]`` has two entries, the combination of those two distinct texts."""

    distinct: DistinctTexts
    parts: list[tuple[int, ...]]
    queries: list[str]
    mix: dict[str, int] = field(default_factory=dict)
    """Memories per source; combinations under :data:`COMBINED`."""

    def text(self, i: int) -> str:
        return " ".join(self.distinct.texts[j] for j in self.parts[i])

    def language(self, i: int) -> Language:
        return self.distinct.languages[self.parts[i][0]]

    @property
    def combined(self) -> int:
        return self.mix.get(COMBINED, 0)

    def vector(self, i: int, vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Memory ``i``'s vector from the vectors of the distinct texts: its own, or its parts' normalised sum."""
        v = np.asarray(vectors[list(self.parts[i])].sum(axis=0), dtype=np.float32)
        v /= np.float32(np.linalg.norm(v))
        return v

    def describe(self) -> str:
        real = len(self.parts) - self.combined
        per_source = ", ".join(f"{k} {v:,}" for k, v in self.mix.items() if k != COMBINED)
        asks = ("template queries, not stored" if self.distinct.origin.startswith(TEMPLATES)
                else "of them held out as the queries")
        line = (f"{len(self.parts):,} memories from {self.distinct.origin}, {len(self.distinct.texts):,} distinct "
                f"texts in all ({len(self.queries)} {asks}): {real:,} distinct texts ({per_source})")
        if self.combined:
            line += (f" + {self.combined:,} distinct combinations of two of them (same language, joined by a "
                     f"space, vector = normalised sum of theirs; no noisy copies)")
        return line


def bench_corpus(n: int, queries: int = 200, root: Path | None = None, seed: int = 13,
                 distinct: DistinctTexts | None = None) -> BenchCorpus:
    """``n`` memories: the distinct texts in a seeded order after ``queries`` held out, then combinations."""
    distinct = distinct or distinct_texts(root)
    if distinct.sources and distinct.sources[0] == TEMPLATES:
        asks = synthetic_queries(queries)
        order = list(range(len(distinct.texts)))
    else:
        order = list(range(len(distinct.texts)))
        random.Random(seed).shuffle(order)
        asks = [distinct.texts[j] for j in order[:queries]]
        order = order[queries:]
    if not order:
        raise ValueError("the corpus has no text left after the held-out queries")
    parts: list[tuple[int, ...]] = [(j,) for j in order[:n]]
    if n > len(order):
        parts += _combinations(order, distinct, n - len(order), seed)
    mix = Counter(distinct.sources[p[0]] if len(p) == 1 else COMBINED for p in parts)
    ordered = {name: mix[name] for name, _, _ in SOURCES if mix[name]}
    ordered.update({k: v for k, v in mix.items() if k not in ordered})
    return BenchCorpus(distinct, parts, asks, ordered)


def _combinations(order: Sequence[int], distinct: DistinctTexts, count: int, seed: int) -> list[tuple[int, ...]]:
    by_lang: dict[str, list[int]] = {}
    for j in order:
        by_lang.setdefault(distinct.languages[j], []).append(j)
    pools = [p for p in by_lang.values() if len(p) >= 2]
    possible = sum(len(p) * (len(p) - 1) // 2 for p in pools)
    if count > possible:
        raise ValueError(f"{count:,} combinations asked, only {possible:,} distinct pairs exist")
    rng = random.Random(seed + 1)
    weights = [len(p) for p in pools]
    taken: set[tuple[int, int]] = set()
    existing = set(distinct.texts)
    out: list[tuple[int, ...]] = []
    while len(out) < count:
        pool = rng.choices(pools, weights)[0]
        a, b = rng.sample(pool, 2)
        key = (min(a, b), max(a, b))
        if key in taken or f"{distinct.texts[a]} {distinct.texts[b]}" in existing:
            continue
        taken.add(key)
        out.append((a, b))
    return out


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memroute" / "bench"


def cache_key(model_id: str, dimension: int, texts: Sequence[str]) -> str:
    h = hashlib.sha256(f"{model_id}\0{dimension}\0{len(texts)}\0".encode())
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def corpus_vectors(embedder: Embedder, texts: Sequence[str], directory: Path | None = None,
                   batch: int = 4096, progress: Callable[[int, int], None] | None = None,
                   ) -> tuple[npt.NDArray[np.float32], str]:
    """The passage vectors of ``texts`` and what happened: read from the cache file of this model and these
    texts, or embedded now and written there (atomically, so a killed run leaves no half file)."""
    directory = directory or cache_dir()
    path = directory / f"vectors-{cache_key(embedder.model_id, embedder.dimension, texts)}.npy"
    if path.is_file():
        vecs = np.load(path)
        if vecs.shape == (len(texts), embedder.dimension):
            return vecs, f"vectors read from the cache {path} (model {embedder.model_id}; not re-embedded)"
    out = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    for start in range(0, len(texts), batch):
        out[start : start + batch] = embedder.embed(list(texts[start : start + batch]), side="passage")
        if progress is not None:
            progress(min(len(texts), start + batch), len(texts))
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        np.save(fh, out)
    os.replace(tmp, path)
    return out, f"vectors embedded now with {embedder.model_id} and cached in {path} (a rerun reads them)"
