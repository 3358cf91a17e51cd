"""`memroute eval everyday`: the metrics on a hand-made fixture, the command on a small file, and the
shipped set's validity (schema, ids, splits by store, coverage of languages and types in both splits)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest

from memroute.cli import main
from memroute.errors import InputError
from memroute.eval.everyday import (
    LANGUAGES,
    SUBTYPES,
    TYPES,
    EverydayQuestion,
    EverydayStore,
    data_path,
    load_everyday,
)
from memroute.eval.everyday_eval import Outcome, candidate_rows, run_everyday, score, summarise
from memroute.retrieval import Recall
from tests.fake_llm import FakeLLMServer, fake_llm_server

NOW = datetime.fromisoformat("2025-06-01T12:00:00+00:00")


def question(qid: str, qtype: str, answers: str = "", stale: str = "", related: str = "", language: str = "en",
             cross: bool = False) -> EverydayQuestion:
    return EverydayQuestion(qid, "s", "text", language, qtype, "general" if qtype == "unanswerable" else None,
                            "casual", NOW, cross, frozenset(answers.split()), frozenset(stale.split()),
                            frozenset(related.split()), ())


def outcome(q: EverydayQuestion, ranked: str, injected: str, ms: float = 1.0) -> Outcome:
    # The scores read only the ranked and injected ids; the Recall itself is not needed here.
    return Outcome(q, 10, cast(Recall, None), tuple(ranked.split()), tuple(injected.split()), ms)


def test_metrics_on_a_hand_made_fixture() -> None:
    runs = [
        outcome(question("q1", "direct", answers="a"), "x a y", "a x"),
        outcome(question("q2", "update", answers="n", stale="o", language="ja"), "o n", "o n"),
        outcome(question("q3", "update", answers="n", stale="o", language="ja"), "n", ""),
        outcome(question("q4", "unanswerable"), "z", ""),
        outcome(question("q5", "unanswerable", language="ko"), "z", "z"),
        outcome(question("q6", "paraphrase", answers="p", related="r", cross=True), "a b c p", "r"),
    ]
    s = score(runs)
    assert s["questions"] == 6
    assert s["answer_in_top3"] == {"hits": 3, "of": 4, "rate": 0.75}  # q6's answer is fourth
    assert s["answer_injected"] == {"hits": 2, "of": 4, "rate": 0.5}
    # Injected: q1 a (answer) and x; q2 n (answer; o is stale: not counted); q5 z; q6 r (related: not counted).
    assert s["precision"] == {"hits": 2, "of": 4, "rate": 0.5}
    assert s["abstention"] == {"hits": 1, "of": 2, "rate": 0.5}
    assert s["newest_first"] == {"hits": 1, "of": 2, "rate": 0.5}  # q2 ranks the stale fact first
    assert s["stale_injected"] == {"hits": 1, "of": 2, "rate": 0.5}

    full = summarise(runs)
    assert full["by_language"]["ja"]["questions"] == 2 and full["by_language"]["ko"]["questions"] == 1
    assert full["by_language"]["cross-language"]["answer_in_top3"]["hits"] == 0
    assert full["by_type"]["update"]["newest_first"]["of"] == 2
    assert full["by_type"]["direct"]["abstention"] == {"hits": 0, "of": 0, "rate": None}
    assert full["latency_ms"] == {"p50": 1.0, "p95": 1.0}


FIXTURE = {
    "store": "tiny", "split": "dev", "persona": "a test owner",
    "memories": [
        {"id": "t1", "text": "My cat is called Mochi.", "language": "en", "occurred_at": "2025-03-01T09:00:00+00:00"},
        {"id": "t2", "text": "I live in Leeds.", "language": "en", "occurred_at": "2024-09-01T09:00:00+00:00"},
        {"id": "t3", "text": "I moved from Leeds to York last month.", "language": "en",
         "occurred_at": "2025-05-01T09:00:00+00:00"},
        {"id": "t4", "text": "毎週金曜の夜はテニス。", "language": "ja", "occurred_at": "2025-04-01T09:00:00+09:00"},
    ],
    "questions": [
        {"id": "tq1", "text": "What is my cat called?", "language": "en", "type": "direct",
         "now": "2025-06-01T12:00:00+00:00", "answers": ["t1"]},
        {"id": "tq2", "text": "Which city do I live in now?", "language": "en", "type": "update",
         "now": "2025-06-01T12:00:00+00:00", "answers": ["t3"], "stale": ["t2"]},
        {"id": "tq3", "text": "What is 17 times 3?", "language": "en", "type": "unanswerable",
         "subtype": "task", "now": "2025-06-01T12:00:00+00:00"},
        {"id": "tq4", "text": "Can we play badminton on Friday night?", "language": "en", "type": "constraint",
         "now": "2025-06-01T12:00:00+00:00", "answers": ["t4"], "cross_language": True,
         "recent": [{"role": "user", "text": "I want to plan my week."}]},
    ],
}


def write(path: Path, *stores: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in stores), encoding="utf-8")
    return path


def test_command_runs_on_a_small_file_and_prints_the_figures(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    data = write(tmp_path / "tiny.jsonl", FIXTURE)
    assert main(["eval", "everyday", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "4 questions over 1 stores (4 memories); embedder use-m3" in out
    for row in ("all", "en", "ja", "ko", "cross-language", "direct", "update", "unanswerable"):
        assert any(line.split()[0] == row for line in out.splitlines()[2:]), row
    assert "injected" in out and "precision" in out and "abstain" in out and "newest" in out

    assert main(["eval", "everyday", "--data", str(data), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["questions"] == 4 and result["config"]["stores"] == 1
    assert result["answer_in_top3"]["of"] == 3 and result["abstention"]["of"] == 1
    assert result["by_type"]["update"]["newest_first"]["of"] == 1
    assert result["by_language"]["cross-language"]["questions"] == 1
    assert result["latency_ms"]["p95"] >= result["latency_ms"]["p50"] > 0
    assert "details" not in result

    assert main(["eval", "everyday", "--data", str(data), "--json", "--misses"]) == 0
    details = {d["id"]: d for d in json.loads(capsys.readouterr().out)["details"]}
    assert set(details) == {"tq1", "tq2", "tq3", "tq4"}
    assert set(details["tq2"]["ok"]) == {"answer_in_top3", "answer_injected", "newest_first"}
    assert set(details["tq3"]["ok"]) == {"abstention"}
    assert {m["label"] for m in details["tq2"]["returned"]} <= {"answer", "stale", "other"}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    yield from fake_llm_server()


def test_command_takes_llm_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path, server: FakeLLMServer,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``--llm`` reaches the endpoint (here a server that fails every call: the figures still come, with
    the fallbacks counted)."""
    monkeypatch.setenv("MEMROUTE_LLM_ONLY_WHEN_NEEDED", "false")
    monkeypatch.setenv("MEMROUTE_LLM_RETRIES", "0")
    data = write(tmp_path / "tiny.jsonl", FIXTURE)
    assert main(["eval", "everyday", "--data", str(data), "--llm", server.url, "--llm-model", "fake-model",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert server.requests and result["llm"]["calls"] >= 1 and result["llm"]["fallbacks"] >= 1
    assert result["config"]["llm"]["model"] == "fake-model" and result["questions"] == 4


def test_candidate_rows_label_each_candidate_for_fitting(tmp_path: Path) -> None:
    stores = load_everyday(write(tmp_path / "tiny.jsonl", FIXTURE))
    outcomes = run_everyday(stores)
    rows = candidate_rows(outcomes)
    assert {r["question"] for r in rows} <= {"tq1", "tq2", "tq3", "tq4"}
    cat = [r for r in rows if r["question"] == "tq1" and r["id"] == "t1"]
    assert cat and cat[0]["label"] == "answer" and cat[0]["store_size"] == 4 and "cosine" in cat[0]["features"]
    assert all(r["label"] == "stale" for r in rows if r["question"] == "tq2" and r["id"] == "t2")
    assert all(r["label"] == "other" for r in rows if r["question"] == "tq3")
    for o in outcomes:  # injected memories are what the pack shows: a subset of the returned ones
        assert set(o.injected) <= set(o.ranked)
        assert bool(o.injected) == bool(o.recall.memory_pack())


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s["questions"][0].update(answers=["nope"]), "names memories not in store"),
    (lambda s: s["questions"][1].update(stale=[]), "stale memories"),
    (lambda s: s["questions"][2].update(answers=["t1"]), "unanswerable but has answers"),
    (lambda s: s["questions"][0].update(type="trivia"), "not one of"),
    (lambda s: s["memories"][0].update(occurred_at="2025-03-01"), "no UTC offset"),
    (lambda s: s["questions"][3].update(id="tq1"), "ids used twice"),
])
def test_bad_files_are_refused_with_the_reason(tmp_path: Path, change: Any, message: str) -> None:
    store = json.loads(json.dumps(FIXTURE))
    change(store)
    with pytest.raises(InputError, match=message):
        load_everyday(write(tmp_path / "bad.jsonl", store))


# --------------------------------------------------------------------------------- the shipped set
@pytest.fixture(scope="module")
def shipped() -> dict[str, list[EverydayStore]]:
    return {split: load_everyday(data_path(split)) for split in ("train", "dev")}


def test_shipped_set_is_large_enough_and_split_by_store(shipped: dict[str, list[EverydayStore]]) -> None:
    questions = [q for stores in shipped.values() for s in stores for q in s.questions]
    assert len(questions) >= 150
    train, dev = ({s.id for s in shipped[k]} for k in ("train", "dev"))
    assert not train & dev
    memories = {k: {m.text for s in shipped[k] for m in s.memories} for k in shipped}
    assert not memories["train"] & memories["dev"]
    for stores in shipped.values():
        for s in stores:
            assert 8 <= len(s.memories) <= 20, s.id
            assert s.split in shipped and s in shipped[s.split]


def test_every_language_and_type_is_in_both_splits(shipped: dict[str, list[EverydayStore]]) -> None:
    for split, stores in shipped.items():
        qs = [q for s in stores for q in s.questions]
        for lang in LANGUAGES:
            for qtype in TYPES:
                assert any(q.language == lang and q.type == qtype for q in qs), (split, lang, qtype)
        assert {q.subtype for q in qs if q.type == "unanswerable"} == set(SUBTYPES), split
        assert {q.register for q in qs} == {"casual", "polite"}, split
        assert sum(q.cross_language for q in qs) >= 10, split
        assert any(q.recent for q in qs), split
        assert {m.language for s in stores for m in s.memories} == set(LANGUAGES), split


def test_shipped_labels_agree_with_the_memories(shipped: dict[str, list[EverydayStore]]) -> None:
    for stores in shipped.values():
        for s in stores:
            mems = {m.id: m for m in s.memories}
            for q in s.questions:
                assert all(m.occurred_at < q.now for m in s.memories), q.id
                if q.type == "update":  # the answer is the newer fact
                    assert min(mems[a].occurred_at for a in q.answers) > max(mems[o].occurred_at for o in q.stale)
                if q.answers:
                    assert q.cross_language == (q.language not in {mems[a].language for a in q.answers}), q.id


def test_shipped_paraphrases_share_no_word_with_their_answer(shipped: dict[str, list[EverydayStore]]) -> None:
    from memroute.text import tokenize

    for stores in shipped.values():
        for s in stores:
            mems = {m.id: m for m in s.memories}
            for q in s.questions:
                if q.type == "paraphrase":
                    for a in q.answers:
                        assert not set(tokenize(q.text)) & set(tokenize(mems[a].text)), (q.id, a)
