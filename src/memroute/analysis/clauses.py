"""A Japanese or Korean request's main clause, without the clauses that set its circumstances.

In Korean and Japanese the predicate that makes the request comes last, and what comes before it in a
subordinate clause is a circumstance: a reason (-니까, -어서, から, ので), a time or something done meanwhile
(-면서, ながら), a purpose (-려고, -도록, ように, ために), a condition (-면, -거든, なら, たら, ば) or a background or
concession (-는데, -지만, けど, が after a predicate). "요리하면서 들을 재즈 틀어 줘" asks for music, whatever
요리 says; 「出かけるから全部消しといて」 asks to switch things off, not for a taxi. :func:`find_main_clause`
returns the message with its leading subordinate clauses removed (the frame the router also reads, beside the
whole message: a blend, since in "비 오면 알려 줘" the condition is what the request is about).

Read from the morphology, never from a list of domain words:

* a subordinate clause ends on a connective ending or particle of the classes above (a closed class of the
  grammar), right after a predicate (a verb, an adjective, an auxiliary or an ending; 「12時半から」 after a
  number is "from", not "because"), and a new phrase follows it (so "열지 말아" or 「探してくれる」, an
  ending inside one predicate chain, is no boundary);
* the request is the last sentence's last clause that holds a predicate, and it must close on a request (a
  request auxiliary: くれる / 下さる / 頂く / 貰う / 欲しい / とく / お願い, 주다 / 드리다 / 놓다 / 두다; a Japanese
  te-form; a Korean imperative or a bare verb): 「…のですが、駐車場はありますか」 is a question whose
  background carries its topic, and has no frame;
* of that sentence's clauses split by a comma, those before the request that hold a predicate are
  circumstances of their own and are dropped ("창문 열지 말아야겠네, 환풍기도 꺼"); those without a predicate
  (「明日の昼休み、」, a time or a topic) are arguments of the request and stay. Earlier sentences stay: in
  「このタクシーを予約します。…でお願いします」 the first sentence names the domain;
* adverbs that open the dropped clause ("내일", 「ちょっと」) stay: they may belong to the request;
* an adnominal clause is not cut: "요리하면서 들을 재즈" keeps "들을 재즈" (the jazz to listen to restricts the
  object, and its verb is the request's own domain), only the subordinate clause inside it goes;
* the main clause must hold a content word; a message that is only a subordinate clause ("비 오면?",
  「出かけるから」) has none, and no frame.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memroute.analysis.payload import CLAUSE_MARKS, JA_SENTENCE_FINAL, REQUEST_AUX
from memroute.text import Token
from memroute.text.language import detect_language
from memroute.text.tokenizers import analyze_tokens

# Korean connective endings that close a subordinate clause (mecab-ko's EC), by class: reason, time,
# purpose, condition, background / concession. "-고" (and) and "-어" (the chain to an auxiliary) are not here:
# a coordinate clause is part of the request ("식당 찾고 예약해 줘").
_KO_CONNECTIVE = frozenset({
    "니까", "으니까", "니", "으니", "어서", "아서", "여서", "서", "므로", "으므로", "길래", "기에", "느라", "느라고",
    "면서", "으면서", "며", "으며", "자마자", "다가",
    "려고", "으려고", "러", "으러", "도록", "게끔",
    "면", "으면", "거든", "으면은", "더라도", "어도", "아도", "여도", "라도",
    "는데", "은데", "ㄴ데", "인데", "던데", "지만",
})
_KO_PREDICATE = frozenset({"verb", "adj", "aux", "suffix", "ending"})
# Japanese connective particles (UniDic's 接続助詞) of the same classes, after a predicate; て / で (the chain to
# an auxiliary, or a request's own te-form) and と (quotative or conditional, :mod:`payload`'s) are not here.
_JA_CONNECTIVE = frozenset({"から", "ので", "ながら", "けど", "けれど", "けれども", "が", "のに", "ば", "し", "つつ"})
_JA_PREDICATE = frozenset({"verb", "adj", "aux"})
_SENTENCE_ENDS = frozenset("。.!！?？\n")
# The request's closing forms besides :mod:`payload`'s request auxiliaries: Korean imperative and
# propositive endings after a verb ("틀어", "켜세요", "가자", "해 줄래").
_KO_IMPERATIVE = frozenset({"어", "아", "여", "라", "으라", "자", "세요", "으세요", "십시오", "ㄹ래", "을래"})
_KEPT_OPENERS = frozenset({"adv", "conj"})


@dataclass(frozen=True, slots=True)
class MainClause:
    """A message read as circumstances and the request's main clause."""

    frame: str
    """The message without its leading subordinate clauses (spaces collapsed)."""
    dropped: tuple[tuple[int, int], ...]
    """Character spans of the message that were dropped, in order."""


def find_main_clause(text: str) -> MainClause | None:
    """The main clause of a Japanese or Korean ``text``, ``None`` when nothing precedes it (see the module
    docstring) or the message is in another language."""
    return _find(text) if text and text.strip() else None


@lru_cache(maxsize=1024)
def _find(text: str) -> MainClause | None:
    language = detect_language(text)
    if language not in ("ja", "ko"):
        return None
    tokens = [t for t in analyze_tokens(text) if t.pos != "space"]
    pieces = _pieces(tokens, _last_sentence(tokens))
    with_predicate = [p for p in pieces if any(t.pos in ("verb", "adj") for t in tokens[p[0]:p[1]])]
    if not with_predicate:
        return None
    main_a, main_b = with_predicate[-1]
    if not _closes_on_request(tokens, main_a, main_b, language):
        return None
    dropped: list[tuple[int, int]] = []
    for a, b in pieces:
        if a >= main_a:
            break
        if (a, b) in with_predicate:
            end = tokens[b].end if b < len(tokens) else tokens[b - 1].end  # the piece and its mark
            dropped.append((tokens[a].start, end))
    cut = _last_boundary(tokens, main_a, main_b, language)
    if cut is not None:
        start = main_a
        while start < cut and tokens[start].pos in _KEPT_OPENERS:
            start += 1  # "내일 비 오면 …": 내일 may be the request's
        if start <= cut:
            dropped.append((tokens[start].start, tokens[cut].end))
        if not any(t.is_content for t in tokens[cut + 1:main_b]):
            return None  # only a subordinate clause ("비 오면?")
    if not dropped:
        return None
    frame = text
    for a, b in reversed(dropped):
        frame = frame[:a] + " " + frame[b:]
    frame = re.sub(r"\s+", " ", frame).strip()
    if not any(t.is_content and not any(a <= t.start < b for a, b in dropped) for t in tokens):
        return None
    return MainClause(frame, tuple(dropped))


def _last_sentence(tokens: list[Token]) -> int:
    """The first token of the last sentence (a sentence end that closes the message does not count)."""
    first = 0
    for i, t in enumerate(tokens[:-1]):
        if t.pos == "symbol" and t.surface in _SENTENCE_ENDS:
            first = i + 1
    return first


def _pieces(tokens: list[Token], first: int) -> list[tuple[int, int]]:
    """Token ranges from ``first`` on between clause marks (the marks themselves left out), none empty."""
    out: list[tuple[int, int]] = []
    a = first
    for i in range(first, len(tokens)):
        t = tokens[i]
        if t.pos == "symbol" and t.surface in CLAUSE_MARKS:
            if i > a:
                out.append((a, i))
            a = i + 1
    if a < len(tokens):
        out.append((a, len(tokens)))
    return out


def _last_boundary(tokens: list[Token], a: int, b: int, language: str) -> int | None:
    """The token that closes the last subordinate clause in ``tokens[a:b]``, ``None`` without one."""
    found = None
    for i in range(a, b - 1):
        if _closes_clause(tokens, i, language, a) and tokens[i + 1].pos not in ("aux", "ending", "particle"):
            found = i
    return found


def _closes_clause(tokens: list[Token], i: int, language: str, first: int) -> bool:
    """Token ``i`` closes a subordinate clause (``first``: where its piece starts)."""
    tok = tokens[i]
    prev = tokens[i - 1] if i > first else None
    if language == "ko":
        if tok.pos == "ending":
            return tok.surface in _KO_CONNECTIVE and prev is not None and prev.pos in _KO_PREDICATE
        # mecab-ko fuses the ending with its stem: "배고파서" (VA+EC), "거니까" (VCP+EC)
        return (tok.pos in ("verb", "adj", "aux") and tok.surface != tok.norm
                and tok.surface.endswith(tuple(_KO_CONNECTIVE)))
    if prev is None:
        return False
    if tok.surface == "に" and prev.norm == "為" and _after_predicate(tokens, i - 1, first):
        return True  # 「寄るために」
    if tok.pos == "particle":
        # after a predicate only: 「雨が」 is the subject, 「12時半から」 "from"
        return tok.surface in _JA_CONNECTIVE and _after_predicate(tokens, i, first)
    if tok.pos == "aux" and tok.norm in ("た", "だ"):
        if tok.surface in ("たら", "だら"):
            return True  # 「降ったら」
        if tok.surface == "なら":
            return True  # 「晴れなら」「行くなら」
        if tok.surface == "で" and prev.surface in ("の", "ん") and _after_predicate(tokens, i - 1, first):
            return True  # 「行くので」: の + で
        if tok.surface == "に" and prev.norm == "様" and _after_predicate(tokens, i - 1, first):
            return True  # 「眠れるように」
    return False


def _after_predicate(tokens: list[Token], i: int, first: int) -> bool:
    return i > first and tokens[i - 1].pos in _JA_PREDICATE


def _closes_on_request(tokens: list[Token], a: int, b: int, language: str) -> bool:
    """``tokens[a:b]`` closes on a request: a request auxiliary (or お願い) among its last predicate's
    tokens, a Japanese te-form, a Korean imperative ending after a verb or a bare verb ("꺼")."""
    end = b
    while end > a and (tokens[end - 1].pos == "symbol" or (
            language == "ja" and tokens[end - 1].surface in JA_SENTENCE_FINAL)):
        end -= 1  # 「消しといてね」「押さえて？」
    if end <= a:
        return False
    aux = REQUEST_AUX[language]
    tail = tokens[max(a, end - 4):end]
    if any(t.norm in aux and t.pos in ("verb", "aux", "adj") for t in tail[1:]) or any(t.norm == "願う" for t in tail):
        return True
    last = tokens[end - 1]
    if language == "ja":
        return last.pos == "particle" and last.surface in ("て", "で")
    return last.pos == "verb" or (last.pos == "ending" and last.surface in _KO_IMPERATIVE and end - 2 >= a
                                  and tokens[end - 2].pos in ("verb", "suffix"))
