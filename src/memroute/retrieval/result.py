"""What :func:`memroute.retrieval.recall` returns: the chosen memories, the decision, the trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memroute.retrieval.decide import Relevance, should_inject
from memroute.retrieval.pack import PackEntry, render
from memroute.retrieval.rerank import speaker_of
from memroute.retrieval.trace import RecallTrace
from memroute.types import Language, MemoryItem


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    memory: MemoryItem
    score: float
    """The reranker's probability of relevance (or the fused score when reranking is off); higher better."""
    relevance: Relevance
    reason: str
    scores: dict[str, float]
    """``fused``, ``rerank`` (when on), ``cosine`` and the min-max score of each search list that found it."""
    superseded_by: str | None = None
    """The id of a newer memory of this answer that replaces this one (a fact that changed); the older one
    stays in the answer, marked, and is never deleted."""

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        return {"id": m.id, "text": m.text, "reply": m.reply, "session_id": m.session_id,
                "occurred_at": m.occurred_at.isoformat() if m.occurred_at else None, "kind": str(m.kind),
                "score": round(self.score, 4), "relevance": self.relevance, "reason": self.reason,
                "scores": {k: round(v, 4) for k, v in self.scores.items()}, "superseded_by": self.superseded_by}


@dataclass(frozen=True, slots=True)
class Recall:
    """The memories that matter for this turn, best first, with what to do with them and why."""

    text: str
    memories: tuple[RecalledMemory, ...]
    language: Language
    """The conversation's language, used by :meth:`memory_pack`."""
    trace: RecallTrace
    pack_chars: int = 2000
    injection_strategy: str | None = None
    """Seed 001's advice from the LLM rerank (quote_key_parts, summarize or full); None without it."""

    @property
    def should_inject(self) -> bool:
        """Seed 001: inject when one memory is high, or two are medium."""
        return should_inject([m.relevance for m in self.memories])

    @property
    def relevant(self) -> tuple[RecalledMemory, ...]:
        return tuple(m for m in self.memories if m.relevance != "none")

    def memory_pack(self, max_chars: int | None = None, max_tokens: int | None = None) -> str:
        """Seed 001's ``[EPISODE_EVIDENCE]`` block of the high and medium memories, within the budget
        (``max_tokens`` if given, else ``max_chars``, else the recall's ``pack_chars``); empty when
        :attr:`should_inject` is false."""
        if not self.should_inject:
            return ""
        entries = [PackEntry(m.memory.occurred_at, m.memory.text, m.memory.reply, _speaker(m.memory), m.reason,
                             m.superseded_by is not None) for m in self.relevant]
        return render(entries, self.language, max_chars if max_chars is not None else self.pack_chars,
                      max_tokens)

    def to_dict(self, trace: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "language": self.language, "should_inject": self.should_inject,
                               "injection_strategy": self.injection_strategy,
                               "memories": [m.to_dict() for m in self.memories]}
        if trace:
            out["trace"] = self.trace.to_dict()
        return out


def _speaker(memory: MemoryItem) -> str | None:
    """The speaker to print before the text, unless the text already starts with it ("Alice: ...")."""
    speaker = speaker_of(memory)
    if speaker and memory.text.startswith((f"{speaker}:", f"{speaker}：")):
        return None
    return speaker
