"""``Memory.recall`` end to end on a real SQLite file with the real embedder, in en / ja / ko."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memroute import Memory
from memroute.cli import main
from memroute.memory import AsyncMemory
from memroute.observability import REGISTRY, exposition
from memroute.retrieval import RecallOptions, Strategy

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)  # a Wednesday; 先週 / last week is 9-15 June


def _seed(memory: Memory) -> None:
    memory.remember_many([
        {"id": "ja-x", "text": "プロジェクトXの締切が金曜日から来月に延期になった",
         "occurred_at": NOW - timedelta(days=6), "kind": "episode", "reply": "延期の理由も共有しておきますね"},
        {"id": "ja-x-old", "text": "プロジェクトXのキックオフをした", "occurred_at": NOW - timedelta(days=60)},
        {"id": "ja-lunch", "text": "先週の金曜日は田中さんとラーメンを食べた", "occurred_at": NOW - timedelta(days=5)},
        {"id": "en-flight", "text": "Kenji's flight to Osaka leaves on Friday morning; window seat",
         "occurred_at": NOW - timedelta(days=20), "metadata": {"speaker": "Kenji"}},
        {"id": "en-budget", "text": "Priya said the Atlas budget review slipped to July",
         "occurred_at": NOW - timedelta(days=3)},
        {"id": "en-budget-copy", "text": "Priya said the Atlas budget review slipped to July",
         "occurred_at": NOW - timedelta(days=3)},
        {"id": "ko-busan", "text": "지난주 부산 출장에서 거래처와 계약을 마무리했다",
         "occurred_at": NOW - timedelta(days=7)},
        {"id": "ko-food", "text": "민준 씨는 김치찌개를 좋아한다", "occurred_at": NOW - timedelta(days=40)},
    ])


def test_senshuu_no_are_resolves_to_a_time_range_and_a_topic(memory: Memory) -> None:
    _seed(memory)
    recent = [{"role": "user", "text": "プロジェクトXの締切が心配です"},
              {"role": "assistant", "text": "確認しましょう"}]
    r = memory.recall("先週のあれどうなった？", recent_messages=recent, now=NOW)
    assert r.trace.strategy == "temporal"
    tr = r.trace.analysis["time_range"] if r.trace.analysis else None
    assert tr is not None and tr["start"].startswith("2025-06-09") and tr["end"].startswith("2025-06-16")
    assert any(q["source"] == "reference" and "プロジェクトX" in q["text"] for q in r.trace.queries)
    assert any(s.name.startswith("time_") for s in r.trace.searches)
    assert r.memories[0].memory.id == "ja-x"
    assert r.memories[0].relevance != "none" and r.should_inject
    pack = r.memory_pack()
    assert pack.startswith("[EPISODE_EVIDENCE]\n以下は") and "延期の理由も共有しておきますね" in pack
    assert "ja-x-old" not in [m.memory.id for m in r.memories[:1]]


def test_a_resolved_reference_makes_its_best_match_high(memory: Memory) -> None:
    """「あれどうなった？」 after talking about Project X: the memory about Project X is what the user
    means, so it is high and injected on its own; a question with no reference gets no such lift."""
    _seed(memory)
    recent = [{"role": "user", "text": "プロジェクトXの締切が心配です"},
              {"role": "assistant", "text": "確認しましょう"}]
    r = memory.recall("あれどうなった？", recent_messages=recent, now=NOW)
    assert r.memories[0].memory.id in {"ja-x", "ja-x-old"}  # both are about Project X
    assert r.memories[0].relevance == "high" and r.should_inject
    assert all(m.relevance != "high" for m in r.memories[1:] if "プロジェクトX" not in m.memory.text)
    plain = memory.recall("どうなった？", now=NOW)
    assert all(m.relevance != "high" for m in plain.memories)


def test_english_keyword_question_and_near_duplicate_removal(memory: Memory) -> None:
    _seed(memory)
    r = memory.recall("When does Kenji's flight to Osaka leave?", now=NOW)
    assert r.trace.strategy == "keyword_boost"
    assert r.memories[0].memory.id == "en-flight"
    assert "Kenji" in r.memories[0].reason
    b = memory.recall("What happened to the Atlas budget review?", now=NOW)
    ids = [m.memory.id for m in b.memories]
    assert ids[0] in ("en-budget", "en-budget-copy")
    assert len({"en-budget", "en-budget-copy"} & set(ids)) == 1
    assert set(b.trace.duplicates) & {"en-budget", "en-budget-copy"}
    stages = set(b.trace.stages_ms)
    assert {"analyse", "embed", "search", "fuse", "rerank", "decide", "total"} <= stages


def test_korean_last_week_and_forced_strategy(memory: Memory) -> None:
    _seed(memory)
    r = memory.recall("지난주 부산 출장 어땠어?", now=NOW)
    assert r.trace.strategy == "temporal" and r.memories[0].memory.id == "ko-busan"
    forced = memory.recall("지난주 부산 출장 어땠어?", now=NOW, options=RecallOptions(strategy=Strategy.SEMANTIC_ONLY))
    assert forced.trace.strategy == "semantic_only" and forced.trace.strategy_forced
    assert all(s.name.startswith("vector") for s in forced.trace.searches)
    assert r.memory_pack(max_chars=400).count("다음은 현재 대화와 관련된") == 1


def test_recent_turns_are_read_from_the_session_log(memory: Memory) -> None:
    _seed(memory)
    memory.add_message("chat-1", "user", "プロジェクトXの締切が心配です", at=NOW - timedelta(minutes=5))
    r = memory.recall("あれどうなった？", session="chat-1", now=NOW)
    assert r.trace.queries[0]["text"].endswith("プロジェクトX")  # あれ resolved from the logged turn
    assert "ja-x" in [m.memory.id for m in r.memories[:2]]
    assert memory.recall("あれどうなった？", now=NOW).memories == ()  # same words, no session: nothing to resolve


@pytest.mark.parametrize("text, reason", [
    ("", "empty message"),
    ("   ", "empty message"),
    ("it?", "only refers to something"),
])
def test_bad_queries_give_an_empty_answer_that_says_why(memory: Memory, text: str, reason: str) -> None:
    _seed(memory)
    r = memory.recall(text, now=NOW)
    assert r.memories == () and not r.should_inject and r.memory_pack() == ""
    assert any(reason in note for note in r.trace.notes)


def test_filters_that_match_nothing_and_odd_queries_never_crash(memory: Memory) -> None:
    _seed(memory)
    none = memory.recall("Osaka flight", now=NOW, options=RecallOptions(session="no-such-session"))
    assert none.memories == () and "matched" in none.trace.notes[0]
    facts = memory.recall("Osaka flight", now=NOW, options=RecallOptions(kinds=["fact"]))
    assert facts.memories == ()
    other = memory.recall("Wie ist das Wetter morgen in Hamburg?", now=NOW)
    assert all(m.relevance != "high" for m in other.memories)
    huge = memory.recall("Osaka flight " * 8000, now=NOW)
    assert any("characters" in n for n in huge.trace.notes)
    assert huge.memories[0].memory.id == "en-flight"
    nobody = memory.recall("Osaka flight", owner="someone-else", now=NOW)
    assert nobody.memories == ()


def test_stages_can_be_switched_off(memory: Memory) -> None:
    _seed(memory)
    plain = memory.recall("Atlas budget", now=NOW,
                          options=RecallOptions(rerank=False, expand=False, decay=False, dedupe_threshold=None,
                                                fusion="rrf"))
    assert all(c.rerank is None for c in plain.trace.candidates)
    assert plain.trace.duplicates == {} and plain.trace.fusion == "rrf"
    assert {m.memory.id for m in plain.memories[:2]} == {"en-budget", "en-budget-copy"}


def test_metrics_count_strategies_and_empty_answers(memory: Memory) -> None:
    _seed(memory)

    def value(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = value("retrieval_strategy_usage_total", strategy="temporal")
    empty_before = value("retrieval_empty_results_total", reason="empty_query")
    memory.recall("先週の出張", now=NOW)
    memory.recall("", now=NOW)
    assert value("retrieval_strategy_usage_total", strategy="temporal") == before + 1
    assert value("retrieval_empty_results_total", reason="empty_query") == empty_before + 1
    text = exposition().decode()
    assert "retrieval_latency_ms_bucket" in text and "rerank_latency_ms_count" in text
    assert "llm_fallbacks_total" in text or "llm_calls_total" in text or "routing_latency_ms" in text


async def test_async_recall(memory: Memory) -> None:
    _seed(memory)
    r = await AsyncMemory(memory).recall("지난주 부산 출장", now=NOW)
    assert r.memories[0].memory.id == "ko-busan"


def test_cli_recall_json(memory: Memory, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(memory)
    code = main(["recall", "When does Kenji fly to Osaka?", "--store", db_url, "--owner", "alice", "--json",
                 "--now", NOW.isoformat(), "--trace"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memories"][0]["id"] == "en-flight" and out["trace"]["strategy"]


def test_a_memory_remembered_without_a_date_is_recalled(memory: Memory) -> None:
    """occurred_at defaults to when the memory was written, so recall finds it."""
    item = memory.remember("The staging database password rotates every Monday")
    assert item.occurred_at == item.created_at
    r = memory.recall("when does the staging database password rotate?")
    assert [m.memory.id for m in r.memories][:1] == [item.id]


def test_old_memories_are_recalled_unless_a_window_is_asked_for(memory: Memory) -> None:
    """Long-term memory: a move told 20 months ago is recalled by default (age only ranks); a window of one
    year, asked for explicitly, leaves it out."""
    now = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    item = memory.remember("I moved from Osaka to Sapporo for the new job", occurred_at=now - timedelta(days=610))
    found = memory.recall("where did I move to?", now=now)
    assert [m.memory.id for m in found.memories][:1] == [item.id]
    windowed = memory.recall("where did I move to?", now=now, options=RecallOptions(window_days=365))
    assert item.id not in [m.memory.id for m in windowed.memories]


@pytest.mark.parametrize("text", ["先週のあれどうなった？", "What about the Atlas budget review?", "지난주 부산 출장"])
def test_searches_in_threads_give_the_same_recall(memory: Memory, text: str) -> None:
    """``RecallOptions(parallel=True)`` (off by default: it does not pay on SQLite, docs/benchmarks.md "branch
    par1") runs the same searches in a thread pool: the same lists, memories and scores as in turn."""
    _seed(memory)
    recent = [{"role": "user", "text": "プロジェクトXの締切が心配です"}]
    turn = memory.recall(text, recent_messages=recent, now=NOW)
    threads = memory.recall(text, recent_messages=recent, now=NOW, options=RecallOptions(parallel=True))
    assert len(turn.trace.searches) > 1
    assert [(s.name, s.hits) for s in threads.trace.searches] == [(s.name, s.hits) for s in turn.trace.searches]
    assert [(m.memory.id, m.score, m.scores) for m in threads.memories] == [
        (m.memory.id, m.score, m.scores) for m in turn.memories]
