"""Time ranges in three languages: conventions ([start, end), Monday weeks, most recent past month) and
hard negatives (dates inside identifiers, "May" the name, 「この前提」, "we")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memroute.analysis import FUZZY_RECENT_DAYS, analyze

NOW = datetime(2025, 3, 12, 15, 0, tzinfo=UTC)  # Wednesday


def d(y: int, m: int, day: int) -> datetime:
    return datetime(y, m, day, tzinfo=UTC)


@pytest.mark.parametrize(("text", "start", "end"), [
    ("what did I do yesterday", d(2025, 3, 11), d(2025, 3, 12)),
    ("today's agenda", d(2025, 3, 12), d(2025, 3, 13)),
    ("notes from last week", d(2025, 3, 3), d(2025, 3, 10)),
    ("this month's tickets", d(2025, 3, 1), d(2025, 4, 1)),
    ("signups in January", d(2025, 1, 1), d(2025, 2, 1)),
    ("what we shipped in May", d(2024, 5, 1), d(2024, 6, 1)),  # the most recent May not in the future
    ("revenue for January 2025", d(2025, 1, 1), d(2025, 2, 1)),
    ("the meeting on March 3", d(2025, 3, 3), d(2025, 3, 4)),
    ("errors on 2025-02-14", d(2025, 2, 14), d(2025, 2, 15)),
    ("deploys in the past 7 days", d(2025, 3, 6), d(2025, 3, 13)),
    ("3 days ago", d(2025, 3, 9), d(2025, 3, 10)),
    ("two weeks ago", d(2025, 2, 24), d(2025, 3, 3)),
    ("last Friday", d(2025, 3, 7), d(2025, 3, 8)),
    ("next Monday", d(2025, 3, 17), d(2025, 3, 18)),
    ("last weekend", d(2025, 3, 8), d(2025, 3, 10)),
    ("in 2024", d(2024, 1, 1), d(2025, 1, 1)),
    ("先週の会議", d(2025, 3, 3), d(2025, 3, 10)),
    ("昨日の売上", d(2025, 3, 11), d(2025, 3, 12)),
    ("2025年1月の売上", d(2025, 1, 1), d(2025, 2, 1)),
    ("3日前のメール", d(2025, 3, 9), d(2025, 3, 10)),
    ("三日前の日報", d(2025, 3, 9), d(2025, 3, 10)),
    ("先月の電気代", d(2025, 2, 1), d(2025, 3, 1)),
    ("先週の金曜日", d(2025, 3, 7), d(2025, 3, 8)),
    ("지난주 회의록", d(2025, 3, 3), d(2025, 3, 10)),
    ("어제 매출", d(2025, 3, 11), d(2025, 3, 12)),
    ("2025년 1월 매출", d(2025, 1, 1), d(2025, 2, 1)),
    ("이틀 전에 받은 문자", d(2025, 3, 10), d(2025, 3, 11)),
    ("다음 주로 하자", d(2025, 3, 17), d(2025, 3, 24)),
    ("지난 7일간 배포 기록", d(2025, 3, 6), d(2025, 3, 13)),
])
def test_resolved_ranges(text: str, start: datetime, end: datetime) -> None:
    tr = analyze(text, now=NOW).time_range
    assert tr is not None, text
    assert (tr.start, tr.end) == (start, end)
    assert tr.expression and not tr.fuzzy


def test_last_week_crosses_the_year() -> None:
    tr = analyze("last week", now=datetime(2025, 1, 6, 9, 0, tzinfo=UTC)).time_range
    assert tr is not None and (tr.start, tr.end) == (d(2024, 12, 30), d(2025, 1, 6))


@pytest.mark.parametrize("text", ["the other day", "この前のあれ", "지난번에 말한 거", "recently", "最近どう？",
                                  "요즘"])
def test_fuzzy_recent(text: str) -> None:
    tr = analyze(text, now=NOW).time_range
    assert tr is not None and tr.fuzzy
    assert (tr.end - tr.start).days == FUZZY_RECENT_DAYS


@pytest.mark.parametrize("text", [
    "we should talk", "Fix bug-20250115 in log_2025-01-15.txt", "May I ask a favor?", "Ask May to review it",
    "This may take a while", "Is the monday.com integration working?", "Sunday Riley skincare",
    "この前提で考えると", "この前後の文脈", "日曜大工の道具", "v2024.12のリリースノート", "오늘날의 교육",
    "내일배움카드 신청", "일요일마다 청소", "3전 2선승제", "Order 2024 units",
])
def test_no_time_range(text: str) -> None:
    assert analyze(text, now=NOW).time_range is None


def test_multiple_expressions_are_joined() -> None:
    tr = analyze("Compare last month with this month", now=NOW).time_range
    assert tr is not None and (tr.start, tr.end) == (d(2025, 2, 1), d(2025, 4, 1))
    assert "last month" in tr.expression and "this month" in tr.expression
