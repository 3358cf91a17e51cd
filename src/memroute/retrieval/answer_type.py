"""The kind of answer a question asks for, and whether a memory holds one: a feature of the reranker.

"Where do we live now?" wants a place, "When is the dentist?" a date or time, "Who is my manager?" a
person, "How many cats do we have?" a number; in Japanese どこ / いつ / 誰 / 何人, in Korean 어디 / 언제 /
누구 / 몇. Among memories that share the question's subject, the one that holds that kind of thing is
more likely the answer ("we bought a flat in Kyoto" for "where", not "we love the neighbourhood cafes").
Both sides are read by patterns (no tagger: this runs on every candidate of every recall, some
microseconds a memory); a memory's place, time, person or number is a cue word or form of that kind, so the
feature is a hint for the learned reranker, not a rule.
"""

from __future__ import annotations

import re
from typing import Literal

AnswerType = Literal["place", "time", "person", "number"]
_I = re.IGNORECASE

_ASKS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    ("time", re.compile(
        r"\bwhen\b|\bwhat\s+(?:time|day|date|year|month)\b|\bwhich\s+(?:day|date|year|month)\b|\bhow\s+long\s+ago\b"
        r"|いつ|何時|何日|何月|何年|何曜|언제|무슨\s?요일|몇\s?시", _I)),
    ("number", re.compile(
        r"\bhow\s+(?:many|much|old|long|often|far|tall|big)\b|\bwhat\s+(?:age|number|size|price)\b"
        r"|何人|何歳|何才|何個|何匹|何回|何本|何枚|何台|何キロ|何円|何度|いくつ|いくら|どのくらい|どれくらい|どれぐらい"
        r"|몇|얼마|며칠", _I)),
    ("place", re.compile(
        r"\bwhere\b|\bwhich\s+(?:city|country|town|place|neighbou?rhood|street|hospital|school|restaurant|station)\b"
        r"|\bwhat\s+(?:city|country|town|address|neighbou?rhood)\b"
        r"|どこ|どちらに|何県|何市|何区|어디|어느\s?(?:도시|나라|동네|지역|곳|병원|학교|역)", _I)),
    ("person", re.compile(r"\bwho(?:m|se)?\b|誰|だれ|どなた|누구|누가", _I)),
)
_MONTHS_DAYS = frozenset("""january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split())
_WORDS: dict[AnswerType, frozenset[str]] = {
    "place": frozenset("""live lives lived living moved move city town village apartment flat house home street
        neighborhood neighbourhood office downtown suburb suburbs country station hospital school campus
        abroad""".split()),
    "time": _MONTHS_DAYS | frozenset("""yesterday today tonight tomorrow weekend weekends morning mornings evening
        evenings night nights noon week month year ago since until every daily weekly""".split()),
    "person": frozenset("""mom mum dad mother father wife husband son daughter sister brother friend friends boss
        manager colleague colleagues coworker coworkers partner girlfriend boyfriend kid kids baby grandma grandpa
        aunt uncle cousin doctor teacher neighbor neighbour parents""".split()),
    "number": frozenset("""one two three four five six seven eight nine ten eleven twelve twenty thirty hundred
        twice dozen couple single both""".split()),
}
"""English words that hold a thing of each kind (a memory's words are looked up in a set: one pass of a
word pattern over the text, where a case-insensitive alternation cost ~30 us a memory)."""
_WORD = re.compile(r"[a-z]+")
_LATIN: dict[AnswerType, re.Pattern[str]] = {
    "place": re.compile(r"\b(?:[Ii]n|[Aa]t|[Tt]o|[Ff]rom|[Nn]ear|[Ii]nto) (?!(?:January|February|March|April|May|June|"
                        r"July|August|September|October|November|December|Monday|Tuesday|Wednesday|Thursday|"
                        r"Friday|Saturday|Sunday)\b)[A-Z][a-z]+"),
    "time": re.compile(r"\d(?::\d\d|\s?(?:[ap]m|[AP]M)\b|\d{3}\b)"),
    "person": re.compile(r"(?<![.!?:] )(?<!^)\b[A-Z][a-z]{2,}"),
    "number": re.compile(r"\d"),
}
"""Forms in Latin script beyond single words: a capitalised place after a preposition, clock times and
years (four digits), a capitalised name inside a sentence, digits. Each pattern starts with few branches:
Python's ``re`` tries every branch at every position."""
_CJK: dict[AnswerType, re.Pattern[str]] = {
    "place": re.compile(r"住[んむみ]|引っ越|[都道府県市区町村駅]|近所|実家|マンション|アパート|一軒家|オフィス|会社"
                        r"|살[아고았는]|이사|[가-힣][시구동역](?:\s|에|로|으로|$)|동네|근처|아파트|집|회사|사무실"),
    "time": re.compile(r"昨日|今日|明日|毎[日週朝晩月年]|[先今来]週|[先今来]月|去年|今年|来年|週末"
                       r"|[月火水木金土日]曜|午前|午後"
                       r"|\d\s?[時日月年시일월년]|어제|오늘|내일|매[일주달년]|지난\s?[주달해]|다음\s?[주달]|이번\s?[주달]|주말"
                       r"|[월화수목금토일]요일|오전|오후"),
    "person": re.compile(r"さん|くん|ちゃん|先生|[母父妻夫兄姉弟妹娘]|息子|友達|友人|上司|同僚|彼氏|彼女|祖母|祖父"
                         r"|씨|님|엄마|아빠|어머니|아버지|아내|남편|아들|딸|친구|상사|동료|형|누나|언니|오빠|동생|선생"),
    "number": re.compile(r"[一二三四五六七八九十百千万両][人匹個回本枚台歳つ]|ひとり|ふたり"
                         r"|(?:한|두|세|네|다섯|여섯|일곱|여덟|아홉|열|스무)\s?[명개마번살시달잔권대]|하나|둘|셋"),
}
"""Japanese and Korean forms, read only in a text that is not all ASCII."""
TYPES: tuple[AnswerType, ...] = ("place", "time", "person", "number")


def asked_type(question: str) -> AnswerType | None:
    """What kind of answer ``question`` asks for, or None (the first kind whose pattern matches: "what
    time" asks for a time, "how many days" for a number)."""
    for kind, pattern in _ASKS:
        if pattern.search(question):
            return kind
    return None


def holds(kind: AnswerType, text: str) -> bool:
    """Whether ``text`` (a memory's) holds a thing of ``kind``."""
    if _LATIN[kind].search(text) is not None or not _WORDS[kind].isdisjoint(_WORD.findall(text.casefold())):
        return True
    return not text.isascii() and _CJK[kind].search(text) is not None
