"""Intent and question category of seed 002, by rules in English, Japanese and Korean.

Intent, first match wins: ``MODIFY`` (change existing code: "fix", "refactor", 「直して」「修正」, "고쳐",
"수정"), ``IMPLEMENT`` (make something new: "implement", "add", "create", 「実装」「追加して」, "구현",
"추가해"), ``INVESTIGATE`` (find or understand code: "where is", "find", "why does", 「どこで」「調べて」,
"어디서", "찾아"), otherwise ``QUESTION``. English verbs count only as requests (at the start, or after
"please", "can you", "I want to"), so "why does adding a user fail?" is not IMPLEMENT.

Question category, first match wins: ``D_IMPACT`` (what a change affects), ``B_REFERENCE`` (where a
thing is used or called), ``A_SYNTAX`` (arguments, types, definitions), ``C_SEMANTIC`` (why, what for);
``None`` when the message asks none of these.
"""

from __future__ import annotations

import enum
import re

_I = re.IGNORECASE


class Intent(enum.StrEnum):
    IMPLEMENT = "IMPLEMENT"
    MODIFY = "MODIFY"
    INVESTIGATE = "INVESTIGATE"
    QUESTION = "QUESTION"


class QuestionCategory(enum.StrEnum):
    A_SYNTAX = "A_SYNTAX"
    B_REFERENCE = "B_REFERENCE"
    C_SEMANTIC = "C_SEMANTIC"
    D_IMPACT = "D_IMPACT"


_EN_REQ = (r"(?:^|[.!?;]\s+|\b(?:please|pls|can\s+you|could\s+you|would\s+you|i\s+(?:want|need)\s+(?:you\s+)?to|"
           r"let'?s|help\s+me|we\s+(?:need|should)\s+to|go\s+ahead\s+and)\s+)")
_INTENTS: tuple[tuple[Intent, dict[str, re.Pattern[str]]], ...] = (
    (Intent.MODIFY, {
        "en": re.compile(_EN_REQ + r"(?:fix|change|modify|update|refactor|rename|remove|delete|replace|bump|patch|"
                         r"rewrite|clean\s+up|migrate|revert|correct|adjust|tweak|optimi[sz]e|speed\s+up)\b", _I),
        "ja": re.compile(r"(?:直し|直す|修正|変更|削除|置き換え|置換|リファクタ|書き換え|差し替え|更新|改善|移行|消し)"
                         r"(?:て|たい|してほしい|して|を|お願い|すべき|できる)"),
        "ko": re.compile(r"(?:고쳐|고치|수정|변경|삭제|바꿔|바꾸|리팩터|리팩토링|교체|업데이트|개선|지워)"),
    }),
    (Intent.IMPLEMENT, {
        "en": re.compile(_EN_REQ + r"(?:implement|add|create|build|write|make|set\s+up|introduce|support|generate|"
                         r"scaffold|develop)\b", _I),
        "ja": re.compile(r"(?:実装|追加|作成|作っ|作り|新規作成|導入|対応|書い)(?:て|たい|してほしい|して|を|"
                         r"お願い)|を作って"),
        "ko": re.compile(r"(?:구현|추가|만들어|만들|작성|생성|도입|개발)(?:해|하|좀|줘|주세요|하고|할)"),
    }),
    (Intent.INVESTIGATE, {
        "en": re.compile(r"\b(?:where\s+(?:is|are|does|do)|find|look\s+into|investigate|trace|debug|figure\s+out|"
                         r"why\s+(?:does|is|did|do)|which\s+(?:file|function|module|class|service)|who\s+calls|"
                         r"what\s+calls|track\s+down|check\s+why|diagnose|root\s+cause|what\s+(?:happens|breaks)\s+if|"
                         r"impact\s+of)\b", _I),
        "ja": re.compile(r"どこで|どこに|調べ|調査|原因|影響|確認して|探して|特定|追って|なぜ.{0,20}(?:する|しない|"
                         r"なる|出る)"),
        "ko": re.compile(r"어디서|어디에|찾아|조사|원인|영향|확인해|추적|디버그|왜\s.{0,20}(?:나|안|돼|되)"),
    }),
)
_CATEGORIES: tuple[tuple[QuestionCategory, dict[str, re.Pattern[str]]], ...] = (
    (QuestionCategory.D_IMPACT, {
        "en": re.compile(r"\b(?:impact|affect(?:s|ed)?|break(?:s)?\s+(?:if|when)|what\s+(?:happens|breaks)\s+if|"
                         r"side\s+effects?|blast\s+radius|depend(?:s|ent)?\s+on)\b", _I),
        "ja": re.compile(r"影響|変更したら|変えたら|壊れ|波及|依存"),
        "ko": re.compile(r"영향|바꾸면|변경하면|수정하면|깨지|의존"),
    }),
    (QuestionCategory.B_REFERENCE, {
        "en": re.compile(r"\b(?:where\s+(?:is|are)\s+[\w.()]+\s+(?:used|called|referenced|imported)|who\s+calls|"
                         r"what\s+calls|callers?\b|usages?\b|references?\s+to|used\s+by|called\s+from|"
                         r"where\s+.*\b(?:used|called))\b", _I),
        "ja": re.compile(r"どこで(?:使|呼|参照)|呼び出し元|参照(?:箇所|元|して)|使用箇所|使われて"),
        "ko": re.compile(r"어디서\s?(?:사용|호출|쓰|참조)|호출하는\s?곳|참조|사용처|쓰이는\s?곳|호출\s?위치"),
    }),
    (QuestionCategory.A_SYNTAX, {
        "en": re.compile(r"\b(?:arguments?|parameters?|params?|signature|return\s+type|returns?\s+what|type\s+of|"
                         r"what\s+type|defined|definition|syntax|overloads?|fields?\s+of)\b", _I),
        "ja": re.compile(r"引数|戻り値|返り値|型|定義|シグネチャ|構文|書き方|パラメータ"),
        "ko": re.compile(r"인자|인수|매개변수|파라미터|반환|리턴|타입|정의|시그니처|문법"),
    }),
    (QuestionCategory.C_SEMANTIC, {
        "en": re.compile(r"\b(?:why|purpose|what\s+(?:does|is)\s+[\w.()]+\s+(?:do|for)|design|intent|responsib|"
                         r"what\s+is\s+[\w.()]+\s+for|role\s+of)\b", _I),
        "ja": re.compile(r"なぜ|どうして|目的|設計|役割|意図|何をして|何のため"),
        "ko": re.compile(r"왜|목적|설계|역할|의도|무슨\s?일을|뭘\s?하는"),
    }),
)


def classify_intent(text: str, languages: frozenset[str]) -> Intent:
    for intent, patterns in _INTENTS:
        if any(patterns[lang].search(text) for lang in ("en", "ja", "ko") if lang in languages):
            return intent
    return Intent.QUESTION


def question_category(text: str, languages: frozenset[str]) -> QuestionCategory | None:
    for category, patterns in _CATEGORIES:
        if any(patterns[lang].search(text) for lang in ("en", "ja", "ko") if lang in languages):
            return category
    return None
