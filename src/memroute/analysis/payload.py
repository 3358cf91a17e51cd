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
  adverb (「ご飯って伝えて」) only when an addressee is named before it and the verb goes on in its te-form,
  since 「新幹線って何時？」 and 「朝ご飯ってある？」 are the topic marker. と after a noun is "with"
  (「田中さんと会う」) and never makes a payload, nor does とか (a list).

An embedded question counts only when it is asked of someone named in its clause (「田中くんに何時からか聞いて」,
not 「駐車場があるか教えて」, the user's own question). Reported speech counts only when the predicate that
takes it is a request (a request auxiliary, a Japanese te-form or a bare Korean verb closing the clause:
「送っといて」「聞いて」, "보내 줘", "물어봐"): the user asks for the clause to be passed on. A clause the user
reports or thinks (「行こうと思っています」, "비 온다고 했어?") or a conditional と (「教えていただけると助かります」)
is the message's own topic, not a payload.

A reported clause starts after the addressee phrase (a noun marked with に / へ or 한테 / 에게 / 께, possibly
followed by は / も / 는 / 도; not a time with its number, 「7時に」, nor a phrase a verb takes right after it,
「一緒に行く」) or, without one, at the start of the sentence (after the last clause mark).
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

# An introducing colon: an ASCII one before a space or the end ("Review this: ..."; not 7:30, CS:GO or a URL),
# a full-width one anywhere but between digits (「訳して：明日は…」).
_COLON = re.compile(r":(?=\s|$)|(?<!\d)：|：(?!\d)")
# Korean quotative connective endings and embedded-question endings, a closed class of the grammar (as the
# tokenizer gives their surface: "받았다고" -> 받 + 았 + 다고, "뭐라고" -> 뭐 + 라고, "있는지" -> 있 + 는지).
_KO_QUOTATIVE = ("다고", "자고", "냐고", "라고", "니고")
_KO_EMBEDDED = ("는지", "은지", "ㄴ지", "을지", "ㄹ지", "인지", "던지")
_KO_DATIVE = frozenset({"한테", "에게", "께", "더러", "한테다"})
_JA_DATIVE = frozenset({"に", "へ"})
_JA_QUOTATIVE = frozenset({"と", "って"})
JA_SENTENCE_FINAL = frozenset({"よ", "ね", "な", "わ", "ぞ", "さ", "の", "か"})
_PREDICATES = frozenset({"verb", "aux", "adj"})
# The auxiliaries of a request by their lemmas (benefactive: くれる / 下さる / 頂く / 貰う / 주다 / 드리다; wanted
# of another: 欲しい; done ahead: とく / 置く / 놓다 / 두다): a closed class of the grammar.
REQUEST_AUX = {"ja": frozenset({"呉れる", "くれる", "下さる", "頂く", "貰う", "欲しい", "とく", "置く"}),
                "ko": frozenset({"주", "드리", "놓", "두"})}
_CHAIN = frozenset({"verb", "aux", "adj", "ending", "suffix"})
_NOMINALS = frozenset({"noun", "propn", "pron", "suffix", "foreign"})
CLAUSE_MARKS = frozenset("、,，。.!！?？\n")


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


def _clause_start(tokens: list[Token], end: int, dative: frozenset[str], language: str) -> tuple[int, int, bool] | None:
    """Where a reported clause ending at token ``end`` starts: after the first addressee phrase of its clause
    (after the last clause mark before it), else after that mark (or at 0), as a character offset and a token
    index; and whether an addressee was found. ``None`` when the clause would be empty. Reads back from ``end``
    to the clause mark only, so a long text costs in proportion to its length."""
    start_tok = 0
    for i in range(end - 1, -1, -1):
        if tokens[i].pos == "symbol" and tokens[i].surface in CLAUSE_MARKS:
            start_tok = i + 1
            break
    addressed = False
    for i in range(start_tok, end):
        if _is_addressee(tokens, i, dative, language):
            j = i + 1
            while j < end and tokens[j].pos == "particle":
                j += 1  # 「母には」, "엄마한테도"
            start_tok, addressed = j, True
            break
    if start_tok >= end:
        return None
    return tokens[start_tok].start, start_tok, addressed


def _is_addressee(tokens: list[Token], i: int, dative: frozenset[str], language: str) -> bool:
    """Token ``i`` is a dative particle after a nominal phrase without a number (「7時に」「5分後に」 are times)
    that no verb takes right after it (「一緒に行く」「大阪に着いた」, "친구한테 받은": the particle belongs to
    that verb, not to the verb of communication)."""
    tok = tokens[i]
    if tok.pos != "particle" or tok.surface not in dative or i == 0 or tok.language != language:
        return False
    j = i - 1
    while j >= 0 and tokens[j].pos in _NOMINALS | {"num", "noun_dep", "prefix"}:
        if tokens[j].pos == "num":
            return False
        j -= 1
    if j == i - 1:
        return False  # no nominal before the particle
    k = i + 1
    while k < len(tokens) and tokens[k].pos == "particle":
        k += 1
    return not (k < len(tokens) and tokens[k].pos in _PREDICATES)


def _has_content(tokens: list[Token], a: int, b: int) -> bool:
    """Whether tokens ``a`` to ``b`` (indices, ``b`` excluded) hold a content word."""
    return any(t.is_content for t in tokens[a:b])


def _ko_reported(text: str, tokens: list[Token]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, tok in enumerate(tokens[:-1]):
        if not tok.surface.endswith(_KO_QUOTATIVE + _KO_EMBEDDED) or not (
                tok.pos in ("ending", "aux") or (tok.pos in ("verb", "adj") and tok.surface != tok.norm)):
            continue  # the ending alone, or fused with its stem ("온다고" -> 오, "갈지" -> 가)
        if tokens[i + 1].pos not in ("verb", "aux") or not _requested(tokens, i + 1, "ko"):
            continue  # "뭐라고?": no predicate takes the clause; "비 온다고 했어?": not asked to pass on
        clause = _clause_start(tokens, i, _KO_DATIVE, "ko")
        if clause is None or (tok.surface.endswith(_KO_EMBEDDED) and not clause[2]):
            continue  # an embedded question asked of no one ("당길 수 있는지 봐 줘") is the user's own question
        if _has_content(tokens, clause[1], i + 1):
            out.append((clause[0], tok.end))
    return out


def _ja_reported(text: str, tokens: list[Token]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, tok in enumerate(tokens[:-1]):
        if tok.pos != "particle" or i == 0 or tokens[i + 1].pos != "verb" or not _requested(tokens, i + 1, "ja"):
            continue  # 「行こうと思っています」「教えていただけると助かります」: nothing is asked to be passed on
        j = i - 1
        while j > 0 and tokens[j].pos == "particle" and tokens[j].surface in JA_SENTENCE_FINAL - {"か"}:
            j -= 1  # 「受け取ったよって」
        prev = tokens[j]
        if tok.surface in _JA_QUOTATIVE:
            after_predicate = prev.pos in _PREDICATES
            noun_quoted = tok.surface == "って" and _addressed(tokens, i) and _te_form(tokens, i + 1)
            if not after_predicate and not noun_quoted:
                continue  # 「田中さんと会う」 ("with"), 「新幹線って」「朝ご飯ってある？」 (topic)
        elif tok.surface == "か":
            if tokens[i - 1].pos == "pron" or tokens[i - 1].surface == "と":
                continue  # 「誰か」「何か」: an indefinite pronoun; 「雨の音とか」: a list, not a question
        else:
            continue
        clause = _clause_start(tokens, i, _JA_DATIVE, "ja")
        if clause is None or (tok.surface == "か" and not clause[2]):
            continue  # 「駐車場があるか教えて」: an embedded question asked of no one is the user's own question
        if _has_content(tokens, clause[1], i):
            out.append((clause[0], tok.end))
    return out


def _requested(tokens: list[Token], verb: int, language: str) -> bool:
    """The predicate that starts at ``verb`` is a request: a request auxiliary in its chain, or the chain closes
    the clause on a Japanese te-form (「聞いて」) or a bare Korean verb (the casual imperative "물어봐", "보내")."""
    aux = REQUEST_AUX[language]
    j = verb
    while j < len(tokens) and (tokens[j].pos in _CHAIN or (
            language == "ja" and tokens[j].pos == "particle" and tokens[j].surface in ("て", "で"))):
        if j > verb and tokens[j].pos in _PREDICATES and tokens[j].norm in aux:
            return True
        j += 1
    last = j - 1
    while language == "ja" and last > verb and tokens[last].surface in JA_SENTENCE_FINAL - {"か", "の"}:
        last -= 1  # 「送ってね」
    if language == "ja":
        return tokens[last].pos == "particle" and tokens[last].surface in ("て", "で")
    return tokens[last].pos == "verb"


def _te_form(tokens: list[Token], verb: int) -> bool:
    """The verb at ``verb`` goes on in its te-form (「伝えて」「送っといて」): a request, which the topic
    marker's predicate (「朝ご飯ってある？」) is not."""
    k = verb + 1
    while k < len(tokens) and tokens[k].pos == "aux":
        k += 1
    return k < len(tokens) and tokens[k].surface in ("て", "で")


def _addressed(tokens: list[Token], end: int) -> bool:
    return any(_is_addressee(tokens, i, _JA_DATIVE, "ja") for i in range(end))
