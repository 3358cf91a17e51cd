"""``analyze()``: one message understood in its conversation, by rules, in well under a millisecond.

Deterministic: the same text, history and ``now`` always give the same analysis. The text is read in
its NFKC form (full-width letters folded), with control characters turned into spaces; a message
longer than :data:`MAX_CHARS` is analysed on its first :data:`MAX_CHARS` characters (the language on
the first 20,000), so a pasted log costs no more than a long message.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memroute.analysis import compound, continuation, query_type, references, resolve, timerange
from memroute.analysis.continuation import Continuation, ContinuationKind
from memroute.analysis.entities import find_entities
from memroute.analysis.history import coerce_history
from memroute.analysis.intent import Intent, QuestionCategory, classify_intent, question_category
from memroute.analysis.keywords import extract_keywords
from memroute.analysis.query_type import QueryType
from memroute.analysis.references import Reference, ReferenceType
from memroute.analysis.timerange import TimeRange
from memroute.errors import InputError
from memroute.text import Span, detect_language, language_spans
from memroute.text.tokenizers import analyze_nfkc
from memroute.types import Language, Message, utcnow

MAX_CHARS = 10_000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")
_LANGS = frozenset({"en", "ja", "ko"})
_ASCII_LETTER = re.compile(r"[A-Za-z]")


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    """What a message says and how it sits in its conversation. ``to_dict()`` is the CLI's JSON shape."""

    text: str
    language: Language
    spans: list[Span]
    references: list[Reference]
    continuation: Continuation
    needs_context: bool
    query_type: QueryType
    importance: float
    time_range: TimeRange | None
    keywords: list[str]
    named_entities: list[str]
    parts: list[str]

    # Intent and question category matter to guided code investigation only: computed when asked for,
    # not on every turn of every conversation.
    @property
    def intent(self) -> Intent:
        return classify_intent(self.text, self._languages)

    @property
    def question_category(self) -> QuestionCategory | None:
        return question_category(self.text, self._languages)

    @property
    def _languages(self) -> frozenset[str]:
        return frozenset(s.language for s in self.spans) & _LANGS

    def to_dict(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "references": [r.to_dict() for r in self.references],
            "continuation": self.continuation.kind.value,
            "continuation_cue": self.continuation.cue,
            "needs_context": self.needs_context,
            "query_type": self.query_type.value,
            "time_range": None if self.time_range is None else self.time_range.to_dict(),
            "keywords": list(self.keywords),
            "named_entities": list(self.named_entities),
            "parts": list(self.parts),
            "importance": self.importance,
            "intent": self.intent.value,
            "question_category": None if self.question_category is None else self.question_category.value,
            "spans": [{"start": s.start, "end": s.end, "language": s.language} for s in self.spans],
        }


def analyze(text: str, recent_messages: Iterable[Message | Mapping[str, Any]] | None = (),
            now: datetime | str | None = None) -> QueryAnalysis:
    """Analyse ``text`` given the turns before it (oldest first) and the reference time ``now``.

    ``recent_messages`` holds :class:`~memroute.types.Message` values or ``{"role", "text"}`` dicts; a
    malformed one is an :class:`~memroute.errors.InputError`. ``now`` defaults to the current time; a
    naive datetime is taken as UTC; ranges are computed in ``now``'s time zone.
    """
    if not isinstance(text, str):
        raise InputError(f"text must be a string, not {type(text).__name__}")
    ref_time = _reference_time(now)
    turns = coerce_history(recent_messages)
    clean = _clean(text)
    if clean.isascii():  # most English: no need for the per-character script scan
        has_letters = _ASCII_LETTER.search(clean) is not None
        language: Language = "en" if has_letters else "und"
        spans = [Span(0, len(clean), language)] if clean else []
    else:
        language = detect_language(clean if len(text) <= MAX_CHARS else unicodedata.normalize("NFKC", text[:20_000]))
        spans = language_spans(clean)
    languages = frozenset(s.language for s in spans) & _LANGS
    tokens = analyze_nfkc(clean)  # the spans above are language_spans(clean), so these are its tokens

    entities = find_entities(clean, tokens, cjk=bool(languages & {"ja", "ko"}))
    blocked = [(e.start, e.end) for e in entities if e.kind in ("quote", "identifier")]
    times = [t for t in timerange.find_time_expressions(clean, ref_time, languages)
             if not any(s <= t.start < e for s, e in blocked)]
    time_spans = [(t.start, t.end) for t in times]
    entities = [e for e in entities if not any(s < e.end and e.start < t_end for s, t_end in time_spans)]

    found = references.detect(clean, tokens, languages, blocked)
    found = [f for f in found if f.type == ReferenceType.ELLIPSIS or not any(s <= f.start < e for s, e in time_spans)]
    temporal = [Reference(ReferenceType.TEMPORAL, t.surface, f"{t.range_start.isoformat()}/{t.range_end.isoformat()}",
                          t.start, t.end) for t in times if t.vague]
    cont = continuation.decide(clean, languages, found, blocked)
    found = continuation.without_switch_cue(found, cont)
    needs_context = cont.kind == ContinuationKind.FOLLOW_UP or bool(found)
    refs = resolve.resolve(found, resolve.Context(turns), temporal)

    time_range = timerange.combine(times)
    qtype = query_type.classify(clean, languages, time_range is not None)
    parts = compound.split_parts(clean, tokens, languages, qtype == QueryType.COMPARATIVE)
    is_ask = (bool(parts) and parts != [clean.strip()]) or clean.rstrip().endswith(("?", "？"))
    return QueryAnalysis(
        text=clean,
        language=language,
        spans=spans,
        references=refs,
        continuation=cont,
        needs_context=needs_context,
        query_type=qtype,
        importance=query_type.importance(clean, len(entities), time_range is not None, is_ask),
        time_range=time_range,
        keywords=extract_keywords(tokens, entities, time_spans),
        named_entities=[e.surface for e in entities],
        parts=parts,
    )


def _reference_time(now: datetime | str | None) -> datetime:
    if now is None:
        return utcnow()
    if isinstance(now, str):
        # keep the caller's offset: "last week" starts on Monday in the user's own time zone
        try:
            now = datetime.fromisoformat(now.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"now is not an ISO 8601 time: {now!r} (example: 2025-03-12T15:00:00+09:00)") from None
    if not isinstance(now, datetime):
        raise InputError(f"now must be a datetime or an ISO 8601 string, not {type(now).__name__}")
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _clean(text: str) -> str:
    text = unicodedata.normalize("NFKC", text[:MAX_CHARS])
    if len(text) > MAX_CHARS:  # NFKC can lengthen text (ligatures, ㍻)
        text = text[:MAX_CHARS]
    return _CONTROL.sub(" ", text)
