"""The local reranker: a logistic model over features of each fused candidate, no LLM.

No cross-encoder runs offline here (STACK.md), so the reranker is learned from what the pipeline already
knows about a candidate. The features are general, nothing dataset-specific:

- ``fused``, ``fused_rr``: the fused score (scaled by the best) and 1 / (1 + fused rank);
- ``bm25``, ``vector``: the best min-max score the candidate got in any keyword / vector list;
- ``cosine``, ``cosine_gap``: cosine to the original query, and its distance to the best candidate's;
- ``n_lists``: share of the search lists that found it;
- ``keyword_overlap``: share of the query's keyword tokens found in the memory's text;
- ``entity_overlap``: share of the query's named entities written in the memory;
- ``speaker_named``: the memory's speaker or author (metadata ``speaker`` / ``author`` / ``name``) is named
  in the query; ``other_named``: the query names someone, and it is not this memory's speaker;
- ``reference_overlap``: share of the resolved references' tokens in the memory;
- ``in_range`` / ``out_of_range``: inside the query's time range, or how far outside it (months, max 1);
- ``asks_when_dated``: the query asks "when" and the memory mentions a time ("yesterday", 「先週」);
- ``recency``: position of the memory's date between the oldest and newest candidate;
- ``session_best``, ``session_share``: best fused score of another candidate of the same session, and
  the share of candidates in that session, and the other candidates' fused scores summed (a session the
  query is about holds several candidates);
- ``length``: log of the memory's length in characters; ``is_question``: the memory is a question;
- ``speaker_bm25``, ``speaker_cosine``: ``speaker_named`` times ``bm25`` / ``cosine`` (a linear model needs
  the product to learn that a match by the named person counts more);
- ``type_match`` / ``type_miss``: the query asks for a place, a time, a person or a number ("where",
  「いつ」, "누구", "how many") and the memory holds / does not hold one
  (:mod:`memroute.retrieval.answer_type`).

The weights ship in ``rerank_weights.json`` beside this module, one model per encoder (each encoder's
cosine has its own scale: the ``use-m3+e5-small`` pair's sits compressed near its mean), keyed by the
embedder's ``model_id`` as the judge's are, fitted by ``memroute eval recall --fit [--embedder NAME]`` (a
logistic regression over the candidates of the training questions; see each entry's ``fitted_on``). An
encoder without its own entry gets the file's ``fallback`` entry (use-m3's). A model may also carry
:data:`SMALL_FEATURES`: every feature again, times ``small`` (1 when the searches ran out of matches, so
that the candidates are the whole of a small store, 0 in a long chat log), and ``small`` itself: a second
set of weights added for small stores, fitted on the everyday train split beside LoCoMo (a store of ten
memories is not a chat log of six hundred turns: its keyword lists' best hit is whatever shares a word, and
the pair's cosine separates its few memories better than on LoCoMo). Format 2:
``{"version": 2, "fallback": MODEL_ID, "encoders": {MODEL_ID: model}}``; a format-1 file (one model at the
top level, before 2026-11-27) still loads, as the model of every encoder.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.analysis import QueryAnalysis, QueryType, ReferenceType
from memroute.errors import ConfigError
from memroute.retrieval.answer_type import asked_type, holds
from memroute.stores import row_cache
from memroute.text import tokenize
from memroute.types import MemoryItem

FEATURES = ("fused", "fused_rr", "bm25", "vector", "cosine", "cosine_gap", "n_lists", "keyword_overlap",
            "entity_overlap", "speaker_named", "other_named", "reference_overlap", "in_range", "out_of_range",
            "asks_when_dated", "recency", "session_best", "session_share", "session_sum", "length", "is_question",
            "speaker_bm25", "speaker_cosine", "type_match", "type_miss")
LATE = "maxsim"
"""The late-interaction column (:mod:`memroute.retrieval.late`): centred, idf-weighted MaxSim over token vectors,
computed for embedders that give them and read by a model fitted with it (``RerankModel.late``)."""
SPEAKER_KEYS = ("speaker", "author", "name")
_WHEN = re.compile(r"\bwhen\b|\bwhat (?:time|day|date|year|month)\b|\bhow long ago\b"
                   r"|いつ|何時|何日|何月|何年|언제|몇\s?시|며칠", re.IGNORECASE)
_DATED = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|last|next|ago|this (?:week|month|year|weekend|morning)|recently|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|weekend|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|\d{4}|week|month|year)\b|昨日|今日|明日|先週|先月|去年|来週|来月|今週|週末|"
    r"\d+月|\d+日|어제|오늘|내일|지난주|지난달|작년|다음 주|이번 주|주말|\d+월|\d+일", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A fused candidate as the reranker sees it."""

    memory: MemoryItem
    fused: float
    rank: int
    scores: Mapping[str, float]
    """Min-max score per search list name (``bm25:0``, ``vector:1``, ...) that found it."""
    cosine: float


@dataclass(frozen=True, slots=True)
class RerankModel:
    """A linear model over :data:`FEATURES`, then :data:`LATE` when ``late`` (a model fitted with the
    late-interaction column), then, when it has as many weights, each of those times ``small`` and ``small``
    (:data:`SMALL_FEATURES`); ``score`` is the logistic probability of being relevant."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    fitted_on: str = ""
    late: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads before the small-store ones."""
        return (*FEATURES, LATE) if self.late else FEATURES

    @property
    def reads_small(self) -> bool:
        """Whether it has weights of its own for small stores (:data:`SMALL_FEATURES`)."""
        return len(self.weights) > len(self.columns)

    def design(self, x: npt.NDArray[np.float64], late: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
        """``x`` (:data:`FEATURES`) with the late-interaction column when the model reads it. A candidate without
        a late-interaction score (``late`` missing or NaN: a store written before token vectors were kept, or a
        memory without them) gets the column's training mean, so that the column adds nothing to its logit."""
        if not self.late:
            return x
        fill = self.mean[len(FEATURES)]
        col = np.full(len(x), fill) if late is None else np.asarray(late, dtype=np.float64).reshape(-1)
        return np.hstack([x, np.where(np.isnan(col), fill, col)[:, None]])

    def logits(self, x: npt.NDArray[np.float64], small: bool = False,
               late: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
        """``small``: the candidates are a small store's all (the searches ran out of matches); ``late``: the
        candidates' late-interaction scores (:mod:`memroute.retrieval.late`), read only by a ``late`` model."""
        x = self.design(x, late)
        if self.reads_small:
            x = with_small(x, small)
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        out: npt.NDArray[np.float64] = z @ np.asarray(self.weights) + self.bias
        return out

    def score(self, x: npt.NDArray[np.float64], small: bool = False,
              late: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
        return 1.0 / (1.0 + np.exp(-np.clip(self.logits(x, small, late), -30, 30)))

    def to_dict(self) -> dict[str, Any]:
        names = [*self.columns, *small_names(self.columns)] if self.reads_small else list(self.columns)
        return {"features": names, "weights": list(self.weights), "bias": self.bias,
                "mean": list(self.mean), "scale": list(self.scale), "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RerankModel:
        names = list(data.get("features", ()))
        late = names[len(FEATURES):len(FEATURES) + 1] == [LATE]
        base = [*FEATURES, LATE] if late else list(FEATURES)
        if names not in (base, [*base, *small_names(base)]) or len(data["weights"]) != len(names):
            raise ConfigError("the reranker weights were fitted for other features; refit them with "
                              "`memroute eval recall --data DIR --fit`")
        return cls(tuple(map(float, data["weights"])), float(data["bias"]), tuple(map(float, data["mean"])),
                   tuple(map(float, data["scale"])), str(data.get("fitted_on", "")), late)


def small_names(columns: Sequence[str]) -> tuple[str, ...]:
    """The small-store columns of a model over ``columns``: each times ``small``, then ``small``."""
    return (*(f"small_{f}" for f in columns), "small")


SMALL_FEATURES = small_names(FEATURES)
"""The optional columns of a model fitted on small stores too (see the module docstring)."""


def with_small(x: npt.NDArray[np.float64], small: bool | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``x`` with the small-store columns: each column times ``small`` (one flag, or one per row), then
    ``small``."""
    flag = np.broadcast_to(np.asarray(small, dtype=np.float64), (len(x),))[:, None]
    return np.hstack([x, x * flag, flag])


WEIGHTS_FILE = "rerank_weights.json"
FORMAT = 2
"""The version of ``rerank_weights.json``'s layout (1: one model at the top level; 2: one per encoder)."""


def parse_weights(data: Mapping[str, Any]) -> tuple[str, dict[str, Mapping[str, Any]]]:
    """The fallback key and the entries per encoder of a weights file's JSON (format 1 or 2): a format-1 file
    is one model, the fallback of every encoder (key ``""``)."""
    version = data.get("version", 1 if "features" in data else None)
    if version == 1:
        return "", {"": data}
    if version != FORMAT or not isinstance(data.get("encoders"), Mapping):
        raise ConfigError(f"{WEIGHTS_FILE} has format {version!r}, this memroute reads formats 1 and {FORMAT}; "
                          "upgrade memroute or refit with `memroute eval recall --data DIR --fit`")
    return str(data.get("fallback", "")), dict(data["encoders"])


def model_for(data: Mapping[str, Any], model_id: str) -> RerankModel:
    """The reranker of the encoder ``model_id`` in a weights file's JSON, else its fallback entry."""
    fallback, encoders = parse_weights(data)
    entry = encoders.get(model_id, encoders.get(fallback))
    if entry is None:
        raise ConfigError(f"{WEIGHTS_FILE} has no reranker for {model_id!r} and no fallback entry "
                          f"({fallback!r}); refit with `memroute eval recall --data DIR --fit --embedder NAME`")
    return RerankModel.from_dict(entry)


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    try:
        text = resources.files("memroute.retrieval").joinpath(WEIGHTS_FILE).read_text("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"memroute/retrieval/{WEIGHTS_FILE} is missing from the installation; reinstall "
                          "memroute or refit with `memroute eval recall --data DIR --fit`") from None
    data: dict[str, Any] = json.loads(text)
    return data


@lru_cache(maxsize=8)
def reranker_for(model_id: str) -> RerankModel:
    """The shipped reranker of the encoder ``model_id`` (an embedder's ``model_id``), else the fallback one
    (use-m3's); a dictionary lookup once cached."""
    return model_for(_shipped(), model_id)


def default_model() -> RerankModel:
    """The fallback weights (use-m3's): what an encoder without a reranker of its own gets."""
    return reranker_for("")


def clear_cache() -> None:
    """Forget the loaded weights (after ``--fit`` rewrote the file)."""
    _shipped.cache_clear()
    reranker_for.cache_clear()


def speaker_of(memory: MemoryItem) -> str | None:
    for key in SPEAKER_KEYS:
        value = memory.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def features(candidates: Sequence[Candidate], analysis: QueryAnalysis, now: datetime) -> npt.NDArray[np.float64]:
    """One row of :data:`FEATURES` per candidate, in the candidates' order."""
    n = len(candidates)
    if n == 0:
        return np.zeros((0, len(FEATURES)), dtype=np.float64)
    text_fold = analysis.text.casefold()
    keywords = match_forms(analysis.keywords)
    entities = [e.casefold() for e in analysis.named_entities if e.strip()]
    ref_tokens = match_forms(r.resolved for r in analysis.references
                             if r.resolved and r.type != ReferenceType.TEMPORAL)
    asks_when = analysis.query_type == QueryType.TEMPORAL or _WHEN.search(analysis.text) is not None
    tr = analysis.time_range
    fused_of = [c.fused for c in candidates]
    best_fused = max(fused_of) or 1.0
    best_cos = max(c.cosine for c in candidates)
    lists = dict.fromkeys(k for c in candidates for k in c.scores)
    n_lists = max(len(lists), 1)
    # the list names of each kind, found once (in the order met): a candidate looks up the few it may have
    bm25_lists = [k for k in lists if "bm25" in k]
    vector_lists = [k for k in lists if "vector" in k]
    stamps = [None if c.memory.occurred_at is None else c.memory.occurred_at.timestamp() for c in candidates]
    dates = [t for t in stamps if t is not None]
    lo, hi = (min(dates), max(dates)) if dates else (0.0, 0.0)
    sessions: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        if c.memory.session_id:
            sessions.setdefault(c.memory.session_id, []).append(i)
    speakers = [speaker_of(c.memory) for c in candidates]
    names = _named_speakers(speakers, text_fold)
    asked = asked_type(analysis.text)
    # the columns, in FEATURES' order
    (fused, fused_rr, bm25, vector, cosine, cosine_gap, n_lists_, keyword_overlap, entity_overlap, speaker_named,
     other_named, reference_overlap, in_range, out_of_range, asks_when_dated, recency, session_best, session_share,
     session_sum, length, is_question, speaker_bm25, speaker_cosine, type_match, type_miss) = range(len(FEATURES))
    rows = []  # Python lists, made an array once: a numpy element write per feature cost ~10x a list's
    no_peers: list[int] = []
    for i, c in enumerate(candidates):
        m = c.memory
        full_text = m.full_text
        scores = c.scores
        row = [0.0] * len(FEATURES)
        rows.append(row)
        row[fused] = c.fused / best_fused
        row[fused_rr] = 1.0 / (1.0 + c.rank)
        row[bm25] = max([scores[k] for k in bm25_lists if k in scores], default=0.0)
        row[vector] = max([scores[k] for k in vector_lists if k in scores], default=0.0)
        row[cosine] = c.cosine
        row[cosine_gap] = c.cosine - best_cos
        row[n_lists_] = len(scores) / n_lists
        if keywords or entities or ref_tokens:
            body = full_text.casefold()
            if keywords:
                row[keyword_overlap] = len([k for k in keywords if k in body]) / len(keywords)
            if entities:
                row[entity_overlap] = len([e for e in entities if e in body]) / len(entities)
            if ref_tokens:
                row[reference_overlap] = len([k for k in ref_tokens if k in body]) / len(ref_tokens)
        speaker = speakers[i]
        if names:
            named = speaker is not None and speaker.casefold() in names
            row[speaker_named] = float(named)
            row[other_named] = float(not named)
        if tr is not None and m.occurred_at is not None:
            if tr.start <= m.occurred_at < tr.end:
                row[in_range] = 1.0
            else:
                gap = min(abs((m.occurred_at - tr.start).days), abs((m.occurred_at - tr.end).days))
                row[out_of_range] = min(gap / 30.0, 1.0)
        if asks_when and _dated(full_text):
            row[asks_when_dated] = 1.0
        stamp = stamps[i]
        if stamp is not None and hi > lo:
            row[recency] = (stamp - lo) / (hi - lo)
        peers = sessions.get(m.session_id, no_peers) if m.session_id else no_peers
        if len(peers) > 1:
            others = [fused_of[j] for j in peers if j != i]
            row[session_best] = max(others) / best_fused
            row[session_sum] = sum(others) / best_fused / 4.0
        row[session_share] = len(peers) / n
        row[length] = math.log1p(len(full_text)) / 8.0
        row[is_question] = float(m.text.rstrip().endswith(("?", "？")))
        row[speaker_bm25] = row[speaker_named] * row[bm25]
        row[speaker_cosine] = row[speaker_named] * row[cosine]
        if asked is not None:
            row[type_match if holds(asked, full_text) else type_miss] = 1.0
    return np.array(rows, dtype=np.float64)


@lru_cache(maxsize=row_cache.ROWS)  # as many texts as the store's row cache keeps rows
def _dated(text: str) -> bool:
    """Whether a memory's text names a time (:data:`_DATED`), kept by text: a question asking when reads it for each
    of its ~50 candidates, and at 10k memories the same ones come back request after request (the regular
    expression's search was ~0.8 % of a recall's CPU, 2026-11-27, branch cost3)."""
    return _DATED.search(text) is not None


def match_forms(phrases: Iterable[str | None]) -> set[str]:
    """What to look for in a memory's case-folded text: each phrase's content tokens (stems included:
    "support" finds "supportive"). Substring tests on ~40 short texts cost microseconds, where
    tokenising every candidate cost ~1 ms each."""
    return {t.casefold() for p in phrases if p for t in tokenize(p) if len(t) > 1 or not t.isascii()}


def _named_speakers(speakers: Iterable[str | None], text_fold: str) -> set[str]:
    """The candidates' speakers whose name the query writes (as a whole word for Latin names)."""
    out = set()
    for speaker in speakers:
        if speaker is None:
            continue
        s = speaker.casefold()
        if s in out:
            continue
        if s.isascii():
            if re.search(rf"\b{re.escape(s)}\b", text_fold):
                out.add(s)
        elif s in text_fold:
            out.add(s)
    return out
