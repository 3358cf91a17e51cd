"""Resolving references against recent turns: the task an ellipsis continues, the thing a pronoun names.

Kept simple on purpose and cheap: history is only read when the message has a reference.

* The *task* is the last user turn that is itself self-contained (not a follow-up such as "Now to
  French"), so "and to German?" after "Now to French" after "Translate 'Hello' to Japanese" still
  resolves to the translation request.
* The *salient entity* is the first named thing (quoted text, identifier, name, 「プロジェクトX」) of the
  most recent turn that has one; when no turn has one, the first noun phrase of the last user turn.
* A demonstrative with a noun ("that file", 「その資料」, "그 파일") prefers an entity or phrase that
  mentions the noun.
* A vague temporal reference ("the other day") resolves to its range, as ``start/end`` in ISO 8601.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property, lru_cache

from memroute.analysis.entities import find_entities
from memroute.analysis.history import Turn
from memroute.analysis.references import Found, Reference, ReferenceType
from memroute.text import analyze_tokens

MAX_RESOLVED_CHARS = 120
_FOLLOW_UP_START = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|great|thanks|cool|perfect|nice|alright)[,.!]*\s+)?(?:what\s+about|how\s+about|and\b|now\s+"
    r"|same\s+|also\b|then\b|or\b|instead\b|again\b|more\b|shorter|longer)"
    r"|^\W*(?:じゃあ|じゃ|では|なら|だったら|それなら|それで|あと|他に|ほかに|次は|今度は|もう一回|もっと)"
    r"|^\W*(?:그럼|그러면|그리고|또|다시|이번엔|다음은|나머지는|더\s)", re.IGNORECASE)
_EN_NP = re.compile(r"\b(?:the|my|our|your|a|an|this|that)\s+((?:[A-Za-z][\w-]*\s+){0,2}[A-Za-z][\w-]*)", re.I)
_EN_NP_STOP = re.compile(r"\s+(?:to|in|into|for|with|on|at|from|about|by|and|or|is|are|was|were|of)\b.*$", re.I)


@lru_cache(maxsize=4096)
def _entities_of(text: str) -> tuple[str, ...]:
    """Named things of a history turn. Cached: a conversation's turns are analysed again on every new turn."""
    return tuple(e.surface for e in find_entities(text, (), cjk=not text.isascii()))


class Context:
    """The parts of the recent turns that references resolve to, computed on first use."""

    def __init__(self, turns: tuple[Turn, ...]) -> None:
        self.turns = turns
        self._entities: dict[int, list[str]] = {}

    @cached_property
    def task(self) -> str | None:
        users = [t for t in self.turns if t.is_user and t.text.strip()]
        if not users:
            return None
        for turn in reversed(users):
            if not _FOLLOW_UP_START.match(turn.text):
                return _clip(turn.text)
        return _clip(users[0].text)

    def turn_entities(self, index: int) -> list[str]:
        """Named things of one turn (computed once: most references need only the last turn or two)."""
        if index not in self._entities:
            self._entities[index] = list(_entities_of(self.turns[index].text))
        return self._entities[index]

    def recent_entities(self) -> Iterator[str]:
        """Named things of the recent turns, most recent turn first."""
        for index in range(len(self.turns) - 1, -1, -1):
            yield from self.turn_entities(index)

    @cached_property
    def salient(self) -> str | None:
        first = next(self.recent_entities(), None)
        if first is not None:
            return _clip(first)
        users = [t for t in self.turns if t.is_user] or list(self.turns)
        return _noun_phrase(users[-1].text) if users else None

    def mentioning(self, noun: str) -> str | None:
        """The most recent entity or phrase that mentions ``noun`` (for "that file", 「その資料」)."""
        key = noun.lower().rstrip("s")
        if not key:
            return None
        for e in self.recent_entities():
            if key in e.lower():
                return _clip(e)
        for index in range(len(self.turns) - 1, -1, -1):
            turn = self.turns[index]
            low = turn.text.lower()
            i = low.find(key)
            if i < 0:
                continue
            named = self.turn_entities(index)
            if named:
                return _clip(named[0])
            if turn.text[i:i + 1].isascii():
                before = re.findall(r"[A-Za-z][\w.-]*", turn.text[max(0, i - 30):i])[-2:]
                words = [w for w in before if w.lower() not in ("the", "a", "an", "my", "our", "your", "this",
                                                               "that", "to", "of", "in", "for", "with")]
                word_end = re.match(r"[\w.-]*", turn.text[i:])
                tail = word_end.group(0) if word_end else noun
                return _clip(" ".join([*words, tail]))
            return _clip(_cjk_compound(turn.text, i, len(noun)))
        return None


def resolve(found: list[Found], context: Context, temporal: list[Reference]) -> list[Reference]:
    out: list[Reference] = []
    for f in found:
        resolved: str | None
        if not context.turns:
            resolved = None
        elif f.type == ReferenceType.ELLIPSIS:
            resolved = context.task
        elif f.type == ReferenceType.TOPIC:
            resolved = (context.mentioning(f.noun) if f.noun and f.noun.isascii() else None) or context.salient \
                or context.task
        else:
            resolved = (context.mentioning(f.noun) if f.noun else None) or context.salient
        out.append(Reference(f.type, f.surface, resolved, f.start, f.end))
    out.extend(temporal)
    out.sort(key=lambda r: r.start)
    return out


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_RESOLVED_CHARS else text[: MAX_RESOLVED_CHARS - 1] + "…"


@lru_cache(maxsize=4096)
def _noun_phrase(text: str) -> str | None:
    """The first noun phrase of a turn without named things: "the quarterly report", 「新しいロゴ」.

    Cached: a conversation's turns are read again on every later turn."""
    sample = text[:400]
    if sample.isascii():
        m = _EN_NP.search(sample)
        return _clip(_EN_NP_STOP.sub("", m.group(1))) if m else None
    tokens = analyze_tokens(sample)
    best: list[str] = []
    current: list[str] = []
    last_end = -1
    for t in tokens:
        if t.pos in ("noun", "propn") and t.is_content and (not current or t.start == last_end or t.language == "ko"):
            current.append(t.surface)
            last_end = t.end
            continue
        if current and not best:
            best = current
        current = []
    if current and not best:
        best = current
    if not best:
        return None
    joiner = " " if tokens and tokens[0].language == "ko" else ""
    return _clip(joiner.join(best))


def _cjk_compound(text: str, i: int, n: int) -> str:
    start, end = i, i + n
    while start > 0 and _is_word_char(text[start - 1]) and i - start < 8:
        start -= 1
    return text[start:end]


def _is_word_char(c: str) -> bool:
    return "\u30a0" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" or (c.isascii() and c.isalnum())
