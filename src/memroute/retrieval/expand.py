"""Phase 1 of seed 001 on the rule path: the queries one message turns into.

- The **original** query is the message itself; when it leans on the conversation (a reference or a
  follow-up), the resolved references are appended to it, and its vector query is seed 001's
  ``"{context}\\n---\\n{text}"`` with the last turns as context.
- Each **resolved reference** ("it" -> "Project X") is a query of its own.
- The conversation's **topic** (the last user turn) is a query when the message needs context.
- A **compound** question 「進捗と締切教えて」 adds each part.
Extra queries weigh half the original in fusion: they widen the net without outvoting the message.
At most ``max_expanded_queries`` extra queries (seed 001: 5), duplicates dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memroute.analysis import QueryAnalysis, ReferenceType
from memroute.types import Message

EXTRA_WEIGHT = 0.5
CONTEXT_CHARS = 600
"""Characters of recent conversation put in front of the vector query (the encoders read ~128 tokens)."""


@dataclass(frozen=True, slots=True)
class ExpandedQuery:
    text: str
    """What BM25 reads."""
    source: str
    """original, reference, topic or part."""
    weight: float = 1.0
    vector_text: str | None = None
    """What the vector search embeds, when it differs from ``text`` (context in front)."""
    reference_type: str | None = None
    surface: str | None = None

    @property
    def embed_text(self) -> str:
        return self.vector_text or self.text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "source": self.source, "weight": self.weight}
        if self.vector_text:
            out["vector_text"] = self.vector_text
        if self.reference_type:
            out["reference_type"], out["surface"] = self.reference_type, self.surface
        return out


def expand(analysis: QueryAnalysis, recent: Sequence[Message], max_extra: int = 5,
           enabled: bool = True) -> list[ExpandedQuery]:
    """The original query first, then up to ``max_extra`` extra queries (none when ``enabled`` is off)."""
    text = analysis.text.strip()
    resolved = [r for r in analysis.references
                if r.resolved and r.type != ReferenceType.TEMPORAL and r.resolved.strip()]
    lean = analysis.needs_context and bool(recent)
    original_text = text
    if enabled and resolved:
        original_text = " ".join([text, *dict.fromkeys(r.resolved or "" for r in resolved)])
    vector_text = None
    if enabled and lean:
        context = "\n".join(f"{m.role}: {m.text}" for m in recent)[-CONTEXT_CHARS:]
        vector_text = f"{context}\n---\n{original_text}"
    out = [ExpandedQuery(original_text, "original", 1.0, vector_text)]
    if not enabled or max_extra <= 0:
        return out
    seen = {text.casefold(), original_text.casefold()}
    extra: list[ExpandedQuery] = []

    def add(query: ExpandedQuery) -> None:
        key = query.text.strip().casefold()
        if key and key not in seen:
            seen.add(key)
            extra.append(query)

    for ref in resolved:
        add(ExpandedQuery(ref.resolved or "", "reference", EXTRA_WEIGHT, None, ref.type.value, ref.surface))
    if lean:
        topic = next((m.text.strip() for m in reversed(recent) if m.role in ("user", "human") and m.text.strip()),
                     None)
        if topic:
            add(ExpandedQuery(topic[:CONTEXT_CHARS], "topic", EXTRA_WEIGHT))
    if len(analysis.parts) > 1:
        for part in analysis.parts:
            add(ExpandedQuery(part, "part", EXTRA_WEIGHT))
    return out + extra[:max_extra]
