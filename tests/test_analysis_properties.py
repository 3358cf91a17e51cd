"""Invariants: ``analyze`` never raises on any Unicode string, and its time ranges have start <= end."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memroute.analysis import analyze
from memroute.text import language_spans

NOW = datetime(2025, 3, 12, 15, 0, tzinfo=UTC)
# Text made of the pieces the rules look at, so the search reaches them, plus any Unicode at all.
PIECES = ["yesterday", "last week", "in May", "2025年1月", "先週", "3日前", "この前", "지난주", "어제", "2025년 1월",
          "it", "that", "それ", "あれ", "그거", "じゃあ", "그럼", "by the way", "ところで", "그런데", "?", "？", " ",
          "「", "」", '"', "'", "Project X", "プロジェクトX", "99999 days ago", "9999年99月99日", "31 February",
          "と", "이랑", " and who ", "\n", "\x00"]
text_strategy = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=5)), max_size=40).map("".join),
)
history_strategy = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                                   "text": text_strategy}), max_size=4)
now_strategy = st.datetimes(min_value=datetime(1901, 1, 1), max_value=datetime(2199, 12, 1),
                            timezones=st.just(UTC))


@settings(max_examples=150, deadline=None)
@given(text=text_strategy, history=history_strategy, now=now_strategy)
def test_never_raises_and_ranges_are_ordered(text: str, history: list[dict[str, str]], now: datetime) -> None:
    a = analyze(text, history, now)
    if a.time_range is not None:
        assert a.time_range.start <= a.time_range.end
    a.to_dict()


@settings(max_examples=300, deadline=None)
@given(text=text_strategy)
def test_the_spans_are_those_of_the_tokens_the_recall_reuses(text: str) -> None:
    # the analysis takes its tokens from the cache the recall's later steps read (analyze_nfkc), which splits
    # the text by language_spans: its own spans (a shortcut for ASCII text) must be the same
    a = analyze(text)
    assert a.spans == language_spans(a.text)


def test_one_hundred_thousand_characters_of_any_unicode() -> None:
    rng = random.Random(20250312)
    alphabet = [chr(c) for c in range(0x20, 0x3000)] + [chr(c) for c in range(0xAC00, 0xAC00 + 500)] + PIECES
    text = "".join(rng.choice(alphabet) for _ in range(60_000))
    text = (text + "".join(rng.choice(PIECES) for _ in range(20_000)))[:100_000]
    a = analyze(text, [{"role": "user", "text": text[:5000]}], NOW)
    assert a.time_range is None or a.time_range.start <= a.time_range.end


def test_extreme_reference_times() -> None:
    for now in (datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
                NOW + timedelta(days=1)):
        a = analyze("last week, next year, 3日前, 내년, in January, tomorrow", now=now)
        assert a.time_range is None or a.time_range.start <= a.time_range.end
