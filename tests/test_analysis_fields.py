"""Every field of ``analyze`` in English, Japanese and Korean (SPEC section 2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memroute.analysis import ContinuationKind, Intent, QueryType, QuestionCategory, ReferenceType, analyze

NOW = datetime(2025, 3, 12, 15, 0, tzinfo=UTC)  # a Wednesday
TRANSLATE = [{"role": "user", "text": "Translate 'Good morning' to Japanese"},
             {"role": "assistant", "text": "おはようございます"}]
PROJECT_JA = [{"role": "user", "text": "プロジェクトXの締切って来週だっけ？"},
              {"role": "assistant", "text": "はい、来週の金曜日です。"}]
PROJECT_KO = [{"role": "user", "text": "프로젝트 X 마감이 다음 주였지?"},
              {"role": "assistant", "text": "네, 다음 주 금요일이에요."}]


def types(text: str, history: list[dict[str, str]] | None = None) -> set[str]:
    return {r.type.value for r in analyze(text, history or [], NOW).references}


@pytest.mark.parametrize(("text", "language"), [
    ("Translate this to French", "en"), ("じゃあ英語では？", "ja"), ("그럼 영어로는?", "ko"),
    ("SlackでLoginServiceを確認して", "ja"), ("🙂🙂", "und"), ("", "und"),
])
def test_language(text: str, language: str) -> None:
    assert analyze(text, now=NOW).language == language


def test_mixed_language_spans() -> None:
    a = analyze("Deploy は終わった? 배포 완료", now=NOW)
    assert {s.language for s in a.spans} >= {"en", "ja", "ko"}


@pytest.mark.parametrize(("text", "history", "kind", "cue"), [
    ("Now to French", TRANSLATE, "follow_up", "Now to French"),
    ("What about performance?", TRANSLATE, "follow_up", "What about performance?"),
    ('By the way, translate this: "Hello"', TRANSLATE, "switch", "By the way"),
    ("Also, unrelated: what's the capital of Australia?", TRANSLATE, "switch", "unrelated"),
    ("Translate 'Where is the station?' into Japanese", [], "new", None),
    ("じゃあ英語では？", TRANSLATE, "follow_up", "じゃあ"),
    ("ところで、明日の天気は？", TRANSLATE, "switch", "ところで"),
    ("그럼 영어로는?", TRANSLATE, "follow_up", "그럼"),
    ("그런데 내일 날씨 어때?", TRANSLATE, "switch", "그런데"),
    ("그런데 그거 언제 끝나?", PROJECT_KO, "follow_up", "그거"),
    ("이 문장을 영어로 번역해줘: \"안녕\"", [], "new", None),
])
def test_continuation(text: str, history: list[dict[str, str]], kind: str, cue: str | None) -> None:
    a = analyze(text, history, NOW)
    assert a.continuation.kind == ContinuationKind(kind)
    assert a.continuation.cue == cue
    assert str(a.continuation) == kind


@pytest.mark.parametrize(("text", "needs"), [
    ("What is on my itinerary for Friday?", False),  # "it" inside "itinerary" is no pronoun
    ("Is it possible to export CSV?", False),  # expletive "it"
    ("Can you fix it?", True),
    ("Items in the cart", False),
    ("それぞれの担当者を一覧にして", False),  # それ inside それぞれ
    ("時間があれば手伝って", False),  # あれ inside あれば
    ("それ直せる？", True),
    ("그동안 고마웠어", False),  # 그 inside 그동안
    ("그거 고칠 수 있어?", True),
])
def test_needs_context(text: str, needs: bool) -> None:
    assert analyze(text, now=NOW).needs_context is needs


def test_references_resolve_task_and_entity() -> None:
    a = analyze("Now to French", TRANSLATE, NOW)
    assert [(r.type, r.resolved) for r in a.references] == [(ReferenceType.ELLIPSIS, TRANSLATE[0]["text"])]
    b = analyze("あれどうなった？", PROJECT_JA, NOW)
    assert b.references[0].type == ReferenceType.ANAPHORA and b.references[0].resolved == "プロジェクトX"
    c = analyze("그 파일 다시 보내줘", [{"role": "user", "text": "report_final.pdf 파일 정리해줘"}], NOW)
    assert c.references[0].resolved == "report_final.pdf"
    d = analyze("How do I install it?", [{"role": "user", "text": "Best web framework?"},
                                          {"role": "assistant", "text": "FastAPI is a good choice."}], NOW)
    assert d.references[0].resolved == "FastAPI"


def test_chained_follow_ups_keep_the_original_task() -> None:
    history = [*TRANSLATE, {"role": "user", "text": "Now to French"}, {"role": "assistant", "text": "Bonjour"}]
    assert analyze("And German?", history, NOW).references[0].resolved == TRANSLATE[0]["text"]


@pytest.mark.parametrize(("text", "expected"), [
    ("What did Sam say the other day?", {"temporal"}),
    ("この前話したレストランの名前は？", {"temporal"}),
    ("지난번에 말한 식당 이름이 뭐였지?", {"temporal"}),
    ("この前提で考えると？", {"anaphora"}),  # 「この前提」 is "this premise", not "the other day"
    ("例の件、進んでる？", {"topic"}),
    ("그 얘기 좀 더 해줘", {"topic"}),
    ("Going back to the deploy, did it finish?", {"topic", "anaphora"}),
    ("担当者は？", {"ellipsis"}),
    ("담당자는요?", {"ellipsis"}),
    ("東京の天気は？", set()),  # a whole question, not a fragment
])
def test_reference_types(text: str, expected: set[str]) -> None:
    assert types(text) == expected


def test_temporal_reference_resolves_to_its_range() -> None:
    ref = analyze("この前の会議", now=NOW).references[0]
    assert ref.type == ReferenceType.TEMPORAL and ref.resolved is not None and "/" in ref.resolved


@pytest.mark.parametrize(("text", "qtype"), [
    ("When is the deadline for Project Phoenix?", "factual"),
    ("What is a vector database?", "conceptual"),
    ("How do I rotate the API keys?", "procedural"),
    ("Show my commits from last week", "temporal"),
    ("Postgres vs MySQL for a small SaaS?", "comparative"),
    ("経費精算の締め切りはいつ？", "factual"), ("RAGとは何ですか？", "conceptual"),
    ("VPNの設定方法を教えて", "procedural"),
    ("最近のエラーログを見せて", "temporal"), ("RustとGoはどっちが速い？", "comparative"),
    ("제일 가까운 약국이 어디야?", "factual"), ("멱등성이 무슨 뜻이야?", "conceptual"),
    ("VPN 설정 방법 알려줘", "procedural"),
    ("지난주 회의록 보여줘", "temporal"), ("PostgreSQL하고 MySQL 차이가 뭐야?", "comparative"),
])
def test_query_type(text: str, qtype: str) -> None:
    assert analyze(text, now=NOW).query_type == QueryType(qtype)


def test_importance_orders_urgent_over_small_talk() -> None:
    urgent = analyze("URGENT: production is down, who is on call?", now=NOW).importance
    thanks = analyze("thanks!", now=NOW).importance
    assert 0.0 <= thanks < 0.5 < urgent <= 1.0
    assert analyze("至急、障害の原因を調べて", now=NOW).importance > analyze("了解です", now=NOW).importance
    assert analyze("긴급! 서버 장애 확인해줘", now=NOW).importance > analyze("ㅋㅋ", now=NOW).importance


@pytest.mark.parametrize(("text", "must"), [
    ("Why does LoginService throw in get_user()?", ["LoginService", "get_user()"]),
    ('Translate "See you soon" to Korean', ["See you soon", "korean"]),
    ("What is the status of Project X?", ["Project X", "status"]),
    ("Ping @dana in #release-train", ["@dana", "#release-train"]),
    ("プロジェクトXの進捗を教えて", ["プロジェクトX", "進捗"]),
    ("「月次レポート」のテンプレートを送って", ["月次レポート", "テンプレート"]),
    ("프로젝트 X 진행 상황 알려줘", ["프로젝트 X", "진행"]),
])
def test_keywords_keep_named_things_whole(text: str, must: list[str]) -> None:
    keywords = [k.casefold() for k in analyze(text, now=NOW).keywords]
    for word in must:
        assert word.casefold() in keywords


def test_keywords_leave_out_time_words_and_fillers() -> None:
    keywords = analyze("Please show me last week's meeting notes", now=NOW).keywords
    assert "meeting" in keywords and "please" not in keywords and "week" not in keywords
    assert "先週" not in analyze("先週の議事録", now=NOW).keywords


@pytest.mark.parametrize(("text", "parts"), [
    ("What's the status and who owns it?", 2), ("Where's the venue? What time does it start?", 2),
    ("I'm in Tokyo next week. What's the weather there?", 1), ("Thanks!", 1), ("", 0),
    ("進捗と締切教えて", 2), ("あれどうなった？あと担当者は？", 2), ("AWSとGCPの違いを教えて", 1),
    ("田中さんと話した内容をまとめて", 1),
    ("진행 상황이랑 마감일 알려줘", 2), ("AWS와 GCP의 차이를 알려줘", 1),
])
def test_parts(text: str, parts: int) -> None:
    assert len(analyze(text, now=NOW).parts) == parts


def test_parts_distribute_the_shared_request() -> None:
    assert analyze("進捗と締切教えて", now=NOW).parts == ["進捗教えて", "締切教えて"]
    assert analyze("진행 상황이랑 마감일 알려줘", now=NOW).parts == ["진행 상황 알려줘", "마감일 알려줘"]


@pytest.mark.parametrize(("text", "intent", "category"), [
    ("Fix the null check in LoginService", "MODIFY", None),
    ("Implement a login page", "IMPLEMENT", None),
    ("Where is parse_rows used?", "INVESTIGATE", "B_REFERENCE"),
    ("What is Python?", "QUESTION", None),
    ("ログイン機能を実装して", "IMPLEMENT", None), ("バグを直して", "MODIFY", None),
    ("get_userはどこで使われている？", "INVESTIGATE", "B_REFERENCE"), ("この関数の引数は？", "QUESTION", "A_SYNTAX"),
    ("なぜこの設計？", "QUESTION", "C_SEMANTIC"), ("この関数を変更したら何に影響する？", "INVESTIGATE", "D_IMPACT"),
    ("로그인 기능 구현해줘", "IMPLEMENT", None), ("이 버그 고쳐줘", "MODIFY", None),
    ("이 함수 어디서 호출돼?", "INVESTIGATE", "B_REFERENCE"),
])
def test_intent_and_question_category(text: str, intent: str, category: str | None) -> None:
    a = analyze(text, now=NOW)
    assert a.intent == Intent(intent)
    assert a.question_category == (None if category is None else QuestionCategory(category))


def test_to_dict_has_the_cli_keys() -> None:
    d = analyze("What did we ship last week?", now=NOW).to_dict()
    assert {"language", "references", "continuation", "needs_context", "query_type", "time_range", "keywords",
            "parts"} <= d.keys()
    assert d["time_range"]["start"] == "2025-03-03T00:00:00+00:00"


def test_analysis_is_deterministic_and_naive_now_is_utc() -> None:
    a = analyze("先週の議事録とプロジェクトXの進捗", PROJECT_JA, datetime(2025, 3, 12, 15, 0))
    b = analyze("先週の議事録とプロジェクトXの進捗", PROJECT_JA, NOW)
    assert a == b
    assert a.time_range is not None and a.time_range.start.tzinfo is not None


def test_ranges_use_the_time_zone_of_now() -> None:
    jst = timezone(timedelta(hours=9))
    tr = analyze("昨日の売上", now=datetime(2025, 3, 12, 1, 0, tzinfo=jst)).time_range
    assert tr is not None and tr.start == datetime(2025, 3, 11, tzinfo=jst)
