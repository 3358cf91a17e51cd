"""A request's frame and the text it carries (its payload).

"Tell my daughter we eat at 7" is a request to a messaging agent; "we eat at 7" is what it carries, and its
words ("eat", "7") belong to other agents' domains. The same holds for a text to translate or summarise and
for code to review. :func:`find_payload` returns the message with its payload removed (the frame: the
addressee and the verb of communication, or "translate to English") and the payload's spans.

Sources of payload, each read from the form or the morphology, never from a list of domain words:

* quoted or bracketed text (``"..."``, ``“...”``, ``'...'``, ``\\`...\\```, 「...」, 『...』), any language;
* the text after a colon that introduces material ("summarise this: ...", 「翻訳して：...」), not a colon
  between digits (7:30);
* Korean reported speech: a clause closed by a quotative connective ending (-다고, -자고, -냐고, -라고,
  -달라고 ...) or an embedded question's ending (-는지, -(으)ㄴ지, -(으)ㄹ지), alone or fused with its stem
  by the tokenizer ("온다고" -> 오), directly followed by a predicate ("딸한테 7시에 저녁 먹자고 보내 줘");
* Japanese reported speech: a clause closed by the quotative と / って after a predicate (a verb, an
  auxiliary, an adjective, or a sentence-final particle after one), or an embedded question closed by か,
  directly followed by a verb (「母に荷物受け取ったよって送って」, 「何時からか聞いて」); って after a noun or an
  adverb (「ご飯って伝えて」) only when an addressee is named before it, since a bare 「新幹線って何時？」 is the
  topic marker. と after a noun is "with" (「田中さんと会う」) and never makes a payload.

A reported clause starts after the addressee phrase (a noun marked with に / へ or 한테 / 에게 / 께, possibly
followed by は / も / 는 / 도) or, without one, at the start of the sentence (after the last clause mark).
A payload must hold a content word, and the frame must keep one: a message that is all payload
(「おはよう」) has no frame to read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memroute.analysis.entities import _QUOTE
from memroute.text import Token
from memroute.text.language import detect_language
from memroute.text.tokenizers import analyze_tokens

_COLON = re.compile(r"(?<!\d)[:：]|[:：](?!\d)")
# Korean quotative connective endings and embedded-question endings, a closed class of the grammar (as the
# tokenizer gives their surface: "받았다고" -> 받 + 았 + 다고, "뭐라고" -> 뭐 + 라고, "있는지" -> 있 + 는지).
_KO_QUOTATIVE = ("다고", "자고", "냐고", "라고", "니고")
_KO_EMBEDDED = ("는지", "은지", "ㄴ지", "을지", "ㄹ지", "인지", "던지")
_KO_DATIVE = frozenset({"한테", "에게", "께", "더러", "한테다"})
_JA_DATIVE = frozenset({"に", "へ"})
_JA_QUOTATIVE = frozenset({"と", "って"})
_JA_SENTENCE_FINAL = frozenset({"よ", "ね", "な", "わ", "ぞ", "さ", "の", "か"})
_PREDICATES = frozenset({"verb", "aux", "adj"})
_NOMINALS = frozenset({"noun", "propn", "pron", "suffix", "foreign"})
_CLAUSE_MARKS = frozenset("、,，。.!！?？\n")


@dataclass(frozen=True, slots=True)
class Payload:
    """A message read as a frame carrying a payload."""

    frame: str
    """The message with every payload span removed (spaces collapsed)."""
    spans: tuple[tuple[int, int], ...]
    """Character spans of the payload in the message, in order, not overlapping."""
    kinds: tuple[str, ...]
    """What marked each span: ``quote``, ``colon``, ``reported`` (reported speech or an embedded question)."""

    def texts(self, message: str) -> tuple[str, ...]:
        return tuple(message[a:b] for a, b in self.spans)


def find_payload(text: str) -> Payload | None:
    """The frame and payload of ``text`` (``None`` when it carries none; see the module docstring)."""
    return _find(text) if text and text.strip() else None


@lru_cache(maxsize=1024)
def _find(text: str) -> Payload | None:
    found: list[tuple[int, int, str]] = []
    for m in _QUOTE.finditer(text):
        found.append((m.start(), m.end(), "quote"))
    colon = _COLON.search(text)
    if colon is not None and any(ch.isalnum() for ch in text[:colon.start()]):
        found.append((colon.start(), len(text), "colon"))
    language = detect_language(text)
    if language in ("ja", "ko"):
        tokens = [t for t in analyze_tokens(text) if t.pos != "space"]
        reported = _ko_reported(text, tokens) if language == "ko" else _ja_reported(text, tokens)
        found.extend((a, b, "reported") for a, b in reported)
    spans = _merged(found, text)
    if not spans:
        return None
    frame = text
    for a, b, _ in reversed(spans):
        frame = frame[:a] + " " + frame[b:]
    frame = re.sub(r"\s+", " ", frame).strip()
    if not any(ch.isalnum() for ch in frame):
        return None
    return Payload(frame, tuple((a, b) for a, b, _ in spans), tuple(k for _, _, k in spans))


def _merged(found: list[tuple[int, int, str]], text: str) -> list[tuple[int, int, str]]:
    """Overlapping spans joined (the first's kind kept); spans without a letter or digit inside dropped."""
    out: list[tuple[int, int, str]] = []
    for a, b, kind in sorted(found):
        if not any(ch.isalnum() for ch in text[a:b]):
            continue
        if out and a < out[-1][1]:
            pa, pb, pk = out[-1]
            out[-1] = (pa, max(pb, b), pk)
        else:
            out.append((a, b, kind))
    return out


def _clause_start(text: str, tokens: list[Token], end: int, dative: frozenset[str], language: str) -> int | None:
    """Where a reported clause ending at token ``end`` starts: after the first addressee phrase before it,
    else after the last clause mark (or at 0). ``None`` when the clause would be empty."""
    start_tok = 0
    for i in range(end):
        if tokens[i].pos == "symbol" and tokens[i].surface in _CLAUSE_MARKS:
            start_tok = i + 1
    for i in range(start_tok, end):
        if _is_addressee(tokens, i, dative, language):
            j = i + 1
            while j < end and tokens[j].pos == "particle":
                j += 1  # 「母には」, "엄마한테도"
            start_tok = j
            break
    if start_tok >= end:
        return None
    return tokens[start_tok].start


def _is_addressee(tokens: list[Token], i: int, dative: frozenset[str], language: str) -> bool:
    """Token ``i`` is a dative particle after a nominal that is not a number with its counter (「7時に」)."""
    tok = tokens[i]
    if tok.pos != "particle" or tok.surface not in dative or i == 0 or tok.language != language:
        return False
    prev = tokens[i - 1]
    if prev.pos not in _NOMINALS:
        return False
    return not (i >= 2 and tokens[i - 2].pos == "num")


def _has_content(tokens: list[Token], a: int, b: int) -> bool:
    return any(t.is_content and a <= t.start < b for t in tokens)


def _ko_reported(text: str, tokens: list[Token]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, tok in enumerate(tokens[:-1]):
        if not tok.surface.endswith(_KO_QUOTATIVE + _KO_EMBEDDED) or not (
                tok.pos in ("ending", "aux") or (tok.pos in ("verb", "adj") and tok.surface != tok.norm)):
            continue  # the ending alone, or fused with its stem ("온다고" -> 오, "갈지" -> 가)
        if tokens[i + 1].pos not in ("verb", "aux"):
            continue  # "뭐라고?": no predicate takes the clause
        start = _clause_start(text, tokens, i, _KO_DATIVE, "ko")
        if start is not None and _has_content(tokens, start, tok.end):
            out.append((start, tok.end))
    return out


def _ja_reported(text: str, tokens: list[Token]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, tok in enumerate(tokens[:-1]):
        if tok.pos != "particle" or i == 0 or tokens[i + 1].pos != "verb":
            continue
        j = i - 1
        while j > 0 and tokens[j].pos == "particle" and tokens[j].surface in _JA_SENTENCE_FINAL - {"か"}:
            j -= 1  # 「受け取ったよって」
        prev = tokens[j]
        if tok.surface in _JA_QUOTATIVE:
            after_predicate = prev.pos in _PREDICATES
            if not after_predicate and not (tok.surface == "って" and _addressed(tokens, i)):
                continue  # 「田中さんと会う」 ("with"), 「新幹線って」 (topic)
        elif tok.surface == "か":
            if tokens[i - 1].pos == "pron":
                continue  # 「誰か」「何か」: an indefinite pronoun, not a question
        else:
            continue
        start = _clause_start(text, tokens, i, _JA_DATIVE, "ja")
        if start is not None and _has_content(tokens, start, tok.start):
            out.append((start, tok.end))
    return out


def _addressed(tokens: list[Token], end: int) -> bool:
    return any(_is_addressee(tokens, i, _JA_DATIVE, "ja") for i in range(end))
