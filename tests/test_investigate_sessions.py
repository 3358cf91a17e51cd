"""Whole guided-investigation sessions (seed 002) on a small repository made for the test."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memroute.analysis import Intent, QueryFrame
from memroute.analysis.frame import Slot
from memroute.embed import CachedEmbedder
from memroute.embed.base import Side, Vectors
from memroute.errors import InputError
from memroute.investigate import (
    REQUIREMENTS,
    Investigator,
    Phase,
    RiskLevel,
    SlotSource,
    Workspace,
    assess_risk,
    is_related,
    split_identifier,
)
from memroute.stores import open_store

FILES = {
    "auth/__init__.py": "",
    "auth/login_service.py": '''"""Login: checks a user's password and opens a session."""

from auth.errors import LoginError
from auth.validators import PasswordValidator


class LoginService:
    """Authenticates users with their password."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.validator = PasswordValidator()

    def authenticate(self, name: str, password: str) -> bool:
        """Check the password of a user."""
        stored = self.users.get(name)
        if stored is None:
            raise LoginError("unknown user")
        return stored == password

    def logout(self, name: str) -> None:
        self.users.pop(name, None)
''',
    "auth/validators.py": '''"""Input validation for the login form."""


class PasswordValidator:
    """Checks passwords before they are compared."""

    def validate(self, password: str) -> bool:
        return len(password) >= 0


class UserValidator:
    def validate(self, name: str) -> bool:
        return bool(name)
''',
    "auth/errors.py": '''class LoginError(Exception):
    """Raised when a login fails."""


class ValidationError(LoginError):
    pass
''',
    "auth/controller.py": '''from auth.login_service import LoginService


class AuthController:
    def __init__(self, service: LoginService) -> None:
        self.service = service

    def login(self, name: str, password: str) -> bool:
        return self.service.authenticate(name, password)
''',
    "api/routes.py": '''from auth.controller import AuthController
from auth.login_service import LoginService


def login_route(form: dict[str, str]) -> bool:
    controller = AuthController(LoginService({}))
    return controller.login(form["name"], form["password"])


if __name__ == "__main__":
    print(login_route({"name": "a", "password": ""}))
''',
    "billing/payment.py": '''class PaymentGateway:
    """Charges a card."""

    def charge(self, amount: int) -> None:
        raise NotImplementedError
''',
    "web/app.js": '''export function renderLoginForm(root) {
  return new LoginView(root);
}

export class LoginView {
  constructor(root) {
    this.root = root;
  }
}
''',
    "README.md": "The login lives in LoginService.\n",
}


def make_repo(root: Path) -> Path:
    """The test repository: a small login module in Python, a billing module, a JavaScript view."""
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def inv(repo: Path, db_url: str, embedder: CachedEmbedder) -> Iterator[Investigator]:
    store = open_store(db_url)
    yield Investigator(store, Workspace([repo]), embedder=embedder, owner="alice")
    store.close()


def _slot(text: str) -> dict[str, str]:
    return {"value": text, "quote": text}


def test_modify_with_a_hallucinated_quote(inv: Investigator) -> None:
    query = "Fix the login so that an empty password is rejected"
    start = inv.start_session(query)
    assert start.to_dict()["intent"] == "MODIFY" and start.to_dict()["intent_source"] == "rules"
    assert "<query>" in start.to_dict()["extraction_prompt"] and query in start.to_dict()["extraction_prompt"]
    framed = inv.set_query_frame(start.session_id, {
        "target_feature": _slot("the login"),
        "observed_issue": {"value": "empty passwords are accepted", "quote": "empty passwords are accepted"},
        "desired_action": {"value": "add a length check", "quote": "add a length check to PasswordValidator"},
        "trigger_condition": {"value": "payment fails", "quote": "an empty password"},
    }).to_dict()
    rejected = {r["slot"]: r["reason"] for r in framed["rejected"]}
    assert rejected == {"observed_issue": "quote not found in the query", "desired_action": "quote not found in "
                        "the query", "trigger_condition": "value does not fit its quote"}
    assert framed["query_frame"]["target_feature"] == {"value": "the login", "quote": "the login"}
    assert framed["query_frame"]["desired_action"] is None and framed["query_frame"]["observed_issue"] is None
    assert framed["missing_slots"] == ["trigger_condition", "observed_issue", "desired_action"]
    # HIGH because MODIFY states no (real) observed issue, not through the dropped desired action
    assert framed["risk_level"] == "HIGH"
    assert framed["risk_reason"] == "MODIFY without an observed issue: nothing says what is wrong now"
    assert framed["phase"] == "EXPLORATION"
    log = inv.decision_log(start.session_id)
    assert [r.step for r in log] == ["start_session", "set_query_frame"]
    assert {r["slot"] for r in log[1].detail["rejected"]} == set(rejected)

    # The rest of the walk: enough exploration for HIGH risk, but no issue was stated, so SEMANTIC; the
    # issue becomes a hypothesis, confirmed by a tool, then READY. The rejected slots never come back.
    found = inv.submit_understanding(
        start.session_id, symbols=["LoginService", "PasswordValidator", "AuthController", "UserValidator",
                                   "LoginError"],
        entry_points=["LoginService.authenticate()", "login_route"], patterns=["Service + Validator", "DI"],
        files=["auth/login_service.py", "auth/validators.py", "auth/controller.py", "api/routes.py"]).to_dict()
    assert found["phase"] == "SEMANTIC" and found["blocking_slots"] == ["observed_issue"]
    assert "LoginService" in found["mapped_symbols"]["target_feature"]
    assert "PasswordValidator" not in found["mapped_symbols"]["target_feature"]
    assert set(found["mapped_symbols"]) == {"target_feature"}
    inv.submit_hypotheses(start.session_id, [{"slot": "observed_issue", "value": "empty passwords pass validation",
                                              "symbols": ["PasswordValidator.validate"]}])
    ready = inv.verify_hypothesis(start.session_id, "observed_issue", [
        {"tool": "find_definitions", "args": {"name": "PasswordValidator.validate"}}]).to_dict()
    assert ready["verified"] and ready["phase"] == "READY"
    session = inv.get_session(start.session_id)
    assert session.query_frame is not None and session.query_frame["desired_action"] is None
    assert [c.label() for c in session.history] == ["START→FRAME", "FRAME→EXPLORATION", "EXPLORATION→SEMANTIC",
                                                    "SEMANTIC→VERIFICATION", "VERIFICATION→READY"]


@pytest.mark.parametrize(("intent", "filled", "risk"), [
    ("INVESTIGATE", ["desired_action"], "HIGH"),  # an action nobody said is needed, whatever the intent
    ("MODIFY", ["trigger_condition", "observed_issue"], "HIGH"),  # seed code: MODIFY without a target
    ("MODIFY", ["target_feature", "desired_action"], "HIGH"),  # seed table: action with no issue
    ("MODIFY", ["target_feature"], "HIGH"),  # seed table: MODIFY + issue unknown
    ("MODIFY", ["target_feature", "trigger_condition", "observed_issue"], "MEDIUM"),  # seed example
    ("IMPLEMENT", [], "HIGH"),
    ("IMPLEMENT", ["target_feature"], "MEDIUM"),
    ("INVESTIGATE", ["target_feature"], "LOW"),
    ("QUESTION", [], "LOW"),
    ("MODIFY", ["target_feature", "trigger_condition", "observed_issue", "desired_action"], "LOW"),
])
def test_risk_rules_and_requirements_follow_seed_002(intent: str, filled: list[str], risk: str) -> None:
    frame = QueryFrame("q", **{slot: Slot("v", "q") for slot in filled})
    assert assess_risk(frame, Intent(intent))[0] == RiskLevel(risk)
    table = {"HIGH": (5, 2, 4, 2), "MEDIUM": (3, 1, 2, 1), "LOW": (1, 0, 1, 0)}
    r = REQUIREMENTS[RiskLevel(risk)]
    assert (r.symbols, r.entry_points, r.files, r.patterns) == table[risk]


def test_high_risk_cannot_be_ready_without_symbols_and_files(inv: Investigator) -> None:
    s = inv.start_session("ログイン機能にチェックを追加して", "MODIFY")
    framed = inv.set_query_frame(s.session_id, {"target_feature": _slot("ログイン機能"),
                                                "desired_action": _slot("チェックを追加")}).to_dict()
    assert framed["risk_level"] == "HIGH" and "no observed issue" in framed["risk_reason"]
    assert framed["requirements"] == {"symbols": 5, "entry_points": 2, "files": 4, "patterns": 2}
    assert framed["guidance"][0]["hint"].endswith("特定されていません。")  # Japanese request, Japanese hints

    thin = inv.submit_understanding(
        s.session_id, symbols=["LoginService", "PasswordValidator", "GhostService", "AuthController"],
        entry_points=["LoginService.authenticate()", "login_route"], patterns=["Service + Validator", "DI"],
        files=["auth/login_service.py", "./auth/login_service.py", "auth/missing.py", "../outside.py"]).to_dict()
    assert thin["phase"] == "EXPLORATION" and thin["confidence"] == "insufficient"
    assert thin["unmet"] == {"symbols": {"required": 5, "confirmed": 3}, "files": {"required": 4, "confirmed": 1}}
    assert {u["item"] for u in thin["unconfirmed"]} == {"GhostService", "auth/missing.py", "../outside.py"}
    assert "find_definitions" in thin["recommended_tools"]
    assert inv.get_session(s.session_id).phase == Phase.EXPLORATION

    full = inv.submit_understanding(
        s.session_id, symbols=["LoginService", "PasswordValidator", "AuthController", "UserValidator", "LoginError"],
        entry_points=["LoginService.authenticate()", "login_route"], patterns=["Service + Validator", "DI"],
        files=["auth/login_service.py", "auth/validators.py", "auth/controller.py", "api/routes.py"],
        evidence=[{"slot": "observed_issue", "tool": "search_text", "args": {"pattern": "len(password) >= 0"}}],
    ).to_dict()
    assert full["phase"] == "READY", full
    assert full["unmet"] == {} and full["slot_source"]["observed_issue"] == "UNRESOLVED"
    assert "LoginService" in full["mapped_symbols"]["target_feature"]
    assert "PasswordValidator" not in full["mapped_symbols"]["target_feature"]
    session = inv.get_session(s.session_id)
    assert [c.label() for c in session.history] == ["START→FRAME", "FRAME→EXPLORATION", "EXPLORATION→READY"]
    assert session.risk_level == RiskLevel.HIGH


def test_semantic_detour_hypothesis_blocks_ready_until_verified(inv: Investigator) -> None:
    s = inv.start_session("Why is an empty password accepted?")
    assert s.to_dict()["intent"] == "INVESTIGATE"
    framed = inv.set_query_frame(s.session_id, {"observed_issue": _slot("empty password accepted")}).to_dict()
    assert framed["risk_level"] == "LOW"
    inv.find_definitions("PasswordValidator", session=s.session_id)
    semantic = inv.submit_understanding(s.session_id, symbols=["PasswordValidator"],
                                        files=["auth/validators.py"]).to_dict()
    assert semantic["phase"] == "SEMANTIC" and semantic["blocking_slots"] == ["target_feature"]
    with pytest.raises(InputError, match="verify_hypothesis is not possible in phase SEMANTIC"):
        inv.verify_hypothesis(s.session_id, "target_feature", [{"tool": "find_definitions",
                                                                 "args": {"name": "LoginService"}}])
    with pytest.raises(InputError, match="cover the blocking slot"):
        inv.submit_hypotheses(s.session_id, [{"slot": "trigger_condition", "value": "x", "symbols": ["Y"]}])

    wrong = [{"slot": "target_feature", "value": "billing", "symbols": ["LoginService"]}]
    assert inv.submit_hypotheses(s.session_id, wrong).phase == Phase.VERIFICATION
    session = inv.get_session(s.session_id)
    assert session.slot_source["target_feature"] == SlotSource.HYPOTHESIS
    assert session.ready_blockers() == ["slot 'target_feature' is still HYPOTHESIS"]
    with pytest.raises(InputError, match="submit_understanding is not possible in phase VERIFICATION"):
        inv.submit_understanding(s.session_id, symbols=["LoginService"], files=["auth/login_service.py"])

    nothing = inv.verify_hypothesis(s.session_id, "target_feature",
                                    [{"tool": "search_text", "args": {"pattern": "no such text anywhere"}}]).to_dict()
    assert nothing["verified"] is False and nothing["phase"] == "VERIFICATION"
    mismatch = inv.verify_hypothesis(s.session_id, "target_feature",
                                     [{"tool": "find_definitions", "args": {"name": "LoginService"}}]).to_dict()
    assert mismatch["verified"] is False and "does not name any of its symbols" in mismatch["reason"]

    inv.submit_hypotheses(s.session_id, [{"slot": "target_feature", "value": "login", "symbols": ["LoginService"],
                                          "files": ["auth/login_service.py"]}])
    ready = inv.verify_hypothesis(s.session_id, "target_feature", [
        {"tool": "find_definitions", "args": {"name": "LoginService"}}]).to_dict()
    assert ready["verified"] is True and ready["phase"] == "READY" and ready["ready_blockers"] == []
    session = inv.get_session(s.session_id)
    assert session.slot_source["target_feature"] == SlotSource.FACT
    assert [c.label() for c in session.history][2:] == ["EXPLORATION→SEMANTIC", "SEMANTIC→VERIFICATION",
                                                        "VERIFICATION→READY"]
    records = inv.decision_log(s.session_id)
    assert [r.step for r in records].count("tool") == 1
    semantic_record = next(r for r in records if r.step == "submit_understanding")
    assert semantic_record.fallback_triggered and semantic_record.fallback_reason == "the target feature is unknown"


def test_japanese_request_maps_to_login_service(inv: Investigator) -> None:
    query = "ログイン機能でパスワードが空のときエラーが出ない"
    s = inv.start_session(query, "MODIFY")
    framed = inv.set_query_frame(s.session_id, {"target_feature": _slot("ログイン機能"),
                                                "trigger_condition": _slot("パスワードが空"),
                                                "observed_issue": _slot("エラーが出ない")}).to_dict()
    # seed 002's own example: MEDIUM, desired_action missing, find_references + analyze_structure
    assert framed["risk_level"] == "MEDIUM" and framed["missing_slots"] == ["desired_action"]
    assert framed["recommended_tools"] == ["find_references", "analyze_structure"]
    assert framed["guidance"][0]["hint"] == "期待する修正方針が不明です。"

    found = inv.query("ログイン機能", session=s.session_id, limit=5).to_dict()
    assert "LoginService" in [r["qualname"] for r in found["results"]]
    assert all(is_related("ログイン", r["qualname"]) for r in found["results"][:3])
    ready = inv.submit_understanding(
        s.session_id, symbols=["LoginService", "AuthController", "PasswordValidator"],
        entry_points=["LoginService.authenticate()"], patterns=["Service + Validator"],
        files=["auth/login_service.py", "auth/controller.py"]).to_dict()
    assert ready["phase"] == "READY" and ready["confidence"] == "high"
    assert ready["mapped_symbols"]["target_feature"] == ["LoginService", "LoginService.authenticate()"]
    assert ready["mapped_symbols"]["trigger_condition"] == ["PasswordValidator"]


@pytest.mark.parametrize(("query", "feature"), [
    ("로그인 기능에서 비밀번호가 비어 있을 때 오류가 안 나요", "로그인 기능"),
    ("The sign in feature shows no error when the password is empty", "sign in feature"),
])
def test_korean_and_english_requests_map_to_login_service(inv: Investigator, query: str, feature: str) -> None:
    s = inv.start_session(query, "MODIFY")
    framed = inv.set_query_frame(s.session_id, {"target_feature": _slot(feature)}).to_dict()
    assert framed["query_frame"]["target_feature"]["quote"] == feature
    found = inv.query(feature, session=s.session_id, limit=5).to_dict()
    assert all(is_related(feature, r["qualname"]) for r in found["results"][:3]), found["results"][:3]
    assert "LoginService" in [r["qualname"] for r in found["results"]]
    done = inv.submit_understanding(
        s.session_id, symbols=["LoginService", "AuthController", "PasswordValidator", "UserValidator", "LoginError"],
        entry_points=["LoginService.authenticate()", "login_route"], patterns=["Service + Validator", "DI"],
        files=["auth/login_service.py", "auth/validators.py", "auth/controller.py", "api/routes.py"]).to_dict()
    assert "LoginService" in done["mapped_symbols"]["target_feature"]
    assert "PasswordValidator" not in done["mapped_symbols"]["target_feature"]
    assert done["phase"] == "SEMANTIC" and done["blocking_slots"] == ["observed_issue"]  # no issue was framed


def test_sessions_and_the_decision_log_survive_a_restart(repo: Path, db_url: str, embedder: CachedEmbedder,
                                                         tmp_path: Path) -> None:
    store = open_store(db_url)
    first = Investigator(store, Workspace([repo]), embedder=embedder, owner="alice")
    s = first.start_session("Where is the password checked?")
    first.set_query_frame(s.session_id, {"observed_issue": None, "target_feature": _slot("password")})
    store.close()

    store = open_store(db_url)
    second = Investigator(store, Workspace([repo]), embedder=embedder, owner="alice")
    assert second.get_session(s.session_id).phase == Phase.EXPLORATION
    second.find_references("authenticate", session=s.session_id)
    done = second.submit_understanding(s.session_id, symbols=["PasswordValidator.validate"],
                                       files=["auth/validators.py"])
    assert done.phase == Phase.READY
    text = second.export_decision_log(s.session_id)
    lines = [json.loads(line) for line in text.splitlines()]
    assert [r["step"] for r in lines] == ["start_session", "set_query_frame", "tool", "submit_understanding"]
    assert [r["seq"] for r in lines] == [0, 1, 2, 3]
    expected = {"session_id", "query", "timestamp", "intent", "category", "category_confidence", "query_frame",
                "missing_slots", "risk_level", "slot_based_tools", "selected_tools", "tool_selection_reason",
                "tool_results", "fallback_triggered", "fallback_reason", "final_phase", "phase_transitions"}
    assert expected <= set(lines[0])
    assert lines[2]["selected_tools"] == ["find_references"] and lines[2]["tool_results"][0]["total"] == 1
    assert lines[3]["phase_transitions"] == ["EXPLORATION→READY"]
    assert [r.step for r in second.decision_log(step="tool")] == ["tool"]
    assert second.decision_log(risk_level="HIGH") == []
    assert second.decision_log(owner="bob") == [] and second.list_sessions(owner="bob") == []
    store.close()


class CountingEmbedder:
    """The test embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: CachedEmbedder) -> None:
        self.inner, self.model_id, self.dimension, self.texts = inner, inner.model_id, inner.dimension, 0

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors:
        self.texts += len(texts)
        return self.inner.embed(texts, side)


def test_the_query_index_is_kept_across_processes(repo: Path, db_url: str, embedder: CachedEmbedder,
                                                  tmp_path: Path) -> None:
    cache = tmp_path / "code-cache"
    store = open_store(db_url)
    counting = CountingEmbedder(embedder)
    first = Investigator(store, Workspace([repo]), embedder=counting, code_cache=cache)
    indexed = first.query("password validation").to_dict()["indexed_symbols"]
    assert counting.texts >= indexed > 10
    first.close()

    (repo / "auth" / "tokens.py").write_text('def issue_token(user):\n    """Issue a session token."""\n', "utf-8")
    (repo / "billing" / "payment.py").unlink()
    counting = CountingEmbedder(embedder)
    second = Investigator(store, Workspace([repo]), embedder=counting, code_cache=cache)  # a new process
    found = second.query("issue a session token").to_dict()
    assert counting.texts <= 2  # the new symbol and the query: nothing else was embedded again
    assert found["indexed_symbols"] == indexed + 1 - 2  # issue_token in, PaymentGateway and charge out
    assert found["results"][0]["qualname"] == "issue_token"
    assert "PaymentGateway" not in [r["qualname"] for r in second.query("charge a card", limit=50).results]
    second.close()
    store.close()


@pytest.mark.parametrize(("phrase", "symbol", "related"), [
    ("ログイン機能", "LoginService", True),
    ("로그인", "auth.LoginService.authenticate()", True),
    ("sign in page", "SignInView", True),
    ("パスワードが空", "validate_password", True),
    ("authentication", "authenticate", True),
    ("결제", "PaymentGateway", True),
    ("ログイン機能", "Logger", False),
    ("ログイン機能", "PaymentGateway", False),
    ("password", "PaymentGateway", False),
    ("로그인 기능", "LoginService", True),
    ("認証", "AuthController", True),
    ("sign in", "LoginService", True),
    ("비밀번호가 비어", "validate_password", True),
    ("ユーザー", "UserValidator", True),
    ("로그인", "Logger", False),
    ("결제", "LoginService", False),
])
def test_nl_to_symbol_consistency(phrase: str, symbol: str, related: bool) -> None:
    assert is_related(phrase, symbol) is related


def test_identifier_splitting() -> None:
    assert split_identifier("LoginService.authenticate()") == ["login", "service", "authenticate"]
    assert split_identifier("HTTPServerError") == ["http", "server", "error"]
    assert split_identifier("validate_password2") == ["validate", "password", "2"]
