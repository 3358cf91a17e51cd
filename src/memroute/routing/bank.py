"""A bank of example requests for common assistant capabilities, matched to a catalogue's agents zero-shot.

Most assistant catalogues are made of the same few dozen capabilities (calendar, weather, translation,
music, restaurants, travel, email, code review, ...). Example utterances are the strongest per-turn evidence
routing has (an agent's own examples, fitted from a team's logged dialogues, gain 6-12 points on memroute's
Japanese and Korean sets), but a new catalogue has none. The bank (``request_bank.json``, written by hand for
memroute; its ``about`` says how) holds, per capability, a description and example requests in English,
Japanese and Korean. When a catalogue is indexed, each agent is matched to the capabilities its description
resembles (a soft weight from the encoder's cosine, 0 below a threshold, so an agent the bank knows nothing
of matches nothing). The embedding strategy then reads a Japanese or Korean message against every
capability's requests and gives each matched agent its capabilities' share of the message
(:meth:`BankMatch.scores`). The built-in bank's vectors under the packaged routing encoder ship with memroute
(:func:`shipped_vectors`); any other bank or encoder embeds them once per process.

A user's own bank file has the same form (``load_bank``); the ``routing_bank`` setting names the sources
(:func:`bank_from_setting`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from memroute.embed import Embedder, Side
from memroute.errors import ConfigError, InputError
from memroute.routing.examples import F32, I32, top_mean

LANGUAGES = ("en", "ja", "ko")
BUILTIN = "builtin"
MATCH_FROM = 0.45
"""Description cosine (agent's ``name: description`` against a capability's description in any of the three
languages) at which a capability starts to count for an agent."""
MATCH_FULL = 0.6
"""Cosine at which it counts fully; between the two the weight rises linearly."""
TOP_REQUESTS = 3
"""A message's similarity to a capability: the mean of its ``TOP_REQUESTS`` nearest requests."""
TEMPERATURE = 0.05
"""Of the softmax that gives each capability its share of a message (:meth:`BankMatch.scores`)."""
VECTORS_FILE = "request_bank_vectors.npz"
"""Package data: the built-in bank's vectors under the packaged routing encoder, float16, written by
``python -m benchmarks.bank_vectors`` (see :class:`ShippedVectors`)."""


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability: descriptions in :data:`LANGUAGES` order, and its example requests in all of them."""

    id: str
    descriptions: tuple[str, ...]
    requests: tuple[str, ...]


def capability_key(cap: Capability) -> str:
    """A capability's content (id, descriptions, requests) as a hash: shipped vectors are used only for the texts
    they were computed from."""
    text = json.dumps([cap.id, cap.descriptions, cap.requests], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def bank_fingerprint(bank: RequestBank | None) -> str:
    """What a router's bank is, in a word: ``off`` for none, else a hash of its capabilities' contents (a routing fit
    records it, and warns when it is used beside another bank: its rule was tuned on that bank's scores)."""
    if bank is None:
        return "off"
    keys = sorted(capability_key(c) for c in bank.capabilities)
    return hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ShippedVectors:
    """Capabilities' vectors computed ahead of time by one encoder (``model_id``, ``dimension``): per capability
    key, its descriptions' rows (:data:`LANGUAGES` order, ``side="passage"``) and its requests' rows
    (``side="query"``), as float32 arrays. Matching a catalogue to the built-in bank then embeds nothing of it:
    a 10-agent Korean catalogue's index took 3.3 s instead of 0.6 s when ~500 of the bank's texts were embedded
    in each process (docs/benchmarks.md, routing, thirteenth pass)."""

    model_id: str
    dimension: int
    descriptions: dict[str, F32]
    requests: dict[str, F32]

    def for_encoder(self, embedder: Embedder) -> ShippedVectors | None:
        return self if (embedder.model_id, embedder.dimension) == (self.model_id, self.dimension) else None


def read_vectors(source: Any) -> ShippedVectors:
    """Vectors from a file written by :func:`write_vectors` (a path or a binary file object)."""
    with np.load(source, allow_pickle=False) as data:
        keys = [str(k) for k in data["keys"]]
        desc = data["descriptions"].astype(np.float32)
        reqs = data["requests"].astype(np.float32)
        ends = np.cumsum(data["sizes"])
        model_id, dimension = str(data["model_id"]), int(data["dimension"])
    n_lang = len(LANGUAGES)
    desc /= np.maximum(np.linalg.norm(desc, axis=1, keepdims=True), np.float32(1e-6))
    reqs /= np.maximum(np.linalg.norm(reqs, axis=1, keepdims=True), np.float32(1e-6))
    starts = np.r_[0, ends[:-1]]
    return ShippedVectors(
        model_id, dimension,
        {k: desc[i * n_lang:(i + 1) * n_lang] for i, k in enumerate(keys)},
        {k: reqs[int(a):int(b)] for k, a, b in zip(keys, starts, ends, strict=True)})


def write_vectors(bank: RequestBank, embedder: Embedder, out: Any) -> None:
    """Embed every text of ``bank`` with ``embedder`` and write them, float16, for :func:`read_vectors`."""
    desc = np.asarray(embedder.embed([d for c in bank.capabilities for d in c.descriptions], side="passage"))
    reqs = np.asarray(embedder.embed([t for c in bank.capabilities for t in c.requests], side="query"))
    np.savez_compressed(
        out, model_id=np.array(embedder.model_id), dimension=np.array(embedder.dimension),
        keys=np.array([capability_key(c) for c in bank.capabilities]),
        sizes=np.array([len(c.requests) for c in bank.capabilities], dtype=np.int32),
        descriptions=desc.astype(np.float16), requests=reqs.astype(np.float16))


@lru_cache(maxsize=1)
def shipped_vectors() -> ShippedVectors | None:
    """The built-in bank's vectors shipped with memroute (``None`` if the file is missing)."""
    ref = resources.files("memroute.routing").joinpath(VECTORS_FILE)
    if not ref.is_file():
        return None
    with ref.open("rb") as f:
        return read_vectors(f)


@dataclass(frozen=True, slots=True)
class RequestBank:
    capabilities: tuple[Capability, ...]

    def __add__(self, other: RequestBank) -> RequestBank:
        return RequestBank(self.capabilities + other.capabilities)

    def __len__(self) -> int:
        return len(self.capabilities)


def parse_bank(data: Any, source: str = "bank") -> RequestBank:
    """A bank from its JSON form; a clear :class:`InputError` for anything malformed."""
    caps = data.get("capabilities") if isinstance(data, dict) else None
    if not isinstance(caps, list) or not caps:
        raise InputError(f"{source}: expected an object with a non-empty 'capabilities' list")
    out: list[Capability] = []
    seen: set[str] = set()
    for i, cap in enumerate(caps):
        where = f"{source}: capability {i}"
        if not isinstance(cap, dict) or not isinstance(cap.get("id"), str) or not cap["id"].strip():
            raise InputError(f"{where}: needs a non-empty string 'id'")
        where = f"{source}: capability {cap['id']!r}"
        if cap["id"] in seen:
            raise InputError(f"{where}: id used twice")
        seen.add(cap["id"])
        desc, reqs = cap.get("description"), cap.get("requests")
        if not isinstance(desc, dict) or not isinstance(reqs, dict):
            raise InputError(f"{where}: needs 'description' and 'requests', each keyed by {', '.join(LANGUAGES)}")
        for lang in LANGUAGES:
            if not isinstance(desc.get(lang), str) or not desc[lang].strip():
                raise InputError(f"{where}: description.{lang} must be a non-empty string")
            texts = reqs.get(lang)
            if (not isinstance(texts, list) or not texts
                    or not all(isinstance(t, str) and t.strip() for t in texts)):
                raise InputError(f"{where}: requests.{lang} must be a non-empty list of non-empty strings")
        out.append(Capability(cap["id"], tuple(desc[lang] for lang in LANGUAGES),
                              tuple(dict.fromkeys(t for lang in LANGUAGES for t in reqs[lang]))))
    return RequestBank(tuple(out))


def load_bank(path: str | Path) -> RequestBank:
    """A bank file (JSON, the form of memroute's ``routing/request_bank.json``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the request bank {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"the request bank {path} is not valid JSON: {exc}") from exc
    return parse_bank(data, str(path))


@lru_cache(maxsize=1)
def builtin_bank() -> RequestBank:
    """memroute's own bank (package data)."""
    text = resources.files("memroute.routing").joinpath("request_bank.json").read_text(encoding="utf-8")
    return parse_bank(json.loads(text), "memroute's request_bank.json")


def bank_from_setting(value: str) -> RequestBank | None:
    """The ``routing_bank`` setting: ``builtin`` (the default), ``off`` (or empty) for none, or a comma-separated
    list of sources, each ``builtin`` or a path to a bank file (``builtin,my_bank.json`` extends memroute's bank,
    ``my_bank.json`` replaces it)."""
    sources = [s.strip() for s in value.split(",") if s.strip()]
    if not sources or sources == ["off"]:
        return None
    if "off" in sources:
        raise ConfigError(f"routing_bank {value!r}: 'off' cannot be combined with other sources")
    bank: RequestBank | None = None
    for source in sources:
        part = builtin_bank() if source == BUILTIN else load_bank(source)
        bank = part if bank is None else bank + part
    if bank is not None and len({c.id for c in bank.capabilities}) != len(bank):
        raise ConfigError(f"routing_bank {value!r}: a capability id appears in more than one source")
    return bank


class BankVectors:
    """A bank's texts embedded by one encoder, lazily: its descriptions and requests when the first catalogue is
    matched (:func:`match_bank` reads every capability's requests). A capability whose content and encoder are those of
    ``shipped`` (by default memroute's :func:`shipped_vectors` of the built-in bank) takes its vectors from there
    and embeds nothing; a user's own capabilities, or any under another encoder, are embedded. Thread-safe;
    cached by the :class:`AgentCache`."""

    def __init__(self, bank: RequestBank, embedder: Embedder, shipped: ShippedVectors | str | None = BUILTIN) -> None:
        self.bank, self.embedder = bank, embedder
        stored = shipped_vectors() if shipped == BUILTIN else shipped
        self._shipped = stored.for_encoder(embedder) if isinstance(stored, ShippedVectors) else None
        self._descriptions: F32 | None = None
        self._requests: list[F32] | None = None
        self._lock = threading.Lock()

    def descriptions(self) -> F32:
        """(capabilities x languages, dimension): row ``c * len(LANGUAGES) + l``."""
        with self._lock:
            if self._descriptions is None:
                self._descriptions = np.vstack(self._vectors("descriptions", "passage"))
            return self._descriptions

    def requests(self) -> list[F32]:
        """Every capability's requests' rows, capability by capability."""
        with self._lock:
            if self._requests is None:
                self._requests = self._vectors("requests", "query")
            return self._requests

    def _vectors(self, kind: Literal["descriptions", "requests"], side: Side) -> list[F32]:
        """Each capability's ``kind`` texts' vectors: the shipped ones where its content and the encoder are those
        they were computed for, the others embedded in one call."""
        shipped = getattr(self._shipped, kind) if self._shipped is not None else {}
        found = [shipped.get(capability_key(cap)) for cap in self.bank.capabilities]
        missing = [c for c, v in enumerate(found) if v is None]
        if missing:
            texts = [t for c in missing for t in getattr(self.bank.capabilities[c], kind)]
            vecs = np.asarray(self.embedder.embed(texts, side=side), dtype=np.float32)
            at = 0
            for c in missing:
                n = len(getattr(self.bank.capabilities[c], kind))
                found[c] = vecs[at:at + n]
                at += n
        return [v for v in found if v is not None]


@dataclass(frozen=True, slots=True)
class BankMatch:
    """A catalogue's agents matched to bank capabilities (built with its index)."""

    capabilities: tuple[str, ...]
    """Ids of the capabilities some agent matched, in the order of ``weights``' columns."""
    weights: F32
    """(agents, matched capabilities): each agent's match weight in [0, 1]."""
    matched: np.ndarray[Any, np.dtype[np.bool_]]
    """Agents with any matched capability."""
    requests: F32
    """Every capability's requests (matched or not), stacked capability by capability."""
    grid: I32
    """Each capability's rows of ``requests`` as a padded grid (padding points past the last row)."""
    columns: I32
    """Each matched capability's row of ``grid``."""
    temperature: float = TEMPERATURE

    def scores(self, vector: F32) -> F32:
        """Per agent: the best over its matched capabilities of the match weight times the capability's share
        of the message among all the bank's capabilities (a softmax at :data:`TEMPERATURE` of each one's
        similarity, the mean of its nearest :data:`TOP_REQUESTS` requests); then centred over the matched agents.
        0 for an agent that matched nothing (it is neither pushed up nor down)."""
        per_cap = top_mean(self.requests @ vector, self.grid, TOP_REQUESTS)
        # A share among every capability, not only the matched ones: a message that reads like a request for
        # something no agent does (or like no request at all, a bare answer) gives every matched one little.
        share = np.exp((per_cap - per_cap.max()) / np.float32(self.temperature))
        share = (share / share.sum())[self.columns]
        best = np.where(self.weights > 0, self.weights * share[None, :], -np.inf).max(axis=1)
        out = np.zeros(self.weights.shape[0], dtype=np.float32)
        out[self.matched] = best[self.matched] - best[self.matched].mean()
        return out


def match_bank(vectors: BankVectors, agent_vectors: F32, match_from: float = MATCH_FROM,
               match_full: float = MATCH_FULL) -> BankMatch | None:
    """Each agent (its ``name: description`` vector, one row of ``agent_vectors``) against every capability's
    descriptions (the best of the three languages): weight ``(cosine - match_from) / (match_full - match_from)``
    clipped to [0, 1]. ``None`` when no agent matches anything."""
    desc = vectors.descriptions()
    n_lang = len(LANGUAGES)
    cos = (agent_vectors @ desc.T).reshape(len(agent_vectors), -1, n_lang).max(axis=2)
    weights = np.clip((cos - match_from) / (match_full - match_from), 0.0, 1.0).astype(np.float32)
    used = np.flatnonzero(weights.max(axis=0) > 0).astype(np.int32)
    if not used.size:
        return None
    blocks = vectors.requests()
    sizes = np.array([len(b) for b in blocks], dtype=np.int32)
    starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int32)
    weights = np.ascontiguousarray(weights[:, used])
    # A padded grid even when counts are uneven (a user's bank): the bank is small.
    grid = np.full((len(sizes), int(sizes.max())), int(sizes.sum()), dtype=np.int32)
    for i, (start, size) in enumerate(zip(starts, sizes, strict=True)):
        grid[i, :size] = np.arange(start, start + size, dtype=np.int32)
    return BankMatch(tuple(vectors.bank.capabilities[c].id for c in used), weights, weights.max(axis=1) > 0,
                     np.ascontiguousarray(np.vstack(blocks)), grid, used)
