"""NL→symbol by meaning: a Japanese or Korean name of a feature that translates or transliterates an identifier
maps to it without any concept-table entry (seed 002), on a small repository written for the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memroute.embed import CachedEmbedder
from memroute.investigate import Investigator, Workspace, is_related
from memroute.stores import open_store

FILES = {
    "guard/fallback.py": '''class FallbackDetector:
    def observe(self, response: str) -> bool:
        return not response
''',
    "web/handlers.py": '''def handle_login(form: dict[str, str]) -> bool:
    return bool(form.get("name"))


def render_profile(name: str) -> str:
    return name
''',
    "jobs/export.py": '''class ReportExporter:
    def write_csv(self, rows: list[str]) -> str:
        return "\\n".join(rows)


def retry_request(url: str, attempts: int) -> str:
    return url * attempts
''',
}


@pytest.fixture
def inv(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[Investigator]:
    root = tmp_path / "repo"
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    store = open_store(f"sqlite:///{tmp_path / 'memroute.db'}")
    yield Investigator(store, Workspace([root]), embedder=embedder, owner="alice")
    store.close()


ALL = ["FallbackDetector", "handle_login", "render_profile", "ReportExporter", "ReportExporter.write_csv",
       "retry_request"]


@pytest.mark.parametrize(("feature", "symbol", "in_table"), [
    ("폴백 감지기", "FallbackDetector", False),
    ("再試行", "retry_request", False),
    ("ログイン処理", "handle_login", True),
    ("보고서 내보내기", "ReportExporter", True),
])
def test_a_translated_feature_name_maps_to_its_identifier(inv: Investigator, feature: str, symbol: str,
                                                          in_table: bool) -> None:
    assert inv.search is not None
    assert is_related(feature, symbol) is in_table  # the lexical check and its concept table
    assert inv.search.related(feature, ALL)[:1] == [symbol]


def test_a_feature_the_code_does_not_have_maps_to_nothing(inv: Investigator) -> None:
    assert inv.search is not None
    assert inv.search.related("결제 처리", ALL) == []  # payment: no symbol of the repository is about it


def test_a_korean_session_reaches_ready_instead_of_semantic(inv: Investigator) -> None:
    s = inv.start_session("폴백 감지기가 빈 응답을 놓쳐요", "INVESTIGATE")
    inv.set_query_frame(s.session_id, {"target_feature": {"value": "폴백 감지기", "quote": "폴백 감지기"},
                                       "observed_issue": {"value": "빈 응답을 놓쳐요", "quote": "빈 응답을 놓쳐요"}})
    done = inv.submit_understanding(s.session_id, symbols=["FallbackDetector", "handle_login"],
                                    files=["guard/fallback.py"]).to_dict()
    assert done["mapped_symbols"]["target_feature"] == ["FallbackDetector"]
    assert done["phase"] == "READY", done["reason"]


def test_a_hypothesis_named_in_japanese_is_verified_by_meaning(inv: Investigator) -> None:
    s = inv.start_session("ログイン処理で名前が空でも通ってしまう", "INVESTIGATE")
    inv.set_query_frame(s.session_id, {"observed_issue": {"value": "名前が空でも通ってしまう",
                                                          "quote": "名前が空でも通ってしまう"}})
    semantic = inv.submit_understanding(s.session_id, symbols=["render_profile"], files=["web/handlers.py"])
    assert semantic.to_dict()["phase"] == "SEMANTIC"  # the target feature was never stated
    wrong = [{"slot": "target_feature", "value": "폴백 감지기", "symbols": ["handle_login"]}]
    inv.submit_hypotheses(s.session_id, wrong)
    refused = inv.verify_hypothesis(s.session_id, "target_feature", [
        {"tool": "find_definitions", "args": {"name": "handle_login"}}]).to_dict()
    assert refused["verified"] is False and "does not name" in refused["reason"]
    right = [{"slot": "target_feature", "value": "ログイン処理", "symbols": ["handle_login"]}]
    inv.submit_hypotheses(s.session_id, right)
    ready = inv.verify_hypothesis(s.session_id, "target_feature", [
        {"tool": "find_definitions", "args": {"name": "handle_login"}}]).to_dict()
    assert ready["verified"] is True and ready["phase"] == "READY"
