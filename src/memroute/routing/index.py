"""The precomputed form of a set of agents, built once per catalogue version and reused by every route.

Per agent (cached by agent id + content version): tokens of the safe document, piece and example
embeddings. Per catalogue: a BM25 inverted index with per-posting weights, the stacked piece vectors, the
lookup tables of the lexical strategies, and the static part of seed 004's tie-break order.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memroute.embed import Embedder
from memroute.embed.by_language import reads_strong, strong_columns
from memroute.routing.agents import agent_version, check_agents
from memroute.routing.bank import BankMatch, BankVectors, RequestBank, match_bank
from memroute.routing.documents import AgentDocument, describe
from memroute.routing.examples import ExampleClassifier, example_grid, fit_classifier
from memroute.types import Agent, AgentStatus

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]

STATUS_RANK = {AgentStatus.ACTIVE: 0, AgentStatus.IDLE: 1, AgentStatus.INACTIVE: 2, AgentStatus.ERROR: 3}


class BM25:
    """Okapi BM25 over agent documents (Robertson & Zaragoza 2009), with Lucene's non-negative idf
    ``log(1 + (N - df + 0.5) / (df + 0.5))`` so that 10,000 identical documents score 0, not below it.

    Each posting stores its final term weight, so a query costs one vector add per query term.
    """

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.n = len(docs)
        lengths = np.array([len(d) for d in docs], dtype=np.float32)
        avgdl = float(lengths.mean()) if self.n and lengths.sum() > 0 else 1.0
        tf: dict[str, dict[int, int]] = defaultdict(dict)
        for i, doc in enumerate(docs):
            for tok in doc:
                tf[tok][i] = tf[tok].get(i, 0) + 1
        self.idf: dict[str, float] = {}
        self.postings: dict[str, tuple[I32, F32]] = {}
        for tok, counts in tf.items():
            df = len(counts)
            idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
            idx = np.fromiter(counts.keys(), dtype=np.int32, count=df)
            f = np.fromiter(counts.values(), dtype=np.float32, count=df)
            norm = k1 * (1.0 - b + b * lengths[idx] / avgdl)
            self.idf[tok] = idf
            self.postings[tok] = (idx, (idf * f * (k1 + 1.0) / (f + norm)).astype(np.float32))
        self.unseen_idf = math.log(1.0 + (self.n + 0.5) / 0.5)

    def raw_scores(self, tokens: Sequence[str]) -> F32:
        scores = np.zeros(self.n, dtype=np.float32)
        for tok in tokens:
            posting = self.postings.get(tok)
            if posting is not None:
                scores[posting[0]] += posting[1]
        return scores

    def scores(self, tokens: Sequence[str]) -> F32:
        """BM25 divided by the query's total idf: in [0, 1]-ish (clipped), comparable across queries."""
        if not tokens or not self.n:
            return np.zeros(self.n, dtype=np.float32)
        total = sum(self.idf.get(t, self.unseen_idf) for t in tokens)
        if total <= 0:
            return np.zeros(self.n, dtype=np.float32)
        out: F32 = np.minimum(self.raw_scores(tokens) / np.float32(total), np.float32(1.0))
        return out


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """One agent version's cached data: its document and the embeddings of its pieces and examples."""

    key: tuple[str, str]
    doc: AgentDocument
    piece_vectors: F32 | None
    example_vectors: F32 | None
    label_vector: F32 | None = None
    """The name's words on their own (:attr:`AgentDocument.label`)."""


class CatalogueIndex:
    """Agents ready to be scored: built by :class:`AgentCache` and shared by the strategies."""

    def __init__(self, agents: tuple[Agent, ...], entries: Sequence[AgentEntry], dimension: int | None,
                 strong_from: int | None = None, bank: BankVectors | None = None) -> None:
        self.agents = agents
        self.strong_from = strong_from
        """Where the strong encoder's columns begin (a language-aware encoder), else ``None``."""
        self.entries = tuple(entries)
        self.n = len(agents)
        self.ids = [a.id for a in agents]
        self.position = {a.id: i for i, a in enumerate(agents)}
        self.status_rank = np.array([STATUS_RANK[a.status] for a in agents], dtype=np.int8)
        self.thresholds = np.array([np.nan if a.threshold is None else a.threshold for a in agents],
                                   dtype=np.float32)
        self.tiebreak = _static_order(agents)
        self.bm25 = BM25([e.doc.doc_tokens + e.doc.example_tokens for e in entries])
        self.has_vectors = dimension is not None and all(e.piece_vectors is not None for e in entries)
        self.dimension = dimension or 0
        # Pieces and examples are stacked agent by agent, so per-agent maxima are one reduceat each.
        self.piece_matrix, self.piece_owner, self.piece_starts = _stack([e.piece_vectors for e in entries],
                                                                        self.dimension)
        labels = [e.label_vector for e in entries if e.label_vector is not None]
        self.label_matrix: F32 | None = (np.vstack(labels).astype(np.float32)
                                         if self.has_vectors and labels and len(labels) == self.n else None)
        """One row per agent: its name's words (:attr:`AgentEntry.label_vector`), ``None`` without vectors."""
        self.example_matrix, self.example_owner, self.example_starts = _stack(
            [e.example_vectors for e in entries], self.dimension)
        self.example_agents = np.unique(self.example_owner) if self.example_owner.size else np.zeros(0, np.int32)
        self.has_examples = np.array([bool(e.doc.examples) for e in entries], dtype=np.bool_)
        self.example_grid = example_grid(self.example_starts, len(self.example_owner))
        # Fitted once per catalogue version; None when the agents have no (or too few) examples.
        self.example_classifier: ExampleClassifier | None = (
            fit_classifier(self.example_matrix, self.example_owner) if self.has_vectors else None)
        self.names: dict[str, list[int]] = defaultdict(list)
        self.keywords: dict[str, list[int]] = defaultdict(list)
        self.tools: dict[str, list[int]] = defaultdict(list)
        for i, e in enumerate(entries):
            for name in e.doc.names:
                self.names[name].append(i)
            for kw in e.doc.keyword_tokens:
                self.keywords[kw].append(i)
            for tool in e.doc.tool_names:
                self.tools[tool].append(i)
        self.cjk_names = [(name, idxs) for name, idxs in self.names.items() if not name.isascii()]
        self.max_name_words = max((len(n.split()) for n in self.names), default=1)
        self.input_types: dict[str, npt.NDArray[np.bool_]] = {
            t: np.array([t in a.input_types for a in agents], dtype=np.bool_)
            for t in ("image", "audio", "video", "file")
        }
        # Only a language-aware encoder's Japanese and Korean messages read the bank (strategies.py).
        self._bank = bank if self.has_vectors and strong_from is not None and self.n else None
        self._bank_match: BankMatch | None = None
        self._bank_lock = threading.Lock()

    def reads_strong(self, vector: F32) -> bool:
        """Whether a message's vector has the strong encoder's part (a language-aware encoder's Japanese or Korean
        text): only such messages read the pieces in context, each agent's name and the request bank."""
        return self.strong_from is not None and bool(vector[self.strong_from:].any())

    def bank_match(self) -> BankMatch | None:
        """The agents matched to the request bank (:mod:`memroute.routing.bank`): made when the index is built
        if an agent is described in Japanese or Korean, else on the first Japanese or Korean message, so that an
        English deployment never embeds the bank (nor loads the strong encoder for it). ``None`` without a bank,
        or when no agent matched any capability."""
        if self._bank is None:
            return self._bank_match
        with self._bank_lock:
            if self._bank is not None:
                descriptions = self.piece_matrix[self.piece_starts]  # each agent's ``name: description``
                self._bank_match = match_bank(self._bank, descriptions)
                self._bank = None
            return self._bank_match


def _static_order(agents: Sequence[Agent]) -> npt.NDArray[np.int64]:
    """Each agent's place in seed 004's tie-break order after the score: status rank, last used (newest
    first), usage count (most first), name, id."""
    def key(i: int) -> tuple[int, float, int, str, str]:
        a = agents[i]
        last = a.last_used.timestamp() if a.last_used is not None else float("-inf")
        return (STATUS_RANK[a.status], -last, -a.usage_count, a.name, a.id)

    order = sorted(range(len(agents)), key=key)
    rank = np.empty(len(agents), dtype=np.int64)
    rank[np.array(order, dtype=np.int64)] = np.arange(len(agents), dtype=np.int64)
    return rank


def _stack(blocks: Sequence[F32 | None], dimension: int) -> tuple[F32, I32, I32]:
    owners = [np.full(len(b), i, dtype=np.int32) for i, b in enumerate(blocks) if b is not None and len(b)]
    mats = [b for b in blocks if b is not None and len(b)]
    if not mats:
        return np.zeros((0, dimension), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int32)
    owner = np.concatenate(owners)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]).astype(np.int32)
    return np.ascontiguousarray(np.vstack(mats), dtype=np.float32), owner, starts


class AgentCache:
    """Builds :class:`CatalogueIndex` objects and caches them.

    Per agent, documents and embeddings are cached by (agent id, content version), so changing one agent
    re-embeds only that agent. Per call, the index is found by the identity of the agent objects (agents
    are frozen, so the same objects mean the same content): hashing 10,000 agents' contents on every
    route would cost more than routing.
    """

    def __init__(self, embedder: Embedder | None, max_catalogues: int = 8, max_agents: int = 200_000,
                 bank: RequestBank | None = None) -> None:
        self.embedder = embedder
        self.bank = BankVectors(bank, embedder) if bank is not None and embedder is not None else None
        """The request bank's vectors, embedded once for every catalogue this cache indexes."""
        self.max_catalogues = max_catalogues
        self.max_agents = max_agents
        self._entries: OrderedDict[tuple[str, str], AgentEntry] = OrderedDict()
        self._indexes: OrderedDict[tuple[int, ...], tuple[tuple[Agent, ...], CatalogueIndex]] = OrderedDict()
        self._lock = threading.Lock()

    def index(self, agents: Sequence[Agent]) -> CatalogueIndex:
        key = tuple(map(id, agents))
        with self._lock:
            found = self._indexes.get(key)
            if found is not None:
                self._indexes.move_to_end(key)
                return found[1]
        checked = check_agents(agents)
        entries = self._entries_for(checked)
        dim = self.embedder.dimension if self.embedder is not None else None
        index = CatalogueIndex(checked, entries, dim, strong_columns(self.embedder), self.bank)
        if self.bank is not None and any(reads_strong(self.embedder, e.doc.pieces[0]) for e in entries):
            index.bank_match()  # described in Japanese or Korean: match now, not on the first user's turn
        with self._lock:
            # The tuple of agents is kept with the index so that the ids in the key stay alive and unique.
            self._indexes[key] = (checked, index)
            while len(self._indexes) > self.max_catalogues:
                self._indexes.popitem(last=False)
        return index

    def _entries_for(self, agents: tuple[Agent, ...]) -> list[AgentEntry]:
        keys = [(a.id, agent_version(a)) for a in agents]
        with self._lock:
            have = {k: self._entries[k] for k in keys if k in self._entries}
        missing = [(k, a) for k, a in zip(keys, agents, strict=True) if k not in have]
        if missing:
            docs = [describe(a) for _, a in missing]
            piece_vecs: list[F32 | None] = [None] * len(missing)
            example_vecs: list[F32 | None] = [None] * len(missing)
            label_vecs: list[F32 | None] = [None] * len(missing)
            if self.embedder is not None:
                texts = list(dict.fromkeys(t for d in docs for t in (*d.pieces, *d.examples, d.label)))
                vecs = self.embedder.embed(texts, side="passage") if texts else None
                row = {t: i for i, t in enumerate(texts)}
                for j, d in enumerate(docs):
                    assert vecs is not None  # every agent has at least one piece (its name)
                    piece_vecs[j] = vecs[[row[t] for t in d.pieces]]
                    example_vecs[j] = vecs[[row[t] for t in d.examples]] if d.examples else None
                    label_vecs[j] = vecs[row[d.label]]
            with self._lock:
                for j, (k, _) in enumerate(missing):
                    entry = AgentEntry(k, docs[j], piece_vecs[j], example_vecs[j], label_vecs[j])
                    self._entries[k] = entry
                    have[k] = entry
                while len(self._entries) > self.max_agents:
                    self._entries.popitem(last=False)
        return [have[k] for k in keys]
