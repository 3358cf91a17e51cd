"""Query type (seed 003): factual, conceptual, procedural, temporal or comparative, and an importance score.

Rules by cue words in each language, checked in this order, first match wins:

1. ``comparative``: two things weighed: "vs", "difference between", "which is better", 「違い」「比較」
   「どっちが」, "차이", "비교", "뭐가 더";
2. ``temporal``: scoped in time: any time expression, or "recently", 「最近」「これまで」, "최근", "요즘";
3. ``procedural``: how to do something: "how do I", "steps to", 「どうやって」「手順」「方法」, "어떻게 설치",
   "방법"; ("how does X work" asks for a mechanism: conceptual);
4. ``conceptual``: what a thing is or why: "what is a/an ...", "explain", "why", 「とは」「って何」「なぜ」,
   "이란", "뜻", "왜";
5. ``factual``: everything else: who, when, where, status, and requests.
"""

from __future__ import annotations

import enum
import re

_I = re.IGNORECASE


class QueryType(enum.StrEnum):
    FACTUAL = "factual"
    CONCEPTUAL = "conceptual"
    PROCEDURAL = "procedural"
    TEMPORAL = "temporal"
    COMPARATIVE = "comparative"


_COMPARATIVE = {
    "en": re.compile(
        r"\b(?:vs\.?|versus|compare[ds]?|comparing|comparison|differences?\s+between|differ(?:s|ence)?\b|"
        r"(?:better|worse|faster|slower|cheaper|pricier|bigger|smaller|safer|easier|harder)\s+than|"
        r"(?:more|less)\s+\w+\s+than|which\s+(?:one\s+)?(?:is|are|was|would\s+be)\s+(?:better|faster|cheaper|best|"
        r"preferable|safer|easier)|pros\s+and\s+cons|trade-?offs?|similarities)\b"
        r"|\b(?:which|should\s+(?:i|we)\s+(?:use|pick|choose|go\s+with))\b[^?.!]*\bor\b", _I),
    "ja": re.compile(r"違い|比較|比べ|どっちが|どちらが|どっちの方|どちらの方|どっちを|どちらを|どっちがいい|"
                     r"より(?:も)?(?:いい|良い|速い|安い|高い|大きい|小さい|多い|少ない|便利|おすすめ|優れ)|"
                     r"\bvs\b|優劣|メリット.{0,4}デメリット|長所.{0,4}短所|より.{0,15}(?:ほう|方)が", _I),
    "ko": re.compile(r"차이|비교|장단점|어느\s?(?:쪽|게|것|거|걸)|뭐가\s?더|(?:가|이)\s?더\s?(?:나아|나은|좋아|"
                     r"좋은|빨라|빠른|싸|싼)|"
                     r"보다\s?(?:더|나은|좋|빠르|빠른|싸|싼|비싸|낫)|더\s?(?:낫|나아|나은)|\bvs\b", _I),
}
_RECENCY = {
    "en": re.compile(r"\b(?:recent|recently|lately|timeline|so\s+far|up\s+to\s+now|history\s+of)\b", _I),
    "ja": re.compile(r"最近|近頃|このごろ|これまで|今まで|履歴|経緯|推移"),
    "ko": re.compile(r"최근|요즘|요새|지금까지|이력|히스토리|추이"),
}
_PROCEDURAL = {
    "en": re.compile(
        r"\bhow\s+(?:do|can|should|would|could)\s+(?:i|we|you|one)\b(?!\s+(?:think|feel|know))|\bhow\s+to\b|"
        r"\bsteps?\s+(?:to|for)\b|\bstep[- ]by[- ]step\b|\bguide\s+(?:to|for|me)\b|\bwalk\s+me\s+through\b|"
        r"\binstructions?\b|\bprocedure\b|\bwhat(?:'s|’s|\s+is)\s+the\s+(?:best\s+|right\s+|easiest\s+)?way\s+to\b|"
        r"\bprocess\s+(?:for|of|to)\b|\btutorial\b", _I),
    "ja": re.compile(r"どうやって|どう.{0,8}(?:すれば|したら)|どのようにすれば|方を教え|方が(?:わから|知り)|"
                     r"方は[?？]|どのように(?:設定|作|や|使|登録|申請)|方法|手順|やり方|"
                     r"仕方|手続き|使い方|始め方|ステップ|するには|には(?:どう|何を)"),
    "ko": re.compile(r"어떻게\s?(?:하|해|설정|만들|설치|써|쓰|사용|신청|등록|바꾸|바꿔|변경|보내|찾|연결|시작|"
                     r"고치|고쳐)|방법|절차|"
                     r"순서|하는\s?법|사용법|설치법|가이드|단계별|매뉴얼|하려면"),
}
_CONCEPTUAL = {
    "en": re.compile(
        r"\bwhat(?:'s|’s|\s+is|\s+are)\s+(?:an?\s+)?(?!the\b|my\b|our\b|your\b|his\b|her\b|their\b|its\b|this\b|"
        r"that\b|these\b|those\b|it\b|up\b|new\b|next\b|left\b|due\b|wrong\b|happening\b|going\b|on\b|in\b|at\b|"
        r"for\b|today\b|tomorrow\b|there\b|\d)[A-Za-z][\w.+#-]*(?:\s+[a-z]+)?\s*\??\s*$"
        r"|\bwhat\s+(?:is|are)\s+an?\b|\bwhat\s+does\s+[\w\s.'-]{1,40}\s+mean\b|\bmeaning\s+of\b|\bexplain\b|"
        r"\bwhy\b|\bhow\s+does\s+[\w\s.'-]{1,40}\s+work\b|\bconcept\s+of\b|\bdefin(?:e|ition\s+of)\b|"
        r"\bwhat\s+do\s+you\s+mean\b|\bintuition\b", _I),
    "ja": re.compile(r"とは|って(?:何|なに|なん)(?![時日曜回人個件歳度])|意味(?:は|を|って|が)|なぜ|なんで|"
                     r"どうして|仕組み|概念|原理|"
                     r"定義|説明して|解説して|どういう(?:こと|意味|もの)"),
    "ko": re.compile(r"(?:이란|란)\s?(?:뭐|무엇|무슨)|(?:라는|이라는)\s?(?:게|건|것이|것은)\s?(?:뭐|무엇)|뜻|"
                     r"의미|왜|개념|원리|"
                     r"정의가|설명해|무엇인가|뭔지\s?설명|어떻게\s?(?:작동|동작|돌아가)"),
}


def classify(text: str, languages: frozenset[str], has_time: bool) -> QueryType:
    langs = [lang for lang in ("en", "ja", "ko") if lang in languages]
    if any(_COMPARATIVE[lang].search(text) for lang in langs):
        return QueryType.COMPARATIVE
    if has_time or any(_RECENCY[lang].search(text) for lang in langs):
        return QueryType.TEMPORAL
    if any(_PROCEDURAL[lang].search(text) for lang in langs):
        return QueryType.PROCEDURAL
    if any(_CONCEPTUAL[lang].search(text) for lang in langs):
        return QueryType.CONCEPTUAL
    return QueryType.FACTUAL


_URGENT = re.compile(
    r"\b(?:urgent(?:ly)?|asap|immediately|critical|important|emergency|deadline|blocker|blocking|outage|"
    r"(?:prod|production|site|server)\s+(?:is\s+)?down|right\s+now)\b|至急|緊急|急ぎ|急いで|重要|今すぐ|締切|"
    r"締め切り|障害|"
    r"긴급|급해|급한|급하게|중요|당장|마감|장애|빨리", _I)
_SMALL_TALK = re.compile(
    r"^\W*(?:thanks?(?:\s+you)?|thx|ok(?:ay)?|cool|great|nice|lol|haha|hi|hello|hey|good\s+(?:morning|night)|bye|"
    r"ありがとう(?:ございます)?|了解(?:です)?|おはよう(?:ございます)?|こんにちは|お疲れ(?:様です)?|なるほど|はい|うん|"
    r"고마워(?:요)?|감사(?:합니다|해요)?|네|응|ㅇㅋ|ㅋ+|ㅎ+|안녕(?:하세요)?|알겠(?:어|습니다|어요))\W*$", _I)


def importance(text: str, n_entities: int, has_time: bool, is_ask: bool) -> float:
    """A 0..1 score of how much the message matters to recall: urgency, named things, a time scope, a
    question or request raise it; small talk ("thanks", 「了解」, "ㅋㅋ") lowers it."""
    if not text.strip():
        return 0.0
    score = 0.4
    if _SMALL_TALK.match(text):
        return 0.1
    if _URGENT.search(text):
        score += 0.3
    if n_entities:
        score += 0.1
    if has_time:
        score += 0.1
    if is_ask:
        score += 0.1
    return round(min(score, 1.0), 2)
