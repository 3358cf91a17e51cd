"""Realistic-looking multilingual memories for benchmarks (never for quality figures).

Each memory is a sentence from one of many en / ja / ko templates about work, travel, family and code,
filled from word lists by a seeded random generator, with a date spread over two years. The mix is 50 %
English, 25 % Japanese, 25 % Korean, so that BM25 posting lists and vector neighbourhoods look like a real
multilingual assistant's store rather than random noise.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

_EN = (
    "{person} said the {project} launch slipped to {month} because of the {thing} review.",
    "Remind me to call {person} about the {thing} before {day}.",
    "I booked a {adj} hotel in {city} for the {event} next {month}.",
    "The {project} dashboard shows {number} failed jobs after the {thing} deploy.",
    "{person} prefers {food} for the team dinner on {day}.",
    "We agreed that {person} owns the {thing} migration for {project}.",
    "My flight to {city} leaves on {day} morning; window seat, {food} meal.",
    "The bug in {code} happens when the {thing} field is empty.",
    "Summarise the {event} notes and send them to {person}.",
    "{person} recommended the book about {thing} that we discussed in {city}.",
)
_JA = (
    "{ja_person}さんが{ja_project}のリリースは{ja_month}にずれると言っていた。",
    "{ja_day}までに{ja_person}さんに{ja_thing}の件で連絡する。",
    "{ja_city}の{ja_adj}ホテルを{ja_event}のために予約した。",
    "{ja_project}のテストで{number}件の失敗が出ている。原因は{ja_thing}らしい。",
    "{ja_person}さんは{ja_food}が好きなので、打ち上げはそこにしよう。",
    "{ja_thing}の移行は{ja_person}さんが担当することになった。",
)
_KO = (
    "{ko_person} 씨가 {ko_project} 출시가 {ko_month}로 미뤄졌다고 했다.",
    "{ko_day}까지 {ko_person} 씨에게 {ko_thing} 건으로 연락해야 한다.",
    "{ko_city}에 있는 {ko_adj} 호텔을 {ko_event} 때문에 예약했다.",
    "{ko_project} 테스트에서 실패가 {number}건 나왔다. 원인은 {ko_thing}인 것 같다.",
    "{ko_person} 씨는 {ko_food}를 좋아해서 회식은 거기로 하자.",
    "{ko_thing} 이전 작업은 {ko_person} 씨가 맡기로 했다.",
)
_WORDS: dict[str, tuple[str, ...]] = {
    "person": ("Alice", "Kenji", "Min-jun", "Priya", "Tom", "Sofia", "Yuki", "Ji-woo", "Carlos", "Emma"),
    "project": ("Atlas", "Orion", "Project X", "Helios", "Nimbus", "Quartz", "Beacon", "Falcon"),
    "month": ("January", "February", "March", "April", "June", "July", "September", "October", "December"),
    "thing": ("security", "payment API", "database", "design", "budget", "onboarding", "search index", "billing",
              "login", "analytics", "cache", "release checklist"),
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
    "adj": ("quiet", "cheap", "central", "modern", "small", "family-run"),
    "city": ("Osaka", "Seoul", "Busan", "Kyoto", "Berlin", "Lisbon", "Toronto", "Sapporo"),
    "event": ("conference", "offsite", "wedding", "workshop", "hackathon", "board meeting"),
    "food": ("sushi", "ramen", "Korean barbecue", "vegetarian", "tacos", "pasta"),
    "code": ("LoginService", "PaymentGateway", "SearchIndexer", "ReportBuilder", "UserRepository"),
    "ja_person": ("田中", "佐藤", "鈴木", "高橋", "伊藤", "渡辺"),
    "ja_project": ("プロジェクトX", "アトラス", "新規サイト", "社内ポータル", "決済基盤"),
    "ja_month": ("1月", "3月", "4月", "7月", "9月", "12月"),
    "ja_day": ("月曜日", "水曜日", "金曜日", "来週", "明日"),
    "ja_thing": ("予算", "デザインレビュー", "データベース", "請求", "ログイン", "検索"),
    "ja_city": ("大阪", "京都", "札幌", "福岡", "横浜"),
    "ja_adj": ("静かな", "安い", "駅に近い", "新しい"),
    "ja_event": ("学会", "結婚式", "研修", "出張"),
    "ja_food": ("寿司", "ラーメン", "焼肉", "天ぷら"),
    "ko_person": ("민준", "서연", "지우", "하준", "수빈"),
    "ko_project": ("아틀라스", "신규 앱", "결제 시스템", "사내 포털"),
    "ko_month": ("1월", "3월", "6월", "9월", "12월"),
    "ko_day": ("월요일", "수요일", "금요일", "다음 주", "내일"),
    "ko_thing": ("예산", "디자인 리뷰", "데이터베이스", "결제", "로그인", "검색"),
    "ko_city": ("서울", "부산", "제주", "대구", "인천"),
    "ko_adj": ("조용한", "저렴한", "역에서 가까운", "새로운"),
    "ko_event": ("학회", "결혼식", "연수", "출장"),
    "ko_food": ("삼겹살", "비빔밥", "김치찌개", "초밥"),
}
_START = datetime(2025, 1, 1, tzinfo=UTC)


def _fill(template: str, rng: random.Random) -> str:
    values = {k: rng.choice(v) for k, v in _WORDS.items()}
    values["number"] = str(rng.randint(2, 90))
    return template.format(**values)


def synthetic_memories(n: int, seed: int = 13, owners: int = 1, sessions: int = 200) -> Iterator[dict[str, Any]]:
    """``n`` memory dicts (``remember_many`` input) with owner, session, time and text."""
    rng = random.Random(seed)
    for i in range(n):
        r = rng.random()
        templates = _EN if r < 0.5 else _JA if r < 0.75 else _KO
        yield {
            "id": f"syn-{i}",
            "owner": f"owner-{i % owners}",
            "session": f"s-{rng.randrange(sessions)}",
            "kind": "episode" if rng.random() < 0.7 else "note",
            "occurred_at": _START + timedelta(minutes=rng.randrange(2 * 365 * 24 * 60)),
            "text": _fill(rng.choice(templates), rng),
        }


def synthetic_queries(n: int, seed: int = 7) -> list[str]:
    """Short queries in the same three languages, sharing vocabulary with the memories."""
    rng = random.Random(seed)
    shapes = ("{project} launch", "{person} {thing}", "hotel in {city}", "{thing} bug in {code}",
              "{ja_project}の進捗", "{ja_person}さんと{ja_thing}", "{ko_project} 출시", "{ko_person} 씨 {ko_thing}")
    return [_fill(rng.choice(shapes), rng) for _ in range(n)]
