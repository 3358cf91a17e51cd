"""Splitting a message that asks several things into its parts (seed 001 phase 1, without an LLM).

* Sentences: each question or request is a part; statements and thanks around them are not
  ("I'm in Tokyo next week. What's the weather there?" has one part).
* Clauses joined by "and"/"or" before a question word: "what's the status and who owns it?".
* A list of nouns before a shared request: 「進捗と締切教えて」 -> 「進捗教えて」「締切教えて」,
  "진행 상황이랑 마감일 알려줘" -> "진행 상황 알려줘", "마감일 알려줘"; not when the nouns are compared
  (「AとBの違い」) or the と is "with" (「田中さんと話した」 has no request after it).
* Japanese and Korean "also" between requests: 「進捗を教えて、あと担当者も」, "..., 그리고 담당자는?".

A message with no question or request is one part: itself. Empty text has no parts.
"""

from __future__ import annotations

import re

from memroute.text import Token

_SENTENCE = re.compile(r"(?<=[?？!！。])\s*|\n+|(?<=[a-z0-9)\]][.])\s+(?=[A-Z])")
_EN_CLAUSE = re.compile(
    r",?\s+(?:and|or|plus)\s+(?:also\s+)?(?=(?:who|what|what's|when|where|why|how|which|is|are|was|were|can|could|"
    r"do|does|did|will|would|should|has|have)\b)|;\s*|,?\s+and\s+also\s+", re.IGNORECASE)
_JA_ALSO = re.compile(r"[、,]\s*(?:あと|それと|それから|ついでに|また)[、,]?\s*")
_KO_ALSO = re.compile(r"[,]?\s+(?:그리고|또|아울러)\s+")
_EN_ASK = re.compile(
    r"\?\s*$|^\W*(?:(?:hi|hey|ok|okay|so|also|and|then|now|please|pls)[,!]?\s+)*(?:who|what|what's|when|where|why|how|"
    r"which|is|are|was|were|can|could|do|does|did|will|would|should|shall|may|has|have|please|tell|show|give|"
    r"find|check|list|send|book|make|create|add|fix|update|remove|delete|translate|summari[sz]e|review|write|"
    r"explain|compare|schedule|remind|set|cancel|draft|look|search|get|help|let|open|run|deploy|share|move|"
    r"rename|change|convert|export|email|order|play|turn|call|reply|post|file|assign|close|merge)\b", re.IGNORECASE)
_JA_ASK = re.compile(r"[?？]\s*$|(?:教えて|ください|下さい|お願い|ほしい|欲しい|見せて|調べて|確認して)|"
                     r"(?:ください|下さい|して|してね|お願い|ほしい|欲しい|たい|ませんか|ますか|でしょうか|"
                     r"か[。]?$|って[。]?$|かな[。]?$|頼む|見せて|調べて|確認して|作って|直して|送って|探して|まとめて|"
                     r"書いて|訳して|予約して|決めて|出して|くれ|くれる)[。！!]*\s*$")
_KO_ASK = re.compile(r"[?？]\s*$|(?:알려|보여|찾아|확인해|주세요|해줘|해 줘)|(?:줘|주세요|줄래|줄래요|"
                     r"줄\s?수\s?있|해라|하자|할까|까요|나요|니|냐|래요|해요|봐|봐요|"
                     r"알려|보여|찾아|확인해|정리해|번역해|요약해|예약해|보내|만들어|고쳐|바꿔)[.!]*\s*$")
_ACK_ONLY = re.compile(r"^\W*(?:thanks?|thank\s+you|thx|ok(?:ay)?|great|cool|perfect|nice|got\s+it|sure|yes|no|"
                       r"ありがとう(?:ございます)?|了解(?:です)?|はい|なるほど|すみません|고마워(?:요)?|"
                       r"감사합니다|네|알겠(?:어|어요|습니다))\W*$",
                       re.IGNORECASE)
_JA_REQUEST_TAIL = re.compile(r"^(?:を|は|について|の(?:こと|件)?を?)?\s*(?:教えて|知りたい|確認(?:して|したい)|調べて|"
                              r"見せて|ください|下さい|お願い|は?[?？]|はいつ|は何|はどう|って[?？]?|も)")
_KO_REQUEST_TAIL = re.compile(r"^\s*(?:을|를|은|는|좀|도)?\s*(?:좀\s)?(?:알려|확인|찾아|보여|말해|정리|얘기해|"
                              r"궁금|어떻게|뭐야|[?？])")
_JA_LIST_PARTICLES = frozenset({"と", "や"})
_KO_LIST_PARTICLES = frozenset({"이랑", "랑", "하고", "와", "과"})
_MAX_PARTS = 8


def split_parts(text: str, tokens: list[Token], languages: frozenset[str], comparative: bool) -> list[str]:
    stripped = text.strip()
    if not stripped:
        return []
    sentences = _sentences(stripped)
    asks = [s for s in sentences if _is_ask(s, languages) and not _ACK_ONLY.match(s)]
    if not asks:
        return [stripped]
    parts: list[str] = []
    for sentence in asks:
        parts.extend(_split_sentence(sentence, text, tokens, languages, comparative))
    return parts[:_MAX_PARTS]


_QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|「[^」\n]*」|『[^』\n]*』|`[^`\n]*`|(?<![\w\'])\'[^\'\n]*\'(?!\w)')


def _sentences(text: str) -> list[str]:
    """Sentences of ``text``; a "?" inside quotes ("Translate 'Where is it?'") ends none."""
    masked = _QUOTED.sub(lambda m: "x" * len(m.group(0)), text)
    out, start = [], 0
    for m in _SENTENCE.finditer(masked):
        if m.end() > start:
            out.append(text[start:m.start()].strip())
            start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def _is_ask(sentence: str, languages: frozenset[str]) -> bool:
    return (("en" in languages and _EN_ASK.search(sentence) is not None)
            or ("ja" in languages and _JA_ASK.search(sentence) is not None)
            or ("ko" in languages and _KO_ASK.search(sentence) is not None)
            or sentence.endswith(("?", "？")))


def _split_sentence(sentence: str, text: str, tokens: list[Token], languages: frozenset[str],
                    comparative: bool) -> list[str]:
    pieces = [sentence]
    if "en" in languages and not comparative:
        pieces = _split_each(pieces, _EN_CLAUSE)
    if "ja" in languages:
        pieces = _split_each(pieces, _JA_ALSO)
    if "ko" in languages:
        pieces = _split_each(pieces, _KO_ALSO)
    if comparative or not ({"ja", "ko"} & languages):
        return pieces
    out: list[str] = []
    for piece in pieces:
        out.extend(_split_noun_list(piece, text, tokens))
    return out


def _split_each(pieces: list[str], pattern: re.Pattern[str]) -> list[str]:
    out: list[str] = []
    for piece in pieces:
        split = [p.strip(" ,、") for p in pattern.split(piece) if p and p.strip(" ,、")]
        kept = [p for p in split if not _ACK_ONLY.match(p)]  # "ok and what's ..." is one question
        out.extend(kept or split)
    return out


def _split_noun_list(piece: str, text: str, tokens: list[Token]) -> list[str]:
    """「進捗と締切教えて」: nouns joined by と/や (이랑/하고/와) before a request that they share."""
    offset = text.find(piece)
    if offset < 0:
        return [piece]
    toks = [t for t in tokens if offset <= t.start and t.end <= offset + len(piece)]
    groups: list[tuple[int, int]] = []  # spans of the listed nouns
    i = 0
    while i < len(toks):
        if toks[i].pos not in ("noun", "propn"):
            i += 1
            continue
        start = i
        while i + 1 < len(toks) and toks[i + 1].pos in ("noun", "propn", "num", "suffix", "noun_dep"):
            i += 1
        groups.append((start, i))
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is None or nxt.pos != "particle" or nxt.surface not in (_JA_LIST_PARTICLES | _KO_LIST_PARTICLES):
            if len(groups) >= 2:
                break
            groups = []
        i += 1
    if len(groups) < 2:
        return [piece]
    # 「売上と利益と来月の見通し」: the last item may be a phrase with の (의).
    s_last, e_last = groups[-1]
    while e_last + 2 < len(toks) and toks[e_last + 1].surface in ("の", "의") and toks[e_last + 2].pos in ("noun",
                                                                                                          "propn"):
        e_last += 2
        while e_last + 1 < len(toks) and toks[e_last + 1].pos in ("noun", "propn", "suffix"):
            e_last += 1
    groups[-1] = (s_last, e_last)
    last_end = toks[groups[-1][1]].end
    tail = text[last_end:offset + len(piece)]
    is_ko = toks[0].language == "ko"
    if not (_KO_REQUEST_TAIL if is_ko else _JA_REQUEST_TAIL).match(tail):
        return [piece]
    head = text[offset:toks[groups[0][0]].start]
    joiner = " " if is_ko else ""
    out = []
    for s, e in groups:
        noun = text[toks[s].start:toks[e].end]
        out.append((head + noun + joiner + tail.lstrip() if is_ko else head + noun + tail).strip())
    return out
