"""The guided code-investigation tools of the MCP server (seed 002): session steps and code intelligence.

Sessions and their decision log belong to the owner the call acts for; the code tools read only the
repositories the server was started with.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, ConfigDict, Field

from memroute.investigate import Investigator
from memroute.investigate.decisions import to_jsonl
from memroute.mcp.server import OwnerScope, guard, owner_of

SlotName = Literal["target_feature", "trigger_condition", "observed_issue", "desired_action"]
ToolName = Literal["find_definitions", "find_references", "search_text", "get_symbols", "analyze_structure", "query"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SlotIn(_Strict):
    value: Annotated[str, Field(description="what the slot is, in your words", max_length=1000)]
    quote: Annotated[str, Field(description="the exact words of the request it comes from (copied, not "
                                            "paraphrased)", max_length=10_000)]


class Slots(_Strict):
    target_feature: Annotated[SlotIn | None, Field(description="the feature or module concerned "
                                                               "(「ログイン機能」)")] = None
    trigger_condition: Annotated[SlotIn | None, Field(description="when the problem happens "
                                                                  "(「パスワードが空のとき」)")] = None
    observed_issue: Annotated[SlotIn | None, Field(description="what goes wrong now (「エラーが出ない」)")] = None
    desired_action: Annotated[SlotIn | None, Field(description="the change asked for (「チェックを追加」)")] = None


class Evidence(_Strict):
    tool: Annotated[ToolName, Field(description="the code tool to re-run")]
    args: Annotated[dict[str, Any], Field(description="its arguments, e.g. {\"name\": \"LoginService\"} or "
                                                      "{\"pattern\": \"if not password\"}")] = {}
    slot: Annotated[SlotName | None, Field(description="the slot this evidence backs, if any")] = None


class HypothesisIn(_Strict):
    slot: SlotName
    value: Annotated[str, Field(description="what you believe the slot is", min_length=1, max_length=500)]
    symbols: Annotated[list[str], Field(description="symbols believed to implement it", max_length=50)] = []
    files: Annotated[list[str], Field(description="files believed to hold it", max_length=50)] = []


SessionId = Annotated[str, Field(description="the session_id start_session returned", min_length=1, max_length=200)]
OptSession = Annotated[str | None, Field(description="an investigation session: the call is recorded in its "
                                                     "decision log and runs on its repository", max_length=200)]
Path_ = Annotated[str | None, Field(description="a file or folder, relative to the repository root", max_length=4096)]
Repo = Annotated[str | None, Field(description="which configured repository (default: the session's, or the "
                                               "first)", max_length=4096)]
Owner = Annotated[str | None, Field(description="the owner to act for; leave it out to use the one this "
                                                "connection is bound to", max_length=256)]
Names = Annotated[list[str] | None, Field(max_length=200)]


class InvestigationTools:
    def __init__(self, investigator: Investigator, scope: OwnerScope) -> None:
        self.inv = investigator
        self.scope = scope

    def register(self, server: MCPServer[Any]) -> None:
        for tool in (self.start_session, self.set_query_frame, self.submit_understanding, self.submit_hypotheses,
                     self.verify_hypothesis, self.get_session, self.decision_log, self.find_definitions,
                     self.find_references, self.search_text, self.get_symbols, self.analyze_structure, self.query):
            server.add_tool(guard(tool), name=tool.__name__)

    # ------------------------------------------------------------------------------------ sessions
    def start_session(self, ctx: Context[Any, Any], query: Annotated[str, Field(
                          description="the user's request, exactly as written", min_length=1, max_length=10_000)],
                      intent: Annotated[Literal["IMPLEMENT", "MODIFY", "INVESTIGATE", "QUESTION"] | None, Field(
                          description="IMPLEMENT (build something new), MODIFY (change existing code), "
                                      "INVESTIGATE (find or understand code), QUESTION; leave it out to classify "
                                      "the request")] = None,
                      repo: Repo = None, owner: Owner = None) -> dict[str, Any]:
        """Start a guided investigation before changing code: returns the session id, the intent and
        question category, and an extraction prompt. Answer the prompt (slots with exact quotes of the request)
        and pass the slots to set_query_frame."""
        return self.inv.start_session(query, intent, repo=repo, owner=owner_of(self.scope, ctx, owner)).to_dict()

    def set_query_frame(self, ctx: Context[Any, Any], session_id: SessionId, slots: Annotated[Slots | None, Field(
                            description="the slots you extracted; leave out what the request does not say. "
                                        "Omitted: the server's LLM extracts them, if one is configured")] = None,
                        owner: Owner = None) -> dict[str, Any]:
        """Give the query frame: each slot with the exact quote of the request it comes from. Slots whose quote
        is not in the request are rejected. Returns the risk level (HIGH/MEDIUM/LOW), the exploration required
        before READY (symbols, entry points, files, patterns) and which tools to use for what is missing."""
        extracted = None if slots is None else {k: v for k, v in slots.model_dump().items() if v is not None}
        return self.inv.set_query_frame(session_id, extracted, owner=owner_of(self.scope, ctx, owner)).to_dict()

    def submit_understanding(self, ctx: Context[Any, Any], session_id: SessionId,
                             symbols: Annotated[Names, Field(description="classes/functions involved, e.g. "
                                                                         "LoginService")] = None,
                             entry_points: Annotated[Names, Field(description="where execution enters, e.g. "
                                                                              "LoginService.authenticate()")] = None,
                             patterns: Annotated[Names, Field(description="design patterns or conventions "
                                                                          "seen, e.g. 'Service + Validator'")] = None,
                             files: Annotated[Names, Field(description="files read, relative to the "
                                                                       "repository")] = None,
                             evidence: Annotated[list[Evidence] | None, Field(description="tool calls that back a slot "
                                                                                   "(re-run by the server)",
                                                                       max_length=20)] = None,
                             owner: Owner = None) -> dict[str, Any]:
        """Submit what exploration found. Only symbols and files the repository really has count toward the
        requirements. Moves to READY when they are met and the target feature matches the symbols; to SEMANTIC
        when the target is unknown or matches none (state hypotheses next); stays in EXPLORATION otherwise."""
        return self.inv.submit_understanding(
            session_id, symbols=symbols or [], entry_points=entry_points or [], patterns=patterns or [],
            files=files or [], evidence=[e.model_dump() for e in evidence or []],
            owner=owner_of(self.scope, ctx, owner)).to_dict()

    def submit_hypotheses(self, ctx: Context[Any, Any], session_id: SessionId,
                          hypotheses: Annotated[list[HypothesisIn], Field(min_length=1, max_length=4)],
                          owner: Owner = None) -> dict[str, Any]:
        """In SEMANTIC: state the blocking slots as hypotheses (value + the symbols or files believed to
        implement it; `query` finds candidates by meaning). Moves to VERIFICATION."""
        return self.inv.submit_hypotheses(session_id, [h.model_dump() for h in hypotheses],
                                          owner=owner_of(self.scope, ctx, owner)).to_dict()

    def verify_hypothesis(self, ctx: Context[Any, Any], session_id: SessionId, slot: SlotName,
                          evidence: Annotated[list[Evidence], Field(min_length=1, max_length=20)],
                          owner: Owner = None) -> dict[str, Any]:
        """In VERIFICATION: confirm one hypothesis with tool evidence, which the server re-runs on the
        repository; it must find the hypothesis's symbols or files. READY once no hypothesis is left."""
        return self.inv.verify_hypothesis(session_id, slot, [e.model_dump() for e in evidence],
                                          owner=owner_of(self.scope, ctx, owner)).to_dict()

    def get_session(self, ctx: Context[Any, Any], session_id: SessionId, owner: Owner = None) -> dict[str, Any]:
        """The session: phase and phase history, query frame, risk, requirements, understanding, hypotheses,
        and what still blocks READY."""
        session = self.inv.get_session(session_id, owner=owner_of(self.scope, ctx, owner))
        return {**session.to_dict(), "ready_blockers": session.ready_blockers()}

    def decision_log(self, ctx: Context[Any, Any],
                     session_id: Annotated[str | None, Field(description="only this session", max_length=200)] = None,
                     step: Annotated[str | None, Field(description="only this step (start_session, set_query_frame, "
                                                                   "tool, ...)", max_length=40)] = None,
                     phase: Annotated[Literal["FRAME", "EXPLORATION", "SEMANTIC", "VERIFICATION", "READY"] | None,
                                      Field(description="only records whose step ended in this phase")] = None,
                     risk_level: Annotated[Literal["HIGH", "MEDIUM", "LOW"] | None,
                                           Field(description="only records at this risk level")] = None,
                     since: Annotated[str | None, Field(description="only records from this time on (ISO 8601)",
                                                        max_length=40)] = None,
                     format: Annotated[Literal["json", "jsonl"], Field(
                         description="json: a list; jsonl: JSON Lines text for export")] = "json",
                     limit: Annotated[int, Field(description="the most recent N records", ge=1, le=10_000)] = 200,
                     owner: Owner = None) -> dict[str, Any]:
        """The decision log of investigations: one record per step (intent, category, query frame, missing
        slots, risk, recommended tools, tool results, fallbacks, phase transitions)."""
        records = self.inv.decision_log(session_id, step=step, phase=phase, risk_level=risk_level, since=since,
                                        limit=limit, owner=owner_of(self.scope, ctx, owner))
        if format == "jsonl":
            return {"count": len(records), "jsonl": to_jsonl(records)}
        return {"count": len(records), "records": [r.to_dict() for r in records]}

    # -------------------------------------------------------------------------------- code tools
    def _tool(self, ctx: Context[Any, Any], tool: str, owner: str | None, session: str | None,
              args: dict[str, Any]) -> dict[str, Any]:
        return self.inv.tool(tool, args, session=session, owner=owner_of(self.scope, ctx, owner)).to_dict()

    def find_definitions(self, ctx: Context[Any, Any], name: Annotated[str, Field(
                             description="a name (authenticate) or dotted name (LoginService.authenticate)",
                             min_length=1, max_length=200)],
                         kind: Annotated[str | None, Field(description="only this kind: class, function, method, "
                                                                       "variable", max_length=40)] = None,
                         path: Path_ = None, session_id: OptSession = None, repo: Repo = None,
                         limit: Annotated[int, Field(ge=1, le=1000)] = 50, owner: Owner = None) -> dict[str, Any]:
        """Where a symbol is defined: file, line, signature and docstring."""
        return self._tool(ctx, "find_definitions", owner, session_id, dict(name=name, kind=kind, path=path, repo=repo,
                          limit=limit))

    def find_references(self, ctx: Context[Any, Any], name: Annotated[str, Field(
                            description="the symbol's name", min_length=1, max_length=200)],
                        path: Path_ = None, session_id: OptSession = None, repo: Repo = None,
                        limit: Annotated[int, Field(ge=1, le=5000)] = 200, owner: Owner = None) -> dict[str, Any]:
        """Where a symbol is used (file, line, the line's text); not in strings or comments for Python."""
        return self._tool(ctx, "find_references", owner, session_id, dict(name=name, path=path, repo=repo, limit=limit))

    def search_text(self, ctx: Context[Any, Any], pattern: Annotated[str, Field(
                        description="text to find (or with regex=true a regular expression in RE2 syntax: "
                                    "no backreferences or lookaround)", min_length=1, max_length=500)],
                    regex: bool = False, case_sensitive: bool = False,
                    glob: Annotated[str | None, Field(description="only files matching, e.g. *.py",
                                                      max_length=200)] = None,
                    path: Path_ = None, session_id: OptSession = None, repo: Repo = None,
                    limit: Annotated[int, Field(ge=1, le=5000)] = 100, owner: Owner = None) -> dict[str, Any]:
        """Lines matching a text or regular expression in the repository's text files."""
        return self._tool(ctx, "search_text", owner, session_id, dict(pattern=pattern, regex=regex,
                          case_sensitive=case_sensitive, glob=glob, path=path, repo=repo, limit=limit))

    def get_symbols(self, ctx: Context[Any, Any], path: Path_ = None,
                    kind: Annotated[str | None, Field(description="only this kind", max_length=40)] = None,
                    session_id: OptSession = None, repo: Repo = None,
                    limit: Annotated[int, Field(ge=1, le=10_000)] = 500, owner: Owner = None) -> dict[str, Any]:
        """The classes, functions, methods and variables of a file or folder, with lines and signatures."""
        return self._tool(ctx, "get_symbols", owner, session_id, dict(path=path, kind=kind, repo=repo, limit=limit))

    def analyze_structure(self, ctx: Context[Any, Any], path: Path_ = None, session_id: OptSession = None,
                          repo: Repo = None, owner: Owner = None) -> dict[str, Any]:
        """A file's outline (classes and their methods, functions, imports) or a folder's layout (languages,
        sub-folders, entry points, most imported modules)."""
        return self._tool(ctx, "analyze_structure", owner, session_id, dict(path=path, repo=repo))

    def query(self, ctx: Context[Any, Any], text: Annotated[str, Field(
                  description="what you look for, in any language (「ログイン機能」, 'where passwords are checked')",
                  min_length=1, max_length=2000)],
              kind: Annotated[str | None, Field(description="only this kind", max_length=40)] = None,
              path: Path_ = None, session_id: OptSession = None, repo: Repo = None,
              limit: Annotated[int, Field(ge=1, le=100)] = 10, owner: Owner = None) -> dict[str, Any]:
        """Find symbols by meaning: hybrid keyword + embedding search over names, signatures and docstrings
        (the first call on a repository indexes it)."""
        return self._tool(ctx, "query", owner, session_id,
                          dict(text=text, kind=kind, path=path, repo=repo, limit=limit))
