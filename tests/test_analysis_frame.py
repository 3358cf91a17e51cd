"""Query frame validation (seed 002): quotes must be in the query, values must fit their quotes."""

from __future__ import annotations

from memroute.analysis import fold, validate_frame

QUERY = "ログイン機能でパスワードが空のときエラーが出ない"


def test_valid_slots_are_kept() -> None:
    v = validate_frame(QUERY, {
        "target_feature": {"value": "ログイン機能", "quote": "ログイン機能"},
        "trigger_condition": {"value": "パスワードが空", "quote": "パスワードが空"},
        "observed_issue": {"value": "エラーが出ない", "quote": "エラーが出ない"},
        "desired_action": None,
    })
    assert v.ok and v.rejected == ()
    assert v.frame.target_feature is not None and v.frame.target_feature.value == "ログイン機能"
    assert v.frame.missing_slots == ["desired_action"]


def test_hallucinated_quote_is_rejected_with_reason() -> None:
    v = validate_frame(QUERY, {"desired_action": {"value": "チェックを追加", "quote": "チェックを追加して"}})
    assert not v.ok and v.frame.desired_action is None
    assert v.rejected[0].slot == "desired_action" and "not found" in v.rejected[0].reason


def test_value_must_fit_its_quote() -> None:
    v = validate_frame(QUERY, {"target_feature": {"value": "決済画面", "quote": "ログイン機能"}})
    assert v.rejected[0].reason == "value does not fit its quote"
    ok = validate_frame(QUERY, {"target_feature": {"value": "login feature", "quote": "ログイン機能"}})
    assert ok.ok  # a cross-language synonym fits


def test_normalisation_width_and_whitespace_folding() -> None:
    q = "ＬｏｇｉｎＳｅｒｖｉｃｅ  で\tパスワード が空"
    v = validate_frame(q, {"target_feature": {"value": "LoginService", "quote": "LoginService で パスワード"}})
    assert v.ok
    assert fold("Ｈｅｌｌｏ   World") == "hello world"


def test_malformed_and_unknown_slots() -> None:
    v = validate_frame("fix the login bug", {"target_feature": "login", "colour": {"value": "x", "quote": "x"},
                                             "observed_issue": {"value": "", "quote": "bug"},
                                             "desired_action": {"value": "fix", "quote": None}})
    reasons = {r.slot: r.reason for r in v.rejected}
    assert reasons["target_feature"].startswith("malformed")
    assert reasons["colour"].startswith("unknown slot")
    assert reasons["observed_issue"] == "no value" and reasons["desired_action"] == "no quote"
    assert validate_frame("x", [1, 2]).rejected[0].slot == "*"  # type: ignore[arg-type]


def test_english_and_korean() -> None:
    v = validate_frame("The login page crashes when the password is empty",
                       {"observed_issue": {"value": "login page crashes", "quote": "login page crashes"},
                        "trigger_condition": {"value": "empty password", "quote": "when the password is empty"}})
    assert v.ok
    k = validate_frame("로그인 화면에서 비밀번호가 비어 있으면 에러가 안 나",
                       {"observed_issue": {"value": "에러가 안 남", "quote": "에러가 안 나"}})
    assert k.ok
