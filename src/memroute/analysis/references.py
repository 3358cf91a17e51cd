"""References to earlier turns (seed 001 phase 1, seed 000 ``ContextAnalyzer``), detected by rules.

Four types, as seed 001 names them:

* ``anaphora``: a pronoun or demonstrative that points back to a thing: "it", "that file", "this one",
  「それ」「あれ」「その資料」, "그거", "그 파일";
* ``topic``: a demonstrative that points back to a matter under discussion, or a return to it:
  "that topic", "back to the deploy", 「例の件」「その話」, "그 얘기";
* ``ellipsis``: a message that leans on the previous request for its verb or object: "Now to French",
  "What about performance?", 「じゃあ英語では？」「担当者は？」, "그럼 영어로는?", "담당자는요?";
* ``temporal``: a vague pointer to an earlier conversation: "the other day", 「この前」, "지난번"
  (found by :mod:`memroute.analysis.timerange`, which also gives its range).

Words only count as themselves: "it" in "itinerary", 「それ」 in 「それぞれ」, 「あれ」 in 「あれば」, "그" in
"그런데" are not references; an expletive "it" ("is it possible to", "what time is it") is not either;
nor is a "this" that points forward to text in the same message ("translate this: 'Hello'"), nor a
"that" that introduces a clause ("I think that we should"). Words inside quotes are never references.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from memroute.text import Token

_I = re.IGNORECASE


class ReferenceType(enum.StrEnum):
    ANAPHORA = "anaphora"
    TEMPORAL = "temporal"
    ELLIPSIS = "ellipsis"
    TOPIC = "topic"


@dataclass(frozen=True, slots=True)
class Reference:
    """One reference: its type, its words in the message, and what it points to when history tells."""

    type: ReferenceType
    surface: str
    resolved: str | None = None
    start: int = 0
    end: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type.value, "surface": self.surface, "resolved": self.resolved}


@dataclass(frozen=True, slots=True)
class Found:
    """A reference before resolution; ``noun`` is the head noun of "that file", used to resolve it."""

    type: ReferenceType
    surface: str
    start: int
    end: int
    noun: str = ""


# ---------------------------------------------------------------------------------------------- English

_EN_PRONOUN = re.compile(r"\b(?:it|its|they|them|their|he|him|his|she|her|there)\b", _I)
_EN_EXPLETIVE = re.compile(
    r"(?:(?P<it>it)(?:'s|’s|\s+is|\s+was|\s+will\s+be|\s+would\s+be|\s+gets?)\s+(?:not\s+)?(?:possible|impossible|"
    r"necessary|ok|okay|true|likely|unlikely|important|better|best|worth|hard|easy|safe|time|raining|snowing|"
    r"sunny|cloudy|cold|hot|warm|late|early|normal|common|fine|allowed|required|recommended|a\s+good\s+idea|"
    r"going\s+to\s+(?:rain|snow)|supposed|too\s+(?:late|early|cold|hot))\b"
    r"|(?P<it2>it)\s+(?:seems|appears|looks\s+like|takes|depends|turns\s+out)\b)"
    r"|\b(?:is|was|will|would|does)\s+(?P<it3>it)\s+(?:be\s+)?(?:possible|okay|ok|safe|true|worth|normal|better|"
    r"necessary|going\s+to\s+(?:rain|snow)|raining|snowing|cold|hot|sunny|late|too|rain)\b"
    r"|\btime\s+is\s+(?P<it4>it)\b|\bhow(?:'s|\s+is)\s+(?P<it5>it)\s+going\b"
    r"|\bhow\s+long\s+(?:does|will|would)\s+(?P<it6>it)\s+take\b", _I)
_THERE_BEFORE_EXCLUDED = re.compile(r"\b(?:hi|hello|hey|thanks|over|out|in|is|are|was|were)\s+$", _I)
_THERE_AFTER = re.compile(r"\s*(?:[?.!,;]|$|(?:and|tomorrow|today|tonight|now|right\s+now|next|this|on|at|by|"
                          r"from|too|as\s+well|then)\b)", _I)
_EN_DEMONSTRATIVE = re.compile(r"\b(?:this|that|these|those)\b", _I)
_NEXT_WORD = re.compile(r"\s*([A-Za-z][\w'’-]*|[^\w\s]|$)")
_TIME_NOUNS = frozenset("""week weekend month year morning afternoon evening night quarter sprint semester season
    time moment summer winter spring fall autumn century decade""".split())
_TOPIC_NOUNS_EN = frozenset("""topic matter discussion conversation thread subject point idea thing stuff
    question plan""".split())
_THAT_CLAUSE_PREV = frozenset("""say said says think thought know knew sure mean means meant believe hope ensure
    so such given assuming except seems realize realized realise noticed notice found find show shows showed
    confirm verify make tell told remember remind reminded suggest suggested mentioned mention means way note
    noted agree agreed decided decide claim claims hear heard read see saw feel felt guess assume""".split())
_SUBJECTS = frozenset("""i you we he she they it the a an my our your their his her there this these those all
    every some no each its one someone anyone nothing everything something""".split())
_DETERMINERS = frozenset("the a an any every some each all".split())
_NON_NOUN_NEXT = frozenset("""is was are were will would should can could does did do has have had be been
    being isn't wasn't doesn't didn't won't can't not also just only really still again too already so very
    and or but if then than as to of in on at for with by from into about please here there one ones""".split())
_ACK = re.compile(r"\bthat(?:'s|’s|\s+is|\s+was)\s+(?:all|it|great|perfect|helpful|awesome|fine|ok|okay|good|"
                  r"cool|nice|amazing|wonderful|fair|enough|very\s+helpful|exactly\s+what)\b", _I)
_EN_PHRASES = re.compile(
    r"\bthe\s+same(?:\s+(?:one|thing|way|again))?\b"
    r"|\bthe\s+(?:first|second|third|last|other|previous|former|latter|above|earlier|next)\s+(?:one|ones|option|"
    r"version|answer|suggestion|link|result|file|draft|message|example|point|item)\b"
    r"|\bthe\s+(?:former|latter|above)\b|\bthe\s+one\s+(?:you|we|i)\s+\w+", _I)
_EN_TOPIC = re.compile(
    r"\bwhere\s+(?:did|were)\s+we\s+(?:leave|left)\s+off\b"
    r"|\b(?:going\s+)?back\s+to\s+(?!(?:the\s+)?(?:first|second|third|last|other|previous|same)\b|it\b|that\b|this\b|"
    r"them\b|normal\b|sleep\b|work\b|you\b|me\b)(?:the\s+|our\s+|my\s+|your\s+|"
    r"that\s+)?(?P<what>[\w.-]+(?:\s+(?![a-z]+ly\b)"
    r"(?:issue|bug|plan|report|deploy|deployment|migration|question|topic|project|thing|draft|idea))?)"
    r"|\bas\s+(?:we|i|you)\s+(?:discussed|said|mentioned|agreed|talked\s+about|decided)\b"
    r"|\b(?:what|the\s+thing|the\s+\w+)\s+(?:we|you|i)\s+(?:discussed|talked\s+about|were\s+(?:talking|discussing)\s+"
    r"about|agreed\s+on|decided\s+on|mentioned)\b", _I)
_ACK_PREFIX = (r"(?:(?:ok(?:ay)?|great|thanks|thank\s+you|cool|perfect|nice|alright|sure|hmm+|got\s+it|right|good|"
               r"awesome|yes|yeah|no|nope)[,.!]*\s+)?")
_EN_START_CUE = re.compile(
    r"^\W*" + _ACK_PREFIX + r"(?P<cue>and\s+what\s+about|what\s+about|what\s+else|"
    r"(?:why|how|when|where|who)(?=\s*\?+\s*$)|how\s+about|what\s+if|and\s+(?:also\s+)?"
    r"(?=\w)|now\s+(?=(?:to|in|into|for|do|make|try|translate|the|with|what|can|please|give|show|let|write|"
    r"summari[sz]e|same|change|convert|add|just)\b)|same\s+(?:for|with|but|thing|question)|also\s+(?=\w)|"
    r"then\s+(?=\w)|or\s+(?=\w)|but\s+(?=(?:what|how|why|can|could|is|are|does|do|in|for|with)\b)|"
    r"instead\s+(?=\w)|ok\s+now)", _I)
_EN_ANY_CUE = re.compile(
    r"\b(?:again|also|instead|as\s+well|one\s+more(?:\s+time)?(?!\s+thing)|another\s+one|(?:in\s+)?more\s+detail|"
    r"more\s+details|"
    r"more\s+examples|(?:tell|show|give)\s+me\s+more|the\s+rest|anything\s+else|a\s+bit\s+(?:shorter|longer)|"
    r"(?:shorter|longer|simpler|more\s+formal|less\s+formal|more\s+casual)(?=\s*[?.!]?\s*$))\b"
    r"|\btoo\s*[?.!]*\s*$", _I)
_EN_FRAGMENT = re.compile(
    r"^\W*" + _ACK_PREFIX + r"(?P<frag>(?:in|for|to|into|with|on|at|from|about|by|without|using|via)\s+"
    r"[^?.!]{1,40})[?.!]*\s*$", _I)
_EN_NOUN_QUESTION = re.compile(r"^\W*(?P<frag>[A-Za-z][A-Za-z0-9'’-]*(?:\s+[A-Za-z0-9'’-]+){0,2})\s*\?+\s*$")
_WH_OR_AUX = frozenset("""what who whom whose when where why how which is are was were do does did can could
    will would should shall may might must have has had am any you hello hi hey really ok okay seriously yes no
    thanks sure right huh what's who's where's how's""".split())


def _en(text: str, blocked: list[tuple[int, int]]) -> list[Found]:
    out: list[Found] = []
    low = text.lower()
    expletive = {x.start(g) for x in _EN_EXPLETIVE.finditer(text) for g in ("it", "it2", "it3", "it4", "it5", "it6")
                 if x.group(g)}
    for m in _EN_PRONOUN.finditer(text):
        word = m.group(0).lower()
        if _inside(m.start(), blocked):
            continue
        if word == "it" and m.start() in expletive:
            continue
        if word == "there" and (_THERE_BEFORE_EXCLUDED.search(text, 0, m.start())
                                or not _THERE_AFTER.match(text, m.end())):
            continue
        out.append(Found(ReferenceType.ANAPHORA, m.group(0), m.start(), m.end()))
    for m in _EN_DEMONSTRATIVE.finditer(text):
        if _inside(m.start(), blocked):
            continue
        found = _en_demonstrative(text, low, m, blocked)
        if found is not None:
            out.append(found)
    for m in _EN_PHRASES.finditer(text):
        if not _inside(m.start(), blocked):
            out.append(Found(ReferenceType.ANAPHORA, m.group(0), m.start(), m.end()))
    for m in _EN_TOPIC.finditer(text):
        if not _inside(m.start(), blocked):
            out.append(Found(ReferenceType.TOPIC, m.group(0), m.start(), m.end(), m.groupdict().get("what") or ""))
    out.extend(_en_ellipsis(text, blocked))
    return out


def _en_demonstrative(text: str, low: str, m: re.Match[str], blocked: list[tuple[int, int]]) -> Found | None:
    word = m.group(0).lower()
    nxt_m = _NEXT_WORD.match(text, m.end())
    nxt = nxt_m.group(1).lower() if nxt_m else ""
    prev_words = re.findall(r"[a-z']+", low[max(0, m.start() - 40):m.start()])
    prev = prev_words[-1] if prev_words else ""
    if nxt in _TIME_NOUNS:
        return None
    if word == "that":
        if prev in _THAT_CLAUSE_PREV or nxt in _SUBJECTS:
            return None
        if prev.isalpha() and prev not in _NON_NOUN_NEXT and any(w in _DETERMINERS for w in prev_words[-3:-1]):
            return None  # "the bug that crashes": a relative clause
        if _ACK.match(text, m.start()):
            return None
    if word in ("this", "these", "that") and _points_forward(text, m.end(), blocked):
        return None
    if nxt in ("one", "ones"):
        end = nxt_m.end() if nxt_m else m.end()
        return Found(ReferenceType.ANAPHORA, text[m.start():end].strip(), m.start(), end)
    if nxt and nxt.isalpha() and nxt not in _NON_NOUN_NEXT and nxt not in _SUBJECTS and nxt_m is not None:
        end = nxt_m.end()
        kind = ReferenceType.TOPIC if nxt.rstrip("s") in _TOPIC_NOUNS_EN else ReferenceType.ANAPHORA
        return Found(kind, text[m.start():end].strip(), m.start(), end, nxt)
    return Found(ReferenceType.ANAPHORA, m.group(0), m.start(), m.end())


_FORWARD = re.compile(r"[:：]\s*\S|\n\s*\S|[\"“「『`]")


def _points_forward(text: str, pos: int, blocked: list[tuple[int, int]]) -> bool:
    """"Translate this: 'Hello'": the thing follows in the same message (a colon, quote or new line)."""
    rest = text[pos:pos + 200]
    return _FORWARD.search(rest) is not None or any(s >= pos for s, _ in blocked)


_ADJECTIVE_CUE = re.compile(r"(?:a\s+bit\s+)?(?:shorter|longer|simpler|more\s+formal|less\s+formal|more\s+casual)", _I)
_ACK_SENTENCE = re.compile(r"^\W*(?:thanks?(?:\s+you)?|thx|ok(?:ay)?|great|cool|perfect|nice|got\s+it|sure|"
                           r"alright)\W*?[.!]+\s*", _I)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def _first_ask_sentence(text: str) -> tuple[int, int]:
    """The first sentence after any leading "Thanks." / "OK!": where "also", "again", "too" lean back."""
    m = _ACK_SENTENCE.match(text)
    start = m.end() if m else 0
    end = _SENTENCE_END.search(text, start)
    return start, end.end() if end else len(text)


def _en_ellipsis(text: str, blocked: list[tuple[int, int]]) -> list[Found]:
    out: list[Found] = []
    short = len(text.split()) <= 6
    m = _EN_START_CUE.match(text)
    if m:
        surface = text.strip() if short else m.group("cue").strip()
        out.append(Found(ReferenceType.ELLIPSIS, surface, m.start("cue"), m.end("cue")))
        return out
    m = _EN_FRAGMENT.match(text)
    if m and len(m.group("frag").split()) <= 5 and not re.search(r"[:\"“']|\bthe\s+way\b", m.group("frag"), _I):
        out.append(Found(ReferenceType.ELLIPSIS, m.group("frag").strip(), m.start("frag"), m.end("frag")))
        return out
    m = _EN_NOUN_QUESTION.match(text)
    if m and m.group("frag").split()[0].lower() not in _WH_OR_AUX and not blocked:
        out.append(Found(ReferenceType.ELLIPSIS, m.group("frag").strip(), m.start("frag"), m.end("frag")))
        return out
    first = _first_ask_sentence(text)
    for c in _EN_ANY_CUE.finditer(text, first[0], first[1]):
        if _ADJECTIVE_CUE.match(c.group(0)) and len(text.split()) > 3:
            continue  # "make it shorter" leans back through "it"; "Shorter" alone is the ellipsis
        if not _inside(c.start(), blocked):
            out.append(Found(ReferenceType.ELLIPSIS, c.group(0).strip(" ?.!"), c.start(), c.end()))
            break
    return out


# --------------------------------------------------------------------------------------------- Japanese

_JA_PRONOUNS = frozenset("""それ あれ これ そちら あちら そっち あっち そこ あそこ それら あれら これら 彼 彼女 あいつ
    そいつ こいつ あの人 その人""".split())
_JA_DETS = frozenset({"その", "あの", "この", "例の"})
_JA_NOT_AFTER_DET = frozenset("""他 ほか まま 後 上 ため 為 際 うち 内 辺 辺り 通り 前 間 頃 ごろ よう 様 程度 先 方
    週 月 年 度 くらい ぐらい 分 場 次 中 結果 代わり 一方""".split())
_JA_TOPIC_NOUNS = frozenset("件 話 話題 こと 事 議論 質問 内容 案件 相談 打ち合わせ".split())
_JA_START_CUE = re.compile(
    r"^\W*(?:(?:なるほど|了解(?:です)?|ありがとう(?:ございます)?|はい|うん|OK|オッケー|いいね)[、,!！。]*\s*)?"
    r"(?P<cue>じゃあ|じゃ(?!な)|では(?!な|あり)|なら(?=[、,\s])|だったら|それなら|それで(?=[、,\s?？])|それじゃあ?|"
    r"それから|それと|それとも|あと(?=は|[、,\s]|[一-龯ァ-ヶ])|で、|他に(?:は)?|ほかに(?:は)?|他の|ほかの|"
    r"別の(?!話|件|質問|相談)|"
    r"次は|今度は|さらに|ついでに|もう(?:一回|一度|少し|ちょっと)|もっと|同じ(?:ように|く|こと|の)|続き|逆に|"
    r"やっぱり?|やはり)")
_JA_ANY_CUE = re.compile(r"もう一回|もう一度|同じように|同様に|続きを|続きから|続けて|他のも|ほかのも|別のも|"
                         r"同じ(?:内容|もの|設定|条件|やり方|感じ|形式)")
_JA_FRAGMENT_END = re.compile(r"(?:(?P<contrast>では|には|も|とか|の場合は|なら|だと)(?:どう(?:ですか)?)?|は|"
                              r"って)\s*[?？]+\s*$")
_JA_SO = re.compile(r"そう(?=なる|なっ|する|しな|いう(?!え))")
_JA_TIME_THEN_NOUN = re.compile(r"(?:さっき|先ほど|さきほど|前回|この前|先日)の(?!続き)")
_JA_RELATIVE_TOPIC = re.compile(r"(?:した|んだ|った|いた|てた)(?P<noun>件|話)")
_JA_REQUEST_FRAGMENT = re.compile(r"^[^\s、。]{1,12}(?:で|に|も)(?:お願い(?:します)?|頼む|よろしく)[。！!]?\s*$")
_JA_TOPIC_PHRASE = re.compile(r"話を戻(?:す|して|すと|しますが)|(?:さっき|先ほど|前)の話(?:に戻|の続き)|例の件")
_JA_NOT_PRONOUN_NEXT = re.compile(r"から|まで|ぞれ|ほど")


def _ja(text: str, tokens: list[Token], blocked: list[tuple[int, int]]) -> list[Found]:
    out: list[Found] = []
    ja = tokens  # all tokens: 「このPDF」 is a Japanese determiner before a Latin-script noun
    for i, t in enumerate(ja):
        if _inside(t.start, blocked) or t.language != "ja":
            continue
        if t.pos == "pron" and t.surface in _JA_PRONOUNS:
            if t.surface in ("これ", "それ") and _JA_NOT_PRONOUN_NEXT.match(text, t.end):
                continue  # これから, それまで: "from now", "until then"
            if t.surface in ("これ", "これら") and _points_forward(text, t.end, blocked):
                continue
            if t.surface == "それ" and t.start == _first_char(text) and re.match(r"で[、,]|なら|じゃ|に[、,]|"
                                                                               r"と[、,]|から",
                                                                             text[t.end:t.end + 3]):
                continue  # 「それで、」「それなら」 open the sentence as conjunctions (ellipsis cues)
            out.append(Found(ReferenceType.ANAPHORA, t.surface, t.start, t.end))
        elif t.surface in _JA_DETS or (t.surface == "例" and i + 1 < len(ja) and ja[i + 1].surface == "の"):
            found = _ja_det(text, ja, i, blocked)
            if found is not None:
                out.append(found)
    for m in _JA_SO.finditer(text):
        if not _inside(m.start(), blocked):
            out.append(Found(ReferenceType.ANAPHORA, m.group(0), m.start(), m.end()))
    for m in _JA_TIME_THEN_NOUN.finditer(text):
        head = next((t for t in ja if t.start == m.end() and t.pos in ("noun", "propn")), None)
        if head is not None and head.surface not in _JA_NOT_AFTER_DET and not _inside(m.start(), blocked):
            kind = ReferenceType.TOPIC if head.surface in _JA_TOPIC_NOUNS else ReferenceType.ANAPHORA
            # starts at the noun: the time word before it is a temporal reference of its own
            out.append(Found(kind, text[m.start():head.end], head.start, head.end, head.surface))
    for m in _JA_RELATIVE_TOPIC.finditer(text):
        if not _inside(m.start(), blocked):
            out.append(Found(ReferenceType.TOPIC, m.group(0), m.start("noun"), m.end()))
    for m in _JA_TOPIC_PHRASE.finditer(text):
        if not _inside(m.start(), blocked) and not any(f.start <= m.start() < f.end for f in out):
            out.append(Found(ReferenceType.TOPIC, m.group(0), m.start(), m.end()))
    backward = bool(out)
    start_cue = _JA_START_CUE.match(text)
    if start_cue:
        out.append(Found(ReferenceType.ELLIPSIS, start_cue.group("cue"), start_cue.start("cue"), start_cue.end("cue")))
    elif not backward and _is_ja_fragment(text, ja):
        stripped = text.strip()
        out.append(Found(ReferenceType.ELLIPSIS, stripped, text.find(stripped), text.find(stripped) + len(stripped)))
    else:
        c = _JA_ANY_CUE.search(text)
        if c and not _inside(c.start(), blocked):
            out.append(Found(ReferenceType.ELLIPSIS, c.group(0), c.start(), c.end()))
    return out


def _ja_det(text: str, ja: list[Token], i: int, blocked: list[tuple[int, int]]) -> Found | None:
    t = ja[i]
    j = i + 2 if t.surface == "例" else i + 1
    if j < len(ja) and ja[j].pos == "prefix":  # 「あのお店」
        j += 1
    if j >= len(ja) or ja[j].pos not in ("noun", "propn"):
        return None
    head = ja[j]
    if head.surface in _JA_NOT_AFTER_DET or head.start != ja[j - 1].end:
        return None
    if t.surface == "この" and _points_forward(text, head.end, blocked):
        return None
    k = j
    while k + 1 < len(ja) and ja[k + 1].pos in ("noun", "propn", "suffix") and ja[k + 1].start == ja[k].end:
        k += 1
    end = ja[k].end
    kind = ReferenceType.TOPIC if ja[k].surface in _JA_TOPIC_NOUNS or head.surface in _JA_TOPIC_NOUNS \
        else ReferenceType.ANAPHORA
    noun = text[head.start:end]
    return Found(kind, text[t.start:end], t.start, end, noun)


def _is_ja_fragment(text: str, ja: list[Token]) -> bool:
    """「担当者は？」「英語では？」: a noun and a particle, no predicate, asked as a question."""
    if _JA_REQUEST_FRAGMENT.match(text.strip()):
        return True
    end = _JA_FRAGMENT_END.search(text)
    if len(text) > 30 or not end:
        return False
    # A full question can also lack a verb (「東京の天気は？」): a fragment is one word with は, or two with
    # a contrasting particle (「英語の場合は？」「パフォーマンスの面ではどう？」).
    content = sum(1 for t in ja if t.is_content)
    before = [t for t in ja if t.end <= end.start()]
    return content <= (2 if end.group("contrast") else 1) and not any(t.pos in ("verb", "adj", "aux") for t in before)


# ------------------------------------------------------------------------------------------------ Korean

_KO_PRONOUN = re.compile(r"(?<![가-힣])(?:그거|그것|그게|그걸|그건|이거|이것|이게|이걸|이건|저거|저것|저게|저걸|"
                         r"저건|거기|"
                         r"걔|쟤|그분|그녀|그들|그쪽|저쪽|그곳|그때)")
_KO_TITLES = frozenset("""대리 과장 차장 부장 팀장 사장 이사 상무 전무 선생 교수 박사
    주임 사원 실장 원장 님 씨 매니저 대표""".split())
_KO_TIME_THEN_THING = re.compile(r"(?:아까|저번|지난번|방금|전에)\s(?P<noun>거|것|걸|게)(?![가-힣])")
_KO_RELATIVE_TOPIC = re.compile(r"[가-힣](?:한|했던|던)\s(?P<noun>건|얘기|이야기)(?=[은는이가을를도?]|\s|$)")
_KO_ALSO_FIRST = re.compile(r"^\W*(?P<cue>[가-힣A-Za-z0-9]+도)\s+\S*(?:줘|주세요|해|할래|하자)")
_KO_FORWARD_PRONOUNS = ("이거", "이것", "이게", "이걸", "이건")
_KO_NOT_AFTER_DET = frozenset("""다음 외 때 동안 전 후 뒤 정도 중 밖 이후 이전 사이 대신 밖에
    주 달 해 시간 번 밖 위 아래
    이상 이하 와중 즈음 무렵 결과 덕분 정도로 만큼""".split())
_KO_TOPIC_NOUNS = frozenset("건 얘기 이야기 주제 일 질문 내용 논의 대화 안건 문의".split())
_KO_START_CUE = re.compile(
    r"^\W*(?:(?:아\s?)?(?:그렇구나|그렇군요|알겠어(?:요)?|네|응|좋아(?:요)?|오케이|ㅇㅋ|고마워(?:요)?)[,.!~]*\s*)?"
    r"(?P<cue>그럼(?!요)|그러면|그리고|그래서|그래도|그러니까|아니면|또(?=\s)|다시(?=\s)|이번엔|이번에는|다음은|"
    r"나머지는|"
    r"그\s?다음(?:은|에는|엔)?|더(?=\s)|근데\s?(?=그|저|이거|거기)|똑같이|마찬가지로|반대로|다른\s?(?:건|"
    r"거)(?=\s*[?？요]|\s*$)|"
    r"다른(?=\s))")
_KO_ANY_CUE = re.compile(r"다시\s?한\s?번|한\s?번\s?더|더\s?자세히|더\s?짧게|더\s?길게|마찬가지로|똑같이|같은\s?걸로|"
                         r"같은\s?(?:내용|거|방식|조건)(?:으로|로)?|(?:나머지|다른\s?것)도|(?<![가-힣])다시(?![가-힣])")
_KO_FRAGMENT_END = re.compile(r"(?:(?P<contrast>도|로는|으로는|에서는|랑은|이랑은|에는|의\s?경우는|라면|이라면)|"
                              r"는|은)\s*(?:요)?\s*[?？]+\s*$")
_KO_TOPIC_PHRASE = re.compile(r"(?:얘기|이야기|대화)로\s?돌아가")
_KO_PREDICATE = frozenset({"verb", "adj", "aux", "ending"})


def _ko(text: str, tokens: list[Token], blocked: list[tuple[int, int]]) -> list[Found]:
    out: list[Found] = []
    for m in _KO_PRONOUN.finditer(text):
        if _inside(m.start(), blocked):
            continue
        word = m.group(0)
        if word == "그건" and text.startswith("그렇고", m.end() + 1):
            continue  # 「그건 그렇고」: "anyway", a switch
        if word.startswith("이") and word in _KO_FORWARD_PRONOUNS and _points_forward(text, m.end(), blocked):
            continue
        out.append(Found(ReferenceType.ANAPHORA, word, m.start(), m.end()))
    ko = [t for t in tokens if t.language == "ko"]
    for i, t in enumerate(ko):
        if t.pos != "det" or t.surface not in ("그", "이", "저") or i + 1 >= len(ko) or _inside(t.start, blocked):
            continue
        head = ko[i + 1]
        if head.pos not in ("noun", "propn") or head.surface in _KO_NOT_AFTER_DET:
            continue
        if head.start == t.end or (t.start > 0 and text[t.start - 1].isalnum()):
            continue  # 「이체일」 is one word, not 「이」 + 「체일」
        if t.surface == "이" and head.surface in _KO_TITLES:
            continue  # 「이 대리님」: Lee, a surname
        if t.surface == "이" and _points_forward(text, head.end, blocked):
            continue
        kind = ReferenceType.TOPIC if head.surface in _KO_TOPIC_NOUNS else ReferenceType.ANAPHORA
        out.append(Found(kind, text[t.start:head.end], t.start, head.end, head.surface))
    for m in _KO_TIME_THEN_THING.finditer(text):
        if not _inside(m.start(), blocked):
            out.append(Found(ReferenceType.ANAPHORA, m.group("noun"), m.start("noun"), m.end()))
    for m in _KO_RELATIVE_TOPIC.finditer(text):
        if not _inside(m.start(), blocked):
            out.append(Found(ReferenceType.TOPIC, m.group(0)[1:], m.start("noun"), m.end()))
    for m in _KO_TOPIC_PHRASE.finditer(text):
        if not _inside(m.start(), blocked) and not any(f.start <= m.start() < f.end for f in out):
            out.append(Found(ReferenceType.TOPIC, m.group(0), m.start(), m.end()))
    backward = bool(out)
    start_cue = _KO_START_CUE.match(text)
    also = _KO_ALSO_FIRST.match(text)
    if start_cue:
        out.append(Found(ReferenceType.ELLIPSIS, start_cue.group("cue").strip(), start_cue.start("cue"),
                         start_cue.end("cue")))
    elif also and not backward:  # 「택시도 불러줘」: "a taxi too", on top of what was asked before
        out.append(Found(ReferenceType.ELLIPSIS, also.group("cue"), also.start("cue"), also.end("cue")))
    elif not backward and _is_ko_fragment(text, ko):
        stripped = text.strip()
        out.append(Found(ReferenceType.ELLIPSIS, stripped, text.find(stripped), text.find(stripped) + len(stripped)))
    else:
        c = _KO_ANY_CUE.search(text)
        if c and not _inside(c.start(), blocked):
            out.append(Found(ReferenceType.ELLIPSIS, c.group(0), c.start(), c.end()))
    return out


def _is_ko_fragment(text: str, ko: list[Token]) -> bool:
    """"담당자는요?", "영어로는?": a noun and a particle, no predicate, asked as a question."""
    end = _KO_FRAGMENT_END.search(text)
    if len(text) > 30 or not end:
        return False
    before = [t for t in ko if t.end <= end.start()]  # 「영어라면」: the copula inside the ending is no predicate
    if sum(1 for t in before if t.is_content) > (2 if end.group("contrast") else 1):
        return False
    return not any(t.pos in _KO_PREDICATE or (t.pos == "suffix" and t.norm in ("하", "해", "되")) for t in before)


# ------------------------------------------------------------------------------------------------ public

def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(s <= pos < e for s, e in spans)


def _first_char(text: str) -> int:
    return len(text) - len(text.lstrip())


def detect(text: str, tokens: list[Token], languages: frozenset[str],
           quoted: list[tuple[int, int]]) -> list[Found]:
    """Anaphora, topic and ellipsis references of ``text`` (temporal ones come from the time module)."""
    out: list[Found] = []
    if "en" in languages:
        out.extend(_en(text, quoted))
    if "ja" in languages:
        out.extend(_ja(text, tokens, quoted))
    if "ko" in languages:
        out.extend(_ko(text, tokens, quoted))
    out.sort(key=lambda f: f.start)
    kept: list[Found] = []
    for f in out:  # one reference per stretch of text: "that topic" is a topic, not also "that"
        if kept and f.start < kept[-1].end and f.type != ReferenceType.ELLIPSIS:
            continue
        kept.append(f)
    return kept
