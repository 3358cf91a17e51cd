"""Seed 002's risk level, exploration requirements and investigation guidance.

Risk, first rule that applies:

- HIGH: a desired action without an observed issue (a change nobody said is needed); MODIFY without a
  target feature or without an observed issue; IMPLEMENT with no slot at all.
- LOW: INVESTIGATE or QUESTION (nothing will be changed), or every slot is known.
- MEDIUM: IMPLEMENT, or some slots are unknown (seed 002's example: MODIFY with the feature, trigger and
  issue but no desired action is MEDIUM).

The seed's own ``assess_risk_level`` stops at HIGH / LOW; its table and example define MEDIUM, which is
what is implemented here. Its table also lists "MODIFY + issue unknown" as HIGH where its code checks the
target feature: both are HIGH here (changing code when nobody said what is wrong, or where, is the risk).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memroute.analysis import Intent, QueryFrame


class RiskLevel(enum.StrEnum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


@dataclass(frozen=True, slots=True)
class Requirements:
    """How much exploration must back an understanding before the session may be READY."""

    symbols: int
    entry_points: int
    files: int
    patterns: int

    def to_dict(self) -> dict[str, int]:
        return {"symbols": self.symbols, "entry_points": self.entry_points, "files": self.files,
                "patterns": self.patterns}


REQUIREMENTS = {
    RiskLevel.HIGH: Requirements(symbols=5, entry_points=2, files=4, patterns=2),
    RiskLevel.MEDIUM: Requirements(symbols=3, entry_points=1, files=2, patterns=1),
    RiskLevel.LOW: Requirements(symbols=1, entry_points=0, files=1, patterns=0),
}


def assess_risk(frame: QueryFrame, intent: Intent) -> tuple[RiskLevel, str]:
    """The risk level and the rule that decided it."""
    filled = {name for name in ("target_feature", "trigger_condition", "observed_issue", "desired_action")
              if getattr(frame, name) is not None}
    if "desired_action" in filled and "observed_issue" not in filled:
        return RiskLevel.HIGH, "a desired action is stated but no observed issue motivates it"
    if intent == Intent.MODIFY and "target_feature" not in filled:
        return RiskLevel.HIGH, "MODIFY without a target feature: what would be changed is unknown"
    if intent == Intent.MODIFY and "observed_issue" not in filled:
        return RiskLevel.HIGH, "MODIFY without an observed issue: nothing says what is wrong now"
    if intent == Intent.IMPLEMENT and not filled:
        return RiskLevel.HIGH, "IMPLEMENT with nothing known about what to build"
    if intent in (Intent.INVESTIGATE, Intent.QUESTION):
        return RiskLevel.LOW, f"{intent.value}: nothing will be changed"
    if len(filled) == 4:
        return RiskLevel.LOW, "every slot is known"
    if intent == Intent.IMPLEMENT:
        return RiskLevel.MEDIUM, "IMPLEMENT with part of the request known"
    return RiskLevel.MEDIUM, "some slots are unknown: " + ", ".join(sorted(frame.missing_slots))


# Seed 002's INVESTIGATION_HINTS, in the three languages of the product.
_HINTS: dict[str, dict[str, str]] = {
    "target_feature": {
        "ja": "対象となる機能やモジュールが特定できません。",
        "en": "The feature or module concerned is not identified.",
        "ko": "대상 기능이나 모듈을 특정할 수 없습니다.",
    },
    "observed_issue": {
        "ja": "修正の動機となる『現状の問題』が不明です。",
        "en": "The current problem that motivates the change is unknown.",
        "ko": "수정의 동기가 되는 '현재의 문제'가 불명확합니다.",
    },
    "trigger_condition": {
        "ja": "問題が発生する再現条件が特定されていません。",
        "en": "The conditions that reproduce the problem are not identified.",
        "ko": "문제가 발생하는 재현 조건이 특정되지 않았습니다.",
    },
    "desired_action": {
        "ja": "期待する修正方針が不明です。",
        "en": "The expected change is unknown.",
        "ko": "기대하는 수정 방침이 불명확합니다.",
    },
}
TOOLS_BY_SLOT: dict[str, tuple[str, ...]] = {
    "target_feature": ("query", "get_symbols", "analyze_structure"),
    "observed_issue": ("search_text", "query"),
    "trigger_condition": ("search_text", "find_definitions"),
    "desired_action": ("find_references", "analyze_structure"),
}
BASELINE_TOOLS = ("find_definitions", "find_references")
"""Recommended when no slot is missing: confirm the symbols and what uses them."""


def guidance(missing: Sequence[str], language: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Per missing slot a hint (in the request's language) and its tools, and all tools in order."""
    lang = language if language in ("ja", "ko") else "en"
    items = [{"slot": slot, "hint": _HINTS[slot][lang], "tools": list(TOOLS_BY_SLOT[slot])}
             for slot in missing if slot in _HINTS]
    tools = list(dict.fromkeys(t for item in items for t in item["tools"])) or list(BASELINE_TOOLS)
    return items, tools
