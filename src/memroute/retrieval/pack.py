"""Seed 001's ``[EPISODE_EVIDENCE]`` memory pack, in the conversation's language, within a budget.

    [EPISODE_EVIDENCE]
    以下は現在の会話に関連する過去のやりとりです。

    [2024-12-01] ユーザー: 「今週中に完成させたい」
    パートナー: 「締切は金曜日でしたね。サポートしますよ」
    → 関連: 「締切」に言及

Only memories judged high or medium go in, best first; a memory replaced by a newer one of the pack
(a fact that changed) is kept, with a note after its date: ``[2024-03-02 (superseded by a newer memory
above)]``. The budget counts characters, or tokens
estimated as one per CJK character and one per four other characters (what chat-model tokenizers
average); a memory that does not fit whole is cut with an ellipsis if at least 80 characters of it fit,
otherwise left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

HEADER = "[EPISODE_EVIDENCE]"
_TEXT = {
    "en": ("The following past exchanges relate to the current conversation.", "User", "Partner", "Relevant"),
    "ja": ("以下は現在の会話に関連する過去のやりとりです。", "ユーザー", "パートナー", "関連"),
    "ko": ("다음은 현재 대화와 관련된 과거의 대화입니다.", "사용자", "파트너", "관련"),
}
SUPERSEDED = {"en": "superseded by a newer memory above", "ja": "上の新しい記憶で更新済み",
              "ko": "위의 더 새로운 기억으로 대체됨"}
_QUOTES = {"en": ("\u201c", "\u201d"), "ja": ("「", "」"), "ko": ("\u201c", "\u201d")}
MIN_CUT = 80


@dataclass(frozen=True, slots=True)
class PackEntry:
    occurred_at: datetime | None
    text: str
    reply: str | None
    speaker: str | None
    reason: str
    superseded: bool = False
    """A newer memory in the pack replaces this one: it is printed with a note saying so."""


def estimate_tokens(text: str) -> int:
    cjk = sum(1 for ch in text if ord(ch) >= 0x2E80)
    return cjk + (len(text) - cjk + 3) // 4


def render(entries: Sequence[PackEntry], language: str, max_chars: int | None = 2000,
           max_tokens: int | None = None) -> str:
    """The pack, or an empty string when nothing is worth injecting."""
    if not entries:
        return ""
    intro, user, partner, rel = _TEXT.get(language, _TEXT["en"])
    q_open, q_close = _QUOTES.get(language, _QUOTES["en"])

    def cost(text: str) -> int:
        return estimate_tokens(text) if max_tokens is not None else len(text)

    budget = max_tokens if max_tokens is not None else max_chars if max_chars is not None else 10**12
    out = f"{HEADER}\n{intro}\n"
    if cost(out) > budget:
        return ""
    for e in entries:
        date = e.occurred_at.strftime("%Y-%m-%d") if e.occurred_at else "----------"
        if e.superseded:
            date += f" ({SUPERSEDED.get(language, SUPERSEDED['en'])})"
        who = e.speaker or user
        block = f"\n[{date}] {who}: {q_open}{e.text}{q_close}\n"
        if e.reply:
            block += f"{partner}: {q_open}{e.reply}{q_close}\n"
        block += f"→ {rel}: {e.reason}\n"
        room = budget - cost(out)
        if cost(block) <= room:
            out += block
            continue
        head, tail = f"\n[{date}] {who}: {q_open}", f"…{q_close}\n→ {rel}: {e.reason}\n"
        lo, hi = 0, len(e.text)  # the longest prefix that fits (binary search: the cost is monotone)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if cost(head + e.text[:mid] + tail) <= room:
                lo = mid
            else:
                hi = mid - 1
        if lo >= MIN_CUT:
            out += head + e.text[:lo] + tail
        break
    return out if "\n[" in out else ""
