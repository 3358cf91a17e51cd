"""Personal-life topics: a hand-written bank and its prototypes per encoder.

The bank (``life_topics.json`` beside this module: work, home, pets, health, allergies, diet, routine, fears, ...;
32 topics, each a description, statements and questions in English, Japanese and Korean, written without reading
any evaluation data) gives each topic a prototype: the normalised mean of its texts' vectors, on the query side
(for messages) and on the passage side (for memories). :func:`distribution` reads a vector as a probability over
the topics: a softmax of its cosines to the prototypes at the encoder's own temperature, calibrated on the bank
itself (:func:`calibrated_tau`: the one under which each bank text's own topic, its prototype made without it, is
most probable; e5's compressed cosines need a lower one than use-m3's). The constraint search by meaning
reads it (:mod:`memroute.retrieval.constraints`): which life area a request touches, which one a memory speaks of.

The packaged encoders' prototypes ship precomputed (``life_topic_prototypes.json``, float16, with the bank's
digest; ``python -m benchmarks.life_topic_prototypes`` writes them again): embedding the bank at the first recall
costs 1.5 s CPU for use-m3 and 6-7 s for the pair. An edited bank (another digest) is embedded again. The bank
and the prototypes were written for the fifteenth everyday-recall pass (tag ``experiments/life-topics``, where
they fed a reranker column that was not merged; docs/benchmarks.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass
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
TAUS = tuple(float(t) for t in np.geomspace(0.005, 0.1, 27))
"""The temperatures :func:`calibrated_tau` chooses from."""


@dataclass(frozen=True, slots=True)
class Prototypes:
    """One encoder's topic prototypes (topics, dimension) for messages and for memories, and its temperature."""

    query: npt.NDArray[np.float32]
    passage: npt.NDArray[np.float32]
    tau: float


_lock = threading.Lock()
_prototypes: dict[str, Prototypes] = {}


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


def embedded(embedder: Any) -> Prototypes:
    """The topics' prototypes of ``embedder``, computed: for questions (query side) and for memories (passage
    side), each the normalised mean of the topic's texts' normalised vectors; and the temperature calibrated on
    the same vectors."""
    groups = [texts(t) for t in bank().values()]
    flat = [s for g in groups for s in g]
    labels = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    sides = [_normalised(np.asarray(embedder.embed(flat, side=side), dtype=np.float32)) for side in ("query", "passage")]
    protos = [_normalised(np.vstack([v[labels == k].mean(axis=0) for k in range(len(groups))])) for v in sides]
    return Prototypes(protos[0], protos[1], calibrated_tau(sides, labels))


def calibrated_tau(sides: Sequence[npt.NDArray[np.float32]], labels: npt.NDArray[np.int_]) -> float:
    """The temperature of :data:`TAUS` under which the bank's texts (``sides``: their normalised vectors, one array
    per side; ``labels``: their topics) give their own topic the highest mean log-probability, each text against
    prototypes made without it (leave-one-out): the encoder's cosine scale, read from the bank, not from any
    evaluation data."""
    n_topics = int(labels.max()) + 1
    nll = np.zeros(len(TAUS))
    for v in sides:
        sums = np.vstack([v[labels == k].sum(axis=0) for k in range(n_topics)])
        cos = np.empty((len(v), n_topics), dtype=np.float64)
        for k in range(n_topics):
            proto = _normalised(sums[k][None, :] - (labels == k)[:, None] * v)
            cos[:, k] = (v * proto).sum(axis=1)
        for t, tau in enumerate(TAUS):
            z = cos / tau
            z -= z.max(axis=1, keepdims=True)
            nll[t] -= float((z[np.arange(len(v)), labels] - np.log(np.exp(z).sum(axis=1))).mean())
    return TAUS[int(np.argmin(nll))]


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


def prototypes(embedder: Any) -> Prototypes:
    """:func:`embedded`, read from the shipped file for a packaged encoder (and this bank), else computed on first
    use; kept per ``model_id`` for the process."""
    key = str(getattr(embedder, "model_id", id(embedder)))
    with _lock:
        found = _prototypes.get(key)
        if found is None:
            entry = _shipped().get(key)
            if entry is not None and entry.get("bank") == digest():
                found = Prototypes(_decoded(entry, "query"), _decoded(entry, "passage"), float(entry["tau"]))
            else:
                found = embedded(embedder)
            _prototypes[key] = found
    return found


def shipped_entry(embedder: Any) -> dict[str, Any]:
    """``embedder``'s entry of the shipped file: its computed prototypes as float16, its temperature, and the
    bank's digest."""
    p = embedded(embedder)
    return {"bank": digest(), "shape": list(p.query.shape), "tau": p.tau,
            **{side: base64.b64encode(v.astype("<f2").tobytes()).decode("ascii")
               for side, v in (("query", p.query), ("passage", p.passage))}}


def distribution(vectors: npt.NDArray[np.float32], prototypes: npt.NDArray[np.float32],
                 tau: float) -> npt.NDArray[np.float32]:
    """Each row of ``vectors`` (normalised) as a probability over the topics of ``prototypes`` (one side's), a
    softmax of the cosines at temperature ``tau``."""
    z = np.asarray(vectors, dtype=np.float32) @ prototypes.T / np.float32(tau)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    out: npt.NDArray[np.float32] = e / e.sum(axis=-1, keepdims=True)
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
