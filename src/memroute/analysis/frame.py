"""The query frame of seed 002: slots extracted by someone else (an LLM), validated here against the text.

A slot is ``{"value": ..., "quote": ...}``. It is kept only if its quote occurs in the raw query and its
value fits its quote; otherwise it is rejected with the reason, so a hallucinated slot never reaches
routing. Both sides are compared after folding: Unicode NFKC (full-width letters and half-width kana),
case folding, and whitespace folding (runs of spaces become one; spaces next to Japanese or Korean
characters are dropped, since 「ログイン 機能」 and 「ログイン機能」 are the same words).

A value fits its quote when one contains the other, when most of the value's content words are in the
quote, when their character bigrams mostly agree (for Japanese and Korean), or through a short list of
cross-language synonyms (ログイン ~ login); seed 002's ``_is_semantically_consistent`` made concrete.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memroute.text import tokenize

SLOTS = ("target_feature", "trigger_condition", "observed_issue", "desired_action")


@dataclass(frozen=True, slots=True)
class Slot:
    value: str
    quote: str


@dataclass(frozen=True, slots=True)
class RejectedSlot:
    slot: str
    reason: str
    value: Any = None
    quote: Any = None


@dataclass(frozen=True, slots=True)
class QueryFrame:
    raw_query: str
    target_feature: Slot | None = None
    trigger_condition: Slot | None = None
    observed_issue: Slot | None = None
    desired_action: Slot | None = None

    @property
    def missing_slots(self) -> list[str]:
        return [name for name in SLOTS if getattr(self, name) is None]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"raw_query": self.raw_query}
        for name in SLOTS:
            slot = getattr(self, name)
            out[name] = None if slot is None else {"value": slot.value, "quote": slot.quote}
        return out


@dataclass(frozen=True, slots=True)
class FrameValidation:
    """The frame with the slots that passed, and every rejected slot with its reason."""

    frame: QueryFrame
    rejected: tuple[RejectedSlot, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.rejected

    def to_dict(self) -> dict[str, Any]:
        return {"frame": self.frame.to_dict(),
                "rejected": [{"slot": r.slot, "reason": r.reason} for r in self.rejected]}


_SPACES = re.compile(r"\s+")
_CJK = r"\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3\uff66-\uff9f"
_SPACE_NEAR_CJK = re.compile(rf"(?<=[{_CJK}]) | (?=[{_CJK}])")


def fold(text: str) -> str:
    """NFKC, case folding and whitespace folding: the form in which quotes are compared."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SPACES.sub(" ", text).strip()
    return _SPACE_NEAR_CJK.sub("", text)


_SYNONYMS: dict[str, tuple[str, ...]] = {
    "ログイン": ("login", "log in", "sign in", "signin", "auth"), "認証": ("auth", "authentication", "login"),
    "ユーザー": ("user", "account", "member"), "パスワード": ("password",), "エラー": ("error", "exception"),
    "ボタン": ("button",), "検索": ("search",), "設定": ("setting", "config"), "画面": ("screen", "page", "view"),
    "保存": ("save",), "削除": ("delete", "remove"), "追加": ("add",), "表示": ("show", "display"),
    "로그인": ("login", "log in", "sign in", "auth"), "인증": ("auth", "authentication"),
    "사용자": ("user", "account"), "비밀번호": ("password",), "에러": ("error",), "오류": ("error", "bug"),
    "버튼": ("button",), "검색": ("search",), "설정": ("setting", "config"), "화면": ("screen", "page"),
    "저장": ("save",), "삭제": ("delete", "remove"), "추가": ("add",),
}


def consistent(value: str, quote: str) -> bool:
    v, q = fold(value), fold(quote)
    if not v or not q:
        return False
    if v in q or q in v:
        return True
    v_tokens, q_tokens = set(tokenize(v)), set(tokenize(q))
    if v_tokens and len(v_tokens & q_tokens) / len(v_tokens) >= 0.5:
        return True
    if _bigram_dice(v, q) >= 0.5:
        return True
    for word, translations in _SYNONYMS.items():
        if (word in q and any(t in v for t in translations)) or (word in v and any(t in q for t in translations)):
            return True
    return False


def _bigram_dice(a: str, b: str) -> float:
    ga = {a[i:i + 2] for i in range(len(a) - 1)}
    gb = {b[i:i + 2] for i in range(len(b) - 1)}
    if not ga or not gb:
        return 0.0
    return 2 * len(ga & gb) / (len(ga) + len(gb))


def validate_frame(raw_query: str, extracted: Mapping[str, Any]) -> FrameValidation:
    """Keep the slots of ``extracted`` whose quote is in ``raw_query`` and whose value fits the quote.

    ``extracted`` maps slot names to ``{"value": str, "quote": str}`` or ``None`` (not found, not an
    error). Unknown slot names, malformed slots, quotes not in the query and values that do not fit
    their quote are rejected with the reason.
    """
    raw = raw_query if isinstance(raw_query, str) else ""
    folded_raw = fold(raw)
    kept: dict[str, Slot] = {}
    rejected: list[RejectedSlot] = []
    if not isinstance(extracted, Mapping):
        rejected.append(RejectedSlot("*", f"extracted must be a mapping of slots, not {type(extracted).__name__}"))
        return FrameValidation(QueryFrame(raw), tuple(rejected))
    for name, data in extracted.items():
        if name not in SLOTS:
            rejected.append(RejectedSlot(str(name), f"unknown slot (expected one of {', '.join(SLOTS)})"))
            continue
        if data is None:
            continue
        if not isinstance(data, Mapping):
            rejected.append(RejectedSlot(name, "malformed: expected {'value': ..., 'quote': ...}", data))
            continue
        value, quote = data.get("value"), data.get("quote")
        if not isinstance(quote, str) or not quote.strip():
            rejected.append(RejectedSlot(name, "no quote", value, quote))
        elif not isinstance(value, str) or not value.strip():
            rejected.append(RejectedSlot(name, "no value", value, quote))
        elif fold(quote) not in folded_raw:
            rejected.append(RejectedSlot(name, "quote not found in the query", value, quote))
        elif not consistent(value, quote):
            rejected.append(RejectedSlot(name, "value does not fit its quote", value, quote))
        else:
            kept[name] = Slot(value.strip(), quote.strip())
    return FrameValidation(QueryFrame(raw, **kept), tuple(rejected))
