"""Agreement on a life topic as a reranker column: does the memory speak of what the question asks about?

A question that shares no word with its answer ("What do I do for a living?" against "I work as a UX designer")
is often about the same part of a person's life (work) as it. The encoders carry that only weakly at the sentence
level, so it is given to them as prior knowledge: a hand-written bank of personal-life topics
(``life_topics.json`` beside this module: work, home, pets, health, diet, routine, ...; each a description,
statements and questions in English, Japanese and Korean, written without reading any evaluation data). Each
topic's prototype is the normalised mean of its texts' vectors, embedded once per encoder and process, on the
query side for questions and on the passage side for memories. The column is

    topic = softmax(q · Pq / TAU) · softmax(m · Pp / TAU)

the probability that the question and the memory fall on the same topic (1 when both are sure of the same one,
near 0 when they are sure of different ones). The packaged encoders' prototypes ship precomputed
(``life_topic_prototypes.json``, float16, with the bank's digest; ``python -m benchmarks.life_topic_prototypes``
writes them again): embedding the bank at the first recall costs 1.5 s CPU for use-m3 and 6-7 s for the pair.
Read only by the pair's ``#late`` reranker (use-m3's lost by it); measured: docs/benchmarks.md, the fifteenth
everyday-recall pass.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.errors import ConfigError

BANK_FILE = "life_topics.json"
SHIPPED_FILE = "life_topic_prototypes.json"
TAU = 0.03
"""The softmax temperature over the topics' cosines (the fifteenth pass's probe: 0.02-0.05 did alike)."""

TRACE = False
"""Compute the column in every recall, also where the reranker does not read it (``memroute eval recall --fit`` sets
it while it fits a model with the column: the fit reads it from the traces). Otherwise recall computes it only for a
reranker fitted with it, so that no other encoder pays for the prototypes or the product."""

_lock = threading.Lock()
_prototypes: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]] = {}


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
def bank() -> dict[str, dict[str, Any]]:
    """The topics by name: ``description``, ``statements`` and ``questions`` (lists of texts)."""
    topics: dict[str, dict[str, Any]] = json.loads(_bank_text())["topics"]
    for name, t in topics.items():
        if not isinstance(t.get("description"), str) or not t.get("statements") or not t.get("questions"):
            raise ConfigError(f"{BANK_FILE}: topic {name!r} needs a description, statements and questions")
    return topics


def texts(topic: dict[str, Any]) -> list[str]:
    return [topic["description"], *topic["statements"], *topic["questions"]]


def _normalised(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    out: npt.NDArray[np.float32] = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)
    return out


def embedded(embedder: Any) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The topics' prototypes (topics, dimension) of ``embedder``, computed: for questions (query side) and for
    memories (passage side), each the normalised mean of the topic's texts' normalised vectors."""
    groups = [texts(t) for t in bank().values()]
    flat = [s for g in groups for s in g]
    ends = np.cumsum([len(g) for g in groups])[:-1]
    protos = []
    for side in ("query", "passage"):
        vecs = np.asarray(embedder.embed(flat, side=side), dtype=np.float32)
        protos.append(_normalised(np.vstack([_normalised(v).mean(axis=0) for v in np.split(vecs, ends)])))
    return protos[0], protos[1]


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    try:
        text = resources.files("memroute.retrieval").joinpath(SHIPPED_FILE).read_text("utf-8")
    except FileNotFoundError:
        return {}
    data: dict[str, Any] = json.loads(text)
    return data


def _decoded(entry: dict[str, Any], side: str) -> npt.NDArray[np.float32]:
    raw = np.frombuffer(base64.b64decode(entry[side]), dtype="<f2").reshape(entry["shape"])
    return _normalised(raw.astype(np.float32))


def prototypes(embedder: Any) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """:func:`embedded`, read from the shipped file for a packaged encoder (and this bank), else computed on first
    use; kept per ``model_id`` for the process."""
    key = str(getattr(embedder, "model_id", id(embedder)))
    with _lock:
        found = _prototypes.get(key)
        if found is None:
            entry = _shipped().get(key)
            if entry is not None and entry.get("bank") == digest():
                found = (_decoded(entry, "query"), _decoded(entry, "passage"))
            else:
                found = embedded(embedder)
            _prototypes[key] = found
    return found


def shipped_entry(embedder: Any) -> dict[str, Any]:
    """``embedder``'s entry of the shipped file: its computed prototypes as float16, and the bank's digest."""
    pq, pp = embedded(embedder)
    return {"bank": digest(), "shape": list(pq.shape),
            **{side: base64.b64encode(p.astype("<f2").tobytes()).decode("ascii")
               for side, p in (("query", pq), ("passage", pp))}}


def _softmax(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    e = np.exp((x - x.max(axis=-1, keepdims=True)) / TAU)
    out: npt.NDArray[np.float32] = e / e.sum(axis=-1, keepdims=True)
    return out


def agreement(embedder: Any, query: npt.NDArray[np.float32],
              memories: Sequence[npt.NDArray[np.float32] | None]) -> npt.NDArray[np.float64]:
    """The topic agreement of ``query``'s vector with each of ``memories``' (``NaN`` for one without a vector)."""
    out = np.full(len(memories), np.nan)
    have = [k for k, m in enumerate(memories) if m is not None]
    if not have:
        return out
    pq, pp = prototypes(embedder)
    mq = _softmax(pq @ np.asarray(query, dtype=np.float32))
    mm = _softmax(np.vstack([np.asarray(memories[k]) for k in have]).astype(np.float32) @ pp.T)
    out[have] = mm @ mq
    return out



def write_shipped(names: Sequence[str]) -> Path:
    """Write the shipped file again, for the embedders ``names`` (``benchmarks/life_topic_prototypes.py``)."""
    from memroute.embed import get_embedder

    out = {}
    for name in names:
        e = get_embedder(name)
        out[str(e.model_id)] = shipped_entry(e)
    path = Path(__file__).with_name(SHIPPED_FILE)
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    _shipped.cache_clear()
    return path
