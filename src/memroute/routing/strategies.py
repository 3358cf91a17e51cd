"""The routing strategies of seed 004 plus embedding similarity.

Each strategy scores every agent at once (a numpy vector in ``[0, weight]``) and explains one agent on
demand, so that ranking 10,000 agents costs a few vector operations and explanations are built only for
the agents returned. Explanations carry normalised matched terms, tool names, file types and piece kinds,
never the user's raw text (seed 004, privacy). The composite router sums the strategies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from memroute.routing.bank import BankMatch
from memroute.routing.documents import normalise_name
from memroute.routing.examples import top_mean
from memroute.routing.index import F32, CatalogueIndex
from memroute.text import tokenize

BANK_WEIGHT = 0.25
"""``EmbeddingStrategy.by_bank``'s default (docs/benchmarks.md, routing, the twelfth and thirteenth passes)."""

_MENTION = re.compile(r"@([\w\-.:]+)", re.UNICODE)
_WORDS = re.compile(r"[\w]+", re.UNICODE)
_FILE_SUFFIXES = {
    "image": (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".svg", ".heic"),
    "audio": (".mp3", ".wav", ".m4a", ".ogg", ".flac"),
    "video": (".mp4", ".mov", ".avi", ".mkv", ".webm"),
}


@dataclass(slots=True)
class PreparedQuery:
    """A query as every strategy reads it: computed once per route."""

    text: str
    tokens: list[str]
    content_types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    vector: F32 | None = None
    frame: PreparedQuery | None = None
    """A Japanese or Korean message's frame (the message without the text it carries,
    :func:`memroute.analysis.payload.find_payload`, or without its leading subordinate clauses,
    :func:`memroute.analysis.clauses.find_main_clause`), prepared the same way; ``None`` for any other message."""
    frame_weight: float = 0.0
    """The frame's share of every strategy's score (``AgentRouter.frame_weight`` or ``clause_weight``)."""
    norm_text: str = field(init=False)

    def __post_init__(self) -> None:
        self.norm_text = normalise_name(self.text)


class Strategy(Protocol):
    """One scoring signal. ``scores`` returns a float32 vector over the index's agents in [0, weight]."""

    name: str
    weight: float

    def scores(self, query: PreparedQuery, index: CatalogueIndex) -> F32: ...

    def explain(self, query: PreparedQuery, index: CatalogueIndex, agent: int) -> dict[str, Any]: ...


def _is_distinctive(name: str, original: str) -> bool:
    """A name that cannot be an ordinary word of a message: several words, digits, or an identifier."""
    return " " in name or any(c.isdigit() for c in name) or bool(re.search(r"[_\-.]|[a-z][A-Z]", original))


class MentionStrategy:
    """1.0 when the message names the agent: ``@id`` / ``@name``, the whole message is its name, or a
    distinctive name (several words, digits, an identifier such as ``code_review``) appears verbatim.
    A one-word everyday name ("hotel") only counts with ``@``: "a taxi to the hotel" names no agent."""

    name = "mention"

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = weight

    def matches(self, query: PreparedQuery, index: CatalogueIndex) -> dict[int, str]:
        found: dict[int, str] = {}
        for m in _MENTION.finditer(query.text):
            for i in index.names.get(normalise_name(m.group(1)), ()):
                found.setdefault(i, "@" + normalise_name(m.group(1)))
        for hint in query.hints:
            for i in index.names.get(normalise_name(hint), ()):
                found.setdefault(i, "hint:" + normalise_name(hint))
        if query.norm_text in index.names:
            for i in index.names[query.norm_text]:
                found.setdefault(i, "name")
        words = [w.lower() for w in _WORDS.findall(query.text.replace("_", " ").replace("-", " "))]
        for size in range(2, index.max_name_words + 1):
            for start in range(len(words) - size + 1):
                gram = " ".join(words[start:start + size])
                for i in index.names.get(gram, ()):
                    found.setdefault(i, gram)
        for word in _WORDS.findall(query.text):
            norm = normalise_name(word)
            if norm in index.names and _is_distinctive(norm, word):
                for i in index.names[norm]:
                    found.setdefault(i, norm)
        for name, idxs in index.cjk_names:
            if len(name) >= 2 and name in query.norm_text:
                for i in idxs:
                    found.setdefault(i, name)
        return found

    def scores(self, query: PreparedQuery, index: CatalogueIndex) -> F32:
        out = np.zeros(index.n, dtype=np.float32)
        hits = self.matches(query, index)
        if hits:
            # An agent with example utterances is described by how users talk to it, and its name is often
            # a label ("pay_bill") whose words occur in ordinary requests ("how do I pay bill"): for such an
            # agent a name found in running text does not count; @name, hints and the whole message do.
            # (Training sides of CLINC150 / BANKING77, cross-fitted: counting it cost 1.8 / 2.3 points.)
            named = [i for i, how in hits.items() if _explicit(how) or not index.has_examples[i]]
            out[named] = self.weight
        return out

    def explain(self, query: PreparedQuery, index: CatalogueIndex, agent: int) -> dict[str, Any]:
        hit = self.matches(query, index).get(agent)
        return {"matched": hit} if hit else {}


def _explicit(how: str) -> bool:
    return how.startswith(("@", "hint:")) or how == "name"


class BM25Strategy:
    """BM25 of the message's content tokens against the safe agent document, divided by the message's total
    idf (so a score says how much of the message the agent covers), times the weight."""

    name = "bm25"

    def __init__(self, weight: float = 0.2) -> None:
        self.weight = weight

    def scores(self, query: PreparedQuery, index: CatalogueIndex) -> F32:
        return index.bm25.scores(query.tokens) * np.float32(self.weight)

    def explain(self, query: PreparedQuery, index: CatalogueIndex, agent: int) -> dict[str, Any]:
        doc = index.entries[agent].doc
        vocab = set(doc.doc_tokens) | set(doc.example_tokens)
        return {"matched_terms": sorted({t for t in query.tokens if t in vocab})}


class KeywordBoostStrategy:
    """Seed 004: +0.1 per query token or tag that is one of the agent's keywords or categories, capped."""

    name = "keywords"

    def __init__(self, weight: float = 0.2, per_hit: float = 0.1) -> None:
        self.weight = weight
        self.per_hit = per_hit

    def _hits(self, query: PreparedQuery) -> list[str]:
        tags = [t for tag in query.tags for t in tokenize(tag)]
        return list(dict.fromkeys([*query.tokens, *tags]))

    def scores(self, query: PreparedQuery, index: CatalogueIndex) -> F32:
        out = np.zeros(index.n, dtype=np.float32)
        if not index.keywords:
            return out
        for tok in self._hits(query):
            for i in index.keywords.get(tok, ()):
                out[i] += self.per_hit
        return np.minimum(out, np.float32(self.weight))

    def explain(self, query: PreparedQuery, index: CatalogueIndex, agent: int) -> dict[str, Any]:
        kws = index.entries[agent].doc.keyword_tokens
        hits = [t for t in self._hits(query) if t in kws]
        return {"matched_keywords": hits} if hits else {}


class ToolHintStrategy:
    """A small boost when a hint, or an identifier in the message, is one of the agent's tool names."""

    name = "tools"

    def __init__(self, weight: float = 0.2) -> None:
        self.weight = weight

    def _tools(self, query: PreparedQuery) -> set[str]:
        named = {normalise_name(h) for h in query.hints}
        named.update(normalise_name(w) for w in re.findall(r"[\w\-.]+", query.text) if _is_distinctive(
            normalise_name(w), w))
        return named

    def scores(self, query: PreparedQuery, index: CatalogueIndex) -> F32:
        out = np.zeros(index.n, dtype=np.float32)
        if index.tools:
            for tool in self._tools(query):
                for i in index.tools.get(tool, ()):
                    out[i] = self.weight
        return out

    def explain(self, query: PreparedQuery, index: CatalogueIndex, agent: int) -> dict[str, Any]:
        hits = sorted(self._tools(query) & index.entries[agent].doc.tool_names)
        return {"tool_hits": hits} if hits else {}


class FileTypeStrategy:
    """A boost for agents that accept the message's non-text content (image, audio, video, file)."""

    name = "file_type"

    def __init__(self, weight: float = 0.2) -> None:
        self.weight = weight

    def scores(self, query: PreparedQuery, index: CatalogueIndex) -> F32:
        out = np.zeros(index.n, dtype=np.float32)
        types = query.content_types
        if not types:
            return out
        for t in types:
            out += index.input_types[t].astype(np.float32)
        return out * np.float32(self.weight / len(types))

    def explain(self, query: PreparedQuery, index: CatalogueIndex, agent: int) -> dict[str, Any]:
        accepted = [t for t in query.content_types if t in index.agents[agent].input_types]
        return {"file_types": accepted} if accepted else {}


def content_types_of(names: list[str], mimes: list[str], types: list[str]) -> tuple[str, ...]:
    """Content types from declared types, refined by file suffix or MIME type ("file" → "image")."""
    out = {t for t in types if t != "text"}
    for name, mime in zip(names, mimes, strict=True):
        lowered = name.lower()
        for kind, suffixes in _FILE_SUFFIXES.items():
            if lowered.endswith(suffixes) or mime.startswith(kind + "/"):
                out.add(kind)
    return tuple(sorted(out))


class EmbeddingStrategy:
    """Cosine similarity of the message to the agent's pieces (description, each capability: mean of the
    ``top_pieces`` best) and to its example utterances (mean of the ``top_examples`` nearest, which is steadier
    than the single nearest neighbour), clipped to [0, 1], times the weight.

    Two pieces rather than one: an agent whose whole schema fits the message ("a 3 star hotel room": the
    search intent *and* the star-rating slot) beats one that shares a single phrase with it. On SGD dev (the
    only set routing is tuned on) it raised the share of dialogue turns routed right from 0.859 to 0.872 under
    the same conversation policy.

    With the language-aware encoder (``use-m3+e5-ja-ko``), a capability's similarity from the strong encoder
    (multilingual-e5, Japanese and Korean texts only) is ``(1 - in_context)`` of its own plus ``in_context`` of
    its agent's description's: a short capability such as 「地域」 or "인원" belongs to many agents, and e5 scores
    it on the few characters it has. English texts have no e5 part, so English scores are unchanged. On the
    dev splits of JMultiWOZ-TC and memroute's Japanese and Korean sets, 0.3 and 0.5 gave the best mean (0,
    0.3, 0.5, 0.7; docs/benchmarks.md); the same mixing on use-m3's part cost English sets 1-3 points.

    A Japanese or Korean message is also read against each agent's name on its own (``calendar``,
    ``code review``): a catalogue's names are mostly English words, and an English text's vector is use-m3 alone,
    the encoder strongest across languages, so the name bridges words a description in the users' language does
    not share with them (native words against loanwords, "노동요 좀 틀어 줘" against a music agent described as
    "음악 재생"). ``by_name`` times the name's cosine, centred over the catalogue, is added to the pieces' score;
    English messages are not read this way (their use-m3 vector already sees the name, which heads the
    description piece), so English scores are unchanged. 0.2 (in the language-aware cosine's units, where use-m3
    is ``sqrt(0.2)`` of a Japanese or Korean vector) was the middle of the dev plateau 0.15-0.3 over memroute's
    Korean and Japanese sets and JMultiWOZ-TC (docs/benchmarks.md).

    A Japanese or Korean message is also read against memroute's bank of example requests for common
    assistant capabilities (:mod:`memroute.routing.bank`), matched to the catalogue's agents when the router's
    ``bank`` is set (the default): ``by_bank`` times :meth:`memroute.routing.bank.BankMatch.scores` (the agent's
    best matched capability's share of the message among all the bank's capabilities, times the match weight,
    centred over the matched agents) is added to the pieces' score; agents that match no capability, and English
    messages, are untouched. 0.25 was chosen with the switch rule's ``ja_ko_bias`` on the dev splits of the same
    three sets (docs/benchmarks.md, the thirteenth pass: the plateau 0.2-0.3)."""

    name = "embedding"

    def __init__(self, weight: float = 1.0, top_examples: int = 3, top_pieces: int = 2,
                 in_context: float = 0.3, by_name: float = 0.2, by_bank: float = BANK_WEIGHT) -> None:
        self.weight = weight
        self.top_examples = top_examples
        self.top_pieces = top_pieces
        self.in_context = in_context
        self.by_name = by_name
        self.by_bank = by_bank

    def similarities(self, query: PreparedQuery, index: CatalogueIndex) -> tuple[F32, F32]:
        """(best piece cosine, example cosine) per agent; agents without examples get -1 for the latter."""
        piece = np.full(index.n, -1.0, dtype=np.float32)
        example = np.full(index.n, -1.0, dtype=np.float32)
        if query.vector is None or not index.has_vectors:
            return piece, example
        if index.piece_matrix.shape[0]:
            piece[index.piece_owner[index.piece_starts]] = _best_pieces(self._piece_sims(query.vector, index),
                                                                        index, self.top_pieces)
            piece += self._by_name(query.vector, index)
            piece += self._by_bank(query.vector, index)
        if index.example_matrix.shape[0]:
            sims = index.example_matrix @ query.vector
            example[index.example_agents] = (
                top_mean(sims, index.example_grid, self.top_examples) if index.example_grid is not None
                else _top_mean(sims, index.example_owner, index.example_starts, self.top_examples))
        return piece, example

    def _by_name(self, vector: F32, index: CatalogueIndex) -> F32 | np.float32:
        """A Japanese or Korean message read against each agent's name on its own (see the class docstring),
        centred over the catalogue: ``by_name * (cosine - mean cosine)``; 0 for any other message."""
        if self.by_name <= 0 or index.label_matrix is None or not index.reads_strong(vector):
            return np.float32(0.0)
        sims = index.label_matrix @ vector
        out: F32 = (np.float32(self.by_name) * (sims - sims.mean())).astype(np.float32)
        return out

    def _by_bank(self, vector: F32, index: CatalogueIndex) -> F32 | np.float32:
        """A Japanese or Korean message read against the example requests of the bank capabilities each agent
        matched (see the class docstring): ``by_bank *`` :meth:`BankMatch.scores`; 0 for any other message."""
        match = self._bank_match(vector, index)
        if match is None:
            return np.float32(0.0)
        out: F32 = (np.float32(self.by_bank) * match.scores(vector)).astype(np.float32)
        return out

    def _bank_match(self, vector: F32, index: CatalogueIndex) -> BankMatch | None:
        """The catalogue's bank match when this message reads the bank (a Japanese or Korean message, ``by_bank``
        above 0), else ``None``."""
        return index.bank_match() if self.by_bank > 0 and index.reads_strong(vector) else None

    def _piece_sims(self, vector: F32, index: CatalogueIndex) -> F32:
        """Cosine of the message to every piece; with a language-aware encoder, each capability's part from
        the strong encoder is taken in its agent's context (see the class docstring)."""
        split = index.strong_from
        if split is None or self.in_context <= 0 or not index.reads_strong(vector):
            out: F32 = index.piece_matrix @ vector
            return out
        strong = index.piece_matrix[:, split:] @ vector[split:]
        described = np.repeat(strong[index.piece_starts], np.diff(np.r_[index.piece_starts, strong.size]))
        in_context = (1 - self.in_context) * strong + self.in_context * described
        in_context[index.piece_starts] = strong[index.piece_starts]  # a description is its own context
        mixed: F32 = (index.piece_matrix[:, :split] @ vector[:split] + in_context).astype(np.float32)
        return mixed

    def scores(self, query: PreparedQuery, index: CatalogueIndex) -> F32:
        piece, example = self.similarities(query, index)
        if index.example_classifier is not None and query.vector is not None:
            example = index.example_classifier.scores(query.vector, example)
        return np.clip(np.maximum(piece, example), 0.0, 1.0) * np.float32(self.weight)

    def explain(self, query: PreparedQuery, index: CatalogueIndex, agent: int) -> dict[str, Any]:
        if query.vector is None or not index.has_vectors:
            return {}
        entry = index.entries[agent]
        out: dict[str, Any] = {}
        if entry.piece_vectors is not None and len(entry.piece_vectors):
            sims = entry.piece_vectors @ query.vector
            best = int(np.argmax(sims))
            out["best_piece"] = "description" if best == 0 else f"capability {best}"
            out["piece_similarity"] = round(float(sims[best]), 4)
        if entry.example_vectors is not None and len(entry.example_vectors):
            sims = np.sort(entry.example_vectors @ query.vector)[::-1][: self.top_examples]
            out["example_similarity"] = round(float(sims.mean()), 4)
        match = self._bank_match(query.vector, index)
        if match is not None and match.matched[agent]:
            out["bank_capabilities"] = [c for c, w in zip(match.capabilities, match.weights[agent], strict=True)
                                        if w > 0]
        classifier = index.example_classifier
        if classifier is not None and index.has_examples[agent]:
            where = np.flatnonzero(classifier.agents == agent)
            if where.size:
                out["example_probability"] = round(float(classifier.probabilities(query.vector)[where[0]]), 4)
        return out


def _best_pieces(sims: F32, index: CatalogueIndex, k: int) -> F32:
    """Per agent, the mean of its ``k`` best piece similarities (one vector op when every agent has one piece)."""
    if k <= 1 or index.piece_starts.size == sims.size:
        return np.maximum.reduceat(sims, index.piece_starts).astype(np.float32)
    return _top_mean(sims, index.piece_owner, index.piece_starts, k)


def _top_mean(sims: F32, owner: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], k: int) -> F32:
    """Mean of the k largest similarities within each owner's contiguous block."""
    if k <= 1:
        return np.maximum.reduceat(sims, starts).astype(np.float32)
    order = np.lexsort((-sims, owner))
    ranked = sims[order]
    pos = np.arange(len(sims)) - np.repeat(starts, np.diff(np.r_[starts, len(sims)]))
    keep = pos < k
    sums = np.add.reduceat(np.where(keep, ranked, 0.0), starts)
    counts = np.add.reduceat(keep.astype(np.float32), starts)
    return (sums / counts).astype(np.float32)


def default_strategies() -> list[Strategy]:
    return [MentionStrategy(), EmbeddingStrategy(), BM25Strategy(), KeywordBoostStrategy(), ToolHintStrategy(),
            FileTypeStrategy()]
