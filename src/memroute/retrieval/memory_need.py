"""Does this message need the owner's memories at all? A question-level prior for the relevance judge.

The judge (:mod:`memroute.retrieval.judge`) reads each candidate against the question, so a general-knowledge
question that names a place in a memory, a greeting, or a task on text quoted in the message can give its first
memory as high a probability as a real answer gets (docs/benchmarks.md, everyday recall, sixth pass). Whether the
message asks about its sender's life at all is a property of the message, not of a candidate, and the encoders
carry it: a hand-written bank (``memory_need.json`` beside this module, written without reading any evaluation
data) holds, on the ``owner`` side, kinds of messages that need the owner's memories (their own facts, people,
plans, preferences, past; requests for a recommendation, plan or booking their constraints bear on) and, on the
``none`` side, kinds that need none (general knowledge, definitions, arithmetic, how-to, chit-chat, tasks on given
text, the world's people and places), each in English, Japanese and Korean. A kind's prototype is the normalised
mean of its texts' query-side vectors; the column is

    needs_memory = sum over the owner's kinds of softmax(q . P / TAU)

from the recall's query vector (the one the vector search embedded: nothing is encoded again). The packaged
encoders' prototypes ship precomputed (``memory_need_prototypes.json``, float16, with the bank's digest; ``python
-m benchmarks.memory_need_prototypes`` writes them); another encoder, or an edited bank, embeds the bank once per
process.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.errors import ConfigError

BANK_FILE = "memory_need.json"
SHIPPED_FILE = "memory_need_prototypes.json"
SIDES = ("owner", "none")
TAU = 0.03
"""The softmax temperature over the kinds' cosines (the life-topic column's value, not tuned here)."""

TRACE = False
"""Compute the prior in every recall, also where the judge does not read it (``memroute eval recall`` sets it while it
fits or holds out judges: the fit reads it from the traces). Otherwise recall computes it only for a judge that reads
it, so that no other encoder pays for it."""

_lock = threading.Lock()


@contextmanager
def tracing(on: bool = True) -> Iterator[None]:
    """:data:`TRACE` set to ``on`` (or left on) for the block."""
    global TRACE
    before = TRACE
    TRACE = before or on
    try:
        yield
    finally:
        TRACE = before
_prototypes: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]] = {}


@lru_cache(maxsize=1)
def _bank_text() -> str:
    try:
        return resources.files("memroute.retrieval").joinpath(BANK_FILE).read_text("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"memroute/retrieval/{BANK_FILE} is missing from the installation; reinstall "
                          "memroute") from None


def digest() -> str:
    """The bank's digest: shipped prototypes computed from another bank are not used."""
    return hashlib.sha256(_bank_text().encode("utf-8")).hexdigest()[:16]


@lru_cache(maxsize=1)
def kinds() -> list[tuple[str, str, list[str]]]:
    """``(side, kind, texts)`` for every kind of the bank, ``owner`` first; texts: its description and examples."""
    sides = json.loads(_bank_text()).get("sides", {})
    out = []
    for side in SIDES:
        if not sides.get(side):
            raise ConfigError(f"{BANK_FILE}: the {side!r} side has no kinds")
        for name, kind in sides[side].items():
            if not isinstance(kind.get("description"), str) or not kind.get("examples"):
                raise ConfigError(f"{BANK_FILE}: kind {name!r} needs a description and examples")
            out.append((side, name, [kind["description"], *kind["examples"]]))
    return out


def _normalised(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    out: npt.NDArray[np.float32] = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)
    return out


def embedded(embedder: Any) -> npt.NDArray[np.float32]:
    """The kinds' prototypes (kinds, dimension) under ``embedder``: each the normalised mean of its texts'
    normalised query-side vectors, in :func:`kinds` order."""
    groups = [texts for _, _, texts in kinds()]
    vecs = np.asarray(embedder.embed([t for g in groups for t in g], side="query"), dtype=np.float32)
    parts = np.split(_normalised(vecs), np.cumsum([len(g) for g in groups])[:-1])
    return _normalised(np.vstack([p.mean(axis=0) for p in parts]))


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    try:
        text = resources.files("memroute.retrieval").joinpath(SHIPPED_FILE).read_text("utf-8")
    except FileNotFoundError:
        return {}
    data: dict[str, Any] = json.loads(text)
    return data


def prototypes(embedder: Any) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """:func:`embedded` (read from the shipped file for a packaged encoder and this bank, else computed on first
    use) and which rows are the owner's kinds; kept per ``model_id`` for the process."""
    key = str(getattr(embedder, "model_id", id(embedder)))
    with _lock:
        found = _prototypes.get(key)
        if found is None:
            entry = _shipped().get(key)
            if entry is not None and entry.get("bank") == digest():
                raw = np.frombuffer(base64.b64decode(entry["prototypes"]), dtype="<f2").reshape(entry["shape"])
                protos = _normalised(raw.astype(np.float32))
            else:
                protos = embedded(embedder)
            found = (protos, np.array([side == "owner" for side, _, _ in kinds()]))
            _prototypes[key] = found
    return found


def needs_memory(embedder: Any, query: npt.NDArray[np.floating[Any]]) -> float:
    """The probability that the message whose query vector is ``query`` needs its owner's memories."""
    protos, owner = prototypes(embedder)
    q = np.asarray(query, dtype=np.float32)
    s = protos @ (q / max(float(np.linalg.norm(q)), 1e-9))
    e = np.exp((s - s.max()) / TAU)
    return float(e[owner].sum() / e.sum())


def write_shipped(names: Sequence[str]) -> Path:
    """Write the shipped file again, for the embedders ``names`` (``benchmarks/memory_need_prototypes.py``)."""
    from memroute.embed import get_embedder

    out = {}
    for name in names:
        e = get_embedder(name)
        protos = embedded(e)
        out[str(e.model_id)] = {"bank": digest(), "shape": list(protos.shape),
                                "prototypes": base64.b64encode(protos.astype("<f2").tobytes()).decode("ascii")}
    path = Path(__file__).with_name(SHIPPED_FILE)
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    _shipped.cache_clear()
    with _lock:
        _prototypes.clear()
    return path
