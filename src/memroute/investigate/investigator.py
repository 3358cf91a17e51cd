"""Guided code investigation (seed 002): sessions that make a coding agent say what it is looking at,
explore the code, and back its understanding with what the tools found before it changes anything.

    >>> inv = Investigator(store, Workspace(["."]))                      # doctest: +SKIP
    >>> s = inv.start_session("ログイン機能でパスワードが空のときエラーが出ない", "MODIFY")
    >>> inv.set_query_frame(s.session_id, {"target_feature": {"value": "ログイン機能", "quote": "ログイン機能"}})
    >>> inv.find_definitions("LoginService", session=s.session_id)
    >>> inv.submit_understanding(s.session_id, symbols=[...], entry_points=[...], patterns=[...], files=[...])

Sessions and the decision log live in the store's named state, scoped to the owner, so they survive a
restart and no owner can see another's. Every step checks the session's phase and says what to do next.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memroute.analysis import Intent, analyze, validate_frame
from memroute.analysis.frame import SLOTS
from memroute.embed import Embedder
from memroute.errors import InputError, NotFoundError
from memroute.investigate import codetools
from memroute.investigate.checks import (
    WHAT_NEXT,
    expect_phase,
    intent_of,
    move,
    parse_hypotheses,
    strings,
    supports,
)
from memroute.investigate.codeindex import CodeIndex, ToolResult
from memroute.investigate.codesearch import SymbolSearch
from memroute.investigate.consistency import is_related, related_symbols
from memroute.investigate.decisions import DecisionLog, DecisionRecord, to_jsonl
from memroute.investigate.risk import REQUIREMENTS, assess_risk, guidance
from memroute.investigate.session import (
    InvestigationSession,
    Phase,
    PhaseChange,
    SlotSource,
    StepResult,
    Understanding,
)
from memroute.investigate.workspace import Workspace
from memroute.llm.frame import query_frame
from memroute.llm.prompts import slots_prompt
from memroute.llm.steps import LlmAssistant
from memroute.stores import Store
from memroute.types import new_id, utcnow

SESSIONS = "investigate.sessions"
TOOLS = ("find_definitions", "find_references", "search_text", "get_symbols", "analyze_structure", "query")
MAX_QUERY_CHARS = 10_000
_UNMET_TOOLS = {"symbols": ["find_definitions", "get_symbols", "query"],
                "entry_points": ["find_references", "analyze_structure"],
                "files": ["analyze_structure", "search_text"], "patterns": ["analyze_structure", "query"]}


class Investigator:
    """Investigation sessions over ``store``; code tools over ``workspace`` (``None``: no code tools, and
    submitted symbols and files are taken as stated). ``embedder`` (or its name, loaded on the first
    ``query``) embeds symbols for ``query``. ``owner`` is the default owner of calls. ``llm`` (optional, its
    policy's steps including ``slots``) lets :meth:`set_query_frame` extract the slots itself when the caller
    gives none (seed 002's ``QueryDecomposer``); the server still validates every quote. ``code_cache`` (a
    folder) keeps ``query``'s symbol index of each repository across processes."""

    def __init__(self, store: Store, workspace: Workspace | None = None, *, embedder: Embedder | str = "use-m3",
                 owner: str = "default", llm: LlmAssistant | None = None,
                 code_cache: str | Path | None = None) -> None:
        self.store = store
        self.workspace = workspace
        self.owner = owner
        self.llm = llm
        self.index = CodeIndex(workspace) if workspace is not None else None
        self.search = SymbolSearch(self.index, embedder, code_cache) if self.index is not None else None
        self.log = DecisionLog(store)
        # Steps on one session run one at a time (striped locks: bounded, whatever the number of sessions).
        self._locks = tuple(threading.Lock() for _ in range(64))

    # ------------------------------------------------------------------------------------ steps
    def start_session(self, query: str, intent: Intent | str | None = None, *, repo: str | None = None,
                      owner: str | None = None) -> StepResult:
        """Open a session: the intent (given, or classified from the query), the question category and
        seed 002's slot-extraction prompt in the query's language."""
        owner = owner or self.owner
        if not isinstance(query, str) or not query.strip():
            raise InputError("query is empty: give the request as the user wrote it")
        if len(query) > MAX_QUERY_CHARS:
            raise InputError(f"query has {len(query):,} characters; at most {MAX_QUERY_CHARS:,}")
        analysis = analyze(query)
        rule_intent = analysis.intent
        chosen = rule_intent if intent is None or intent == "" else intent_of(intent)
        category = analysis.question_category
        root = None
        if self.workspace is not None:
            root = str(self.workspace.root(repo))
        elif repo:
            raise InputError("no repository is configured for investigation: start the server with --repo PATH")
        now = utcnow()
        session = InvestigationSession(
            id=new_id(), owner=owner, query=query, language=analysis.language, intent=chosen,
            intent_source="rules" if chosen is rule_intent and intent in (None, "") else "caller",
            rule_intent=rule_intent, category=category.value if category else None,
            category_confidence=1.0 if category else 0.0, repo=root, phase=Phase.FRAME,
            history=[PhaseChange(source=None, target=Phase.FRAME, step="start_session", at=now)],
            created_at=now, updated_at=now)
        prompt = slots_prompt(query, analysis.language).messages[-1]["content"]
        session = self._save(self._record(session, "start_session", transitions=["START→FRAME"],
                                          reason=f"intent {chosen.value} ({session.intent_source})"))
        return StepResult(session_id=session.id, step="start_session", phase=session.phase,
                          next_step=WHAT_NEXT[Phase.FRAME],
                          detail={"intent": chosen.value, "intent_source": session.intent_source,
                                  "rule_intent": rule_intent.value, "category": session.category,
                                  "category_confidence": session.category_confidence, "language": session.language,
                                  "repo": root, "extraction_prompt": prompt})

    def set_query_frame(self, session_id: str, slots: Mapping[str, Any] | None = None, *,
                        owner: str | None = None) -> StepResult:
        """Validate the extracted slots against the query (a quote not in the query is rejected), then
        assess the risk and return the exploration requirements and the guidance for missing slots.

        ``slots=None`` asks the configured LLM to extract them (step ``slots``). If its call fails or its
        answer breaks the contract (a quote not in the query, ...), the frame is empty, so every slot is
        missing and guided: the decision log records the fallback and why."""
        llm_record: dict[str, Any] | None = None
        fallback: str | None = None
        if slots is None:
            # Outside the session's lock: a slow endpoint must not hold up other sessions' steps.
            current = self._load(session_id, owner or self.owner)
            expect_phase(current, "set_query_frame", Phase.FRAME, Phase.EXPLORATION)
            slots, llm_record, fallback = self._extract(current.query)
        with self._session(session_id, owner) as (s, save):
            expect_phase(s, "set_query_frame", Phase.FRAME, Phase.EXPLORATION)
            if not isinstance(slots, Mapping):
                raise InputError("slots must be an object: {slot: {\"value\": ..., \"quote\": ...}} with slots "
                                 f"{', '.join(SLOTS)}")
            early = []
            rest: dict[str, Any] = {}
            for name, data in slots.items():
                quote = data.get("quote") if isinstance(data, Mapping) else None
                if isinstance(quote, str) and len(quote) > len(s.query):
                    early.append({"slot": str(name), "reason": f"quote is longer than the query ({len(quote)} > "
                                  f"{len(s.query)} characters): it cannot come from it"})
                else:
                    rest[str(name)] = data
            checked = validate_frame(s.query, rest)
            rejected = early + [{"slot": r.slot, "reason": r.reason} for r in checked.rejected]
            frame = checked.frame
            risk, why = assess_risk(frame, s.intent)
            requirements = REQUIREMENTS[risk].to_dict()
            hints, tools = guidance(frame.missing_slots, s.language)
            s = s.model_copy(update={
                "query_frame": frame.to_dict(), "rejected_slots": rejected, "missing_slots": frame.missing_slots,
                "risk_level": risk, "risk_reason": why, "requirements": requirements, "guidance": hints,
                "recommended_tools": tools,
                "slot_source": {n: SlotSource.UNRESOLVED for n in SLOTS}})
            transitions = []
            if s.phase == Phase.FRAME:
                s = move(s, Phase.EXPLORATION, "set_query_frame", why)
                transitions.append("FRAME→EXPLORATION")
            extra = {} if llm_record is None else {"slots_from": "llm", "llm": llm_record}
            s = save(self._record(s, "set_query_frame", transitions=transitions, reason=why,
                                  detail={"rejected": rejected, **extra}, fallback=fallback))
            return StepResult(session_id=s.id, step="set_query_frame", phase=s.phase, next_step=WHAT_NEXT[s.phase],
                              detail={"query_frame": s.query_frame, "rejected": rejected,
                                      "missing_slots": s.missing_slots, "risk_level": risk.value, "risk_reason": why,
                                      "requirements": requirements, "guidance": hints,
                                      "recommended_tools": tools, **extra})

    def _extract(self, query: str) -> tuple[dict[str, Any], dict[str, Any], str | None]:
        """The LLM's slots for ``query`` (validated), its trace record, and the fallback reason if it failed."""
        if self.llm is None or not self.llm.policy.enabled("slots"):
            why = ("no LLM is configured" if self.llm is None
                   else "the LLM policy's steps do not include 'slots' (MEMROUTE_LLM_STEPS)")
            raise InputError(f"no slots given and {why}: extract them with extraction_prompt and pass them, or "
                             "configure an LLM with the 'slots' step so the server extracts them")
        outcome = query_frame(self.llm, query)
        frame = outcome.value.frame
        slots = {name: {"value": slot.value, "quote": slot.quote}
                 for name in SLOTS if (slot := getattr(frame, name)) is not None}
        record = outcome.record(**outcome.value.to_dict()) if outcome.used_llm else outcome.record()
        fallback = None if outcome.fallback is None else f"LLM slot extraction: {outcome.fallback} ({outcome.detail})"
        return slots, record, fallback

    def submit_understanding(self, session_id: str, *, symbols: Sequence[str] = (), entry_points: Sequence[str] = (),
                             patterns: Sequence[str] = (), files: Sequence[str] = (),
                             evidence: Sequence[Mapping[str, Any]] = (), owner: str | None = None) -> StepResult:
        """Check what the agent found against the requirements of the session's risk level (only symbols,
        entry points and files the repository has count) and against the query (NL→symbol consistency),
        then move to READY, or to SEMANTIC when the target is unknown or matches none of the symbols."""
        with self._session(session_id, owner) as (s, save):
            expect_phase(s, "submit_understanding", Phase.EXPLORATION)
            given = {"symbols": strings(symbols, "symbols"), "entry_points": strings(entry_points, "entry_points"),
                     "files": strings(files, "files")}
            confirmed, unconfirmed, notes = self._ground(s, given)
            confirmed["patterns"] = strings(patterns, "patterns")
            runs = self._evidence(s, evidence)
            requirements = s.requirements or {}
            counts = {k: len(confirmed[k]) for k in requirements}
            unmet = {k: {"required": v, "confirmed": counts[k]} for k, v in requirements.items() if counts[k] < v}
            names = confirmed["symbols"] + confirmed["entry_points"]
            frame = s.query_frame or {}
            mapped: dict[str, list[str]] = {}
            for slot in SLOTS:
                data = frame.get(slot)
                if data:
                    mapped[slot] = list(dict.fromkeys(related_symbols(data["value"], names)
                                                      + related_symbols(data["quote"], names)))
                    if not mapped[slot] and names and self.search is not None and s.repo is not None:
                        mapped[slot] = self.search.related(data["value"], names, repo=s.repo)
            evidenced = {slot: [r.summary() for r in results] for slot, results in runs.items() if slot and results}
            sources = {slot: SlotSource.FACT if frame.get(slot) and (mapped.get(slot) or evidenced.get(slot))
                       else SlotSource.UNRESOLVED for slot in SLOTS}
            blocking = [] if mapped.get("target_feature") else ["target_feature"]
            if s.intent == Intent.MODIFY and not frame.get("observed_issue") and not evidenced.get("observed_issue"):
                blocking.append("observed_issue")
            s = s.model_copy(update={
                "understanding": Understanding(**confirmed, unconfirmed=unconfirmed), "mapped_symbols": mapped,
                "slot_source": sources, "slot_evidence": {**s.slot_evidence, **evidenced}})
            transitions: list[str] = []
            fallback = None
            if unmet:
                confidence, tools = "insufficient", list(dict.fromkeys(t for k in unmet for t in _UNMET_TOOLS[k]))
                reason = "requirements not met: " + ", ".join(f"{k} {v['confirmed']}/{v['required']}"
                                                              for k, v in unmet.items())
            elif blocking:
                confidence, tools = "low", ["query", "find_definitions"]
                reason = fallback = ("no symbol matches the target feature" if frame.get("target_feature")
                                     else "the target feature is unknown")
                if "observed_issue" in blocking:
                    reason = fallback = f"{reason}; MODIFY without an observed issue"
                s = move(s.model_copy(update={"blocking_slots": blocking}), Phase.SEMANTIC, "submit_understanding",
                          reason)
                transitions.append("EXPLORATION→SEMANTIC")
            else:
                confidence, tools, reason = "high", [], "requirements met and the target feature maps to symbols"
                s = move(s, Phase.READY, "submit_understanding", reason)
                transitions.append("EXPLORATION→READY")
            detail = {"confidence": confidence, "reason": reason, "requirements": requirements,
                      "confirmed_counts": counts, "unmet": unmet, "unconfirmed": unconfirmed,
                      "mapped_symbols": mapped, "slot_source": {k: v.value for k, v in sources.items()},
                      "blocking_slots": blocking if s.phase == Phase.SEMANTIC else [],
                      "evidence": [dict(r.summary(), slot=slot) for slot, rs in runs.items() for r in rs],
                      "recommended_tools": tools, "notes": notes}
            s = save(self._record(s, "submit_understanding", transitions=transitions, reason=reason, detail=detail,
                                  tools=[r for rs in runs.values() for r in rs], fallback=fallback))
            return StepResult(session_id=s.id, step="submit_understanding", phase=s.phase,
                              next_step=WHAT_NEXT[s.phase], detail=detail)

    def submit_hypotheses(self, session_id: str, hypotheses: Sequence[Mapping[str, Any]], *,
                          owner: str | None = None) -> StepResult:
        """State the blocking slots (and any others) as HYPOTHESIS: a value and the symbols or files that
        are believed to implement it. The session moves to VERIFICATION."""
        with self._session(session_id, owner) as (s, save):
            expect_phase(s, "submit_hypotheses", Phase.SEMANTIC, Phase.VERIFICATION)
            parsed = parse_hypotheses(hypotheses)
            missing = [slot for slot in s.blocking_slots if slot not in {h.slot for h in parsed}]
            if missing:
                raise InputError(f"hypotheses must cover the blocking slot(s) {', '.join(missing)}")
            kept = [h for h in s.hypotheses if h.verified and h.slot not in {p.slot for p in parsed}]
            sources = {**s.slot_source, **{h.slot: SlotSource.HYPOTHESIS for h in parsed}}
            s = s.model_copy(update={"hypotheses": kept + parsed, "slot_source": sources})
            transitions = []
            if s.phase == Phase.SEMANTIC:
                s = move(s, Phase.VERIFICATION, "submit_hypotheses", "hypotheses stated")
                transitions.append("SEMANTIC→VERIFICATION")
            s = save(self._record(s, "submit_hypotheses", transitions=transitions, reason="hypotheses stated",
                                  detail={"hypotheses": [h.to_dict() for h in parsed]}))
            return StepResult(session_id=s.id, step="submit_hypotheses", phase=s.phase, next_step=WHAT_NEXT[s.phase],
                              detail={"hypotheses": [h.to_dict() for h in s.hypotheses],
                                      "ready_blockers": s.ready_blockers()})

    def verify_hypothesis(self, session_id: str, slot: str, evidence: Sequence[Mapping[str, Any]], *,
                          owner: str | None = None) -> StepResult:
        """Re-run the evidence's tools on the session's repository: the hypothesis is confirmed (FACT) when a
        result finds one of its symbols or files, and, for the target feature, its value names one of its
        symbols. When no HYPOTHESIS is left, the session is READY."""
        with self._session(session_id, owner) as (s, save):
            expect_phase(s, "verify_hypothesis", Phase.VERIFICATION)
            index = next((i for i, h in enumerate(s.hypotheses) if h.slot == slot and not h.verified), None)
            if index is None:
                states = ", ".join(f"{h.slot} ({'verified' if h.verified else 'HYPOTHESIS'})" for h in s.hypotheses)
                raise InputError(f"no unverified hypothesis for slot {slot!r}; hypotheses: {states or 'none'}")
            if not evidence:
                raise InputError("verify_hypothesis needs evidence: at least one {\"tool\": ..., \"args\": {...}}")
            h = s.hypotheses[index]
            runs = self._evidence(s, [{**dict(e), "slot": slot} for e in evidence])[slot]
            supporting = [r for r in runs if supports(h, r)]
            reasons = []
            if not supporting:
                reasons.append("no tool result found any of the hypothesis's symbols or files")
            if slot == "target_feature" and not any(is_related(h.value, sym) for sym in h.symbols) and not (
                    self.search is not None and s.repo is not None
                    and self.search.related(h.value, h.symbols, repo=s.repo)):
                reasons.append(f"the value {h.value!r} does not name any of its symbols ({', '.join(h.symbols)})")
            verified = not reasons
            transitions = []
            if verified:
                h = h.model_copy(update={"verified": True, "evidence": [r.summary() for r in supporting]})
                hypotheses = [*s.hypotheses[:index], h, *s.hypotheses[index + 1:]]
                s = s.model_copy(update={"hypotheses": hypotheses,
                                         "slot_source": {**s.slot_source, slot: SlotSource.FACT},
                                         "mapped_symbols": {**s.mapped_symbols, slot: h.symbols},
                                         "slot_evidence": {**s.slot_evidence, slot: h.evidence}})
                if not s.ready_blockers():
                    s = move(s, Phase.READY, "verify_hypothesis", "every hypothesis is confirmed")
                    transitions.append("VERIFICATION→READY")
            reason = "confirmed by " + ", ".join(r.tool for r in supporting) if verified else "; ".join(reasons)
            detail = {"slot": slot, "verified": verified, "reason": reason,
                      "evidence": [r.summary() for r in runs], "ready_blockers": s.ready_blockers()}
            s = save(self._record(s, "verify_hypothesis", transitions=transitions, reason=reason, detail=detail,
                                  tools=runs))
            return StepResult(session_id=s.id, step="verify_hypothesis", phase=s.phase, next_step=WHAT_NEXT[s.phase],
                              detail=detail)

    def close(self) -> None:
        """Close the symbol indexes of ``query`` (the store is the caller's)."""
        if self.search is not None:
            self.search.close()

    def get_session(self, session_id: str, *, owner: str | None = None) -> InvestigationSession:
        return self._load(session_id, owner or self.owner)

    def list_sessions(self, *, owner: str | None = None) -> list[InvestigationSession]:
        sessions = [InvestigationSession.model_validate(v) for _, v in
                    self.store.list_state(SESSIONS, owner or self.owner)]
        return sorted(sessions, key=lambda x: x.updated_at)

    def decision_log(self, session: str | None = None, *, owner: str | None = None, step: str | None = None,
                     phase: str | None = None, risk_level: str | None = None, since: datetime | str | None = None,
                     limit: int | None = None) -> list[DecisionRecord]:
        return self.log.records(owner or self.owner, session=session, step=step, phase=phase, risk_level=risk_level,
                                since=since, limit=limit)

    def export_decision_log(self, session: str | None = None, *, owner: str | None = None) -> str:
        """The decision log as JSON Lines (one record per line, oldest first)."""
        return to_jsonl(self.decision_log(session, owner=owner))

    # ------------------------------------------------------------------------------- code tools
    def tool(self, name: str, args: Mapping[str, Any], *, session: str | None = None,
             owner: str | None = None) -> ToolResult:
        """Run a code-intelligence tool; with ``session``, on the session's repository, and the call and a
        summary of its results are added to the session's decision log."""
        if session is None:
            return self._call(name, dict(args))
        owner = owner or self.owner
        s = self._load(session, owner)
        result = self._call(name, {**dict(args), "repo": args.get("repo") or s.repo})
        with self._session(session, owner) as (s, save):
            s = s.model_copy(update={"tool_calls": s.tool_calls + 1})
            save(self._record(s, "tool", reason=f"{name} called by the agent", tools=[result]))
        return result

    def find_definitions(self, name: str, **kwargs: Any) -> ToolResult:
        return self._named("find_definitions", {"name": name}, kwargs)

    def find_references(self, name: str, **kwargs: Any) -> ToolResult:
        return self._named("find_references", {"name": name}, kwargs)

    def search_text(self, pattern: str, **kwargs: Any) -> ToolResult:
        return self._named("search_text", {"pattern": pattern}, kwargs)

    def get_symbols(self, path: str | None = None, **kwargs: Any) -> ToolResult:
        return self._named("get_symbols", {"path": path}, kwargs)

    def analyze_structure(self, path: str | None = None, **kwargs: Any) -> ToolResult:
        return self._named("analyze_structure", {"path": path}, kwargs)

    def query(self, text: str, **kwargs: Any) -> ToolResult:
        return self._named("query", {"text": text}, kwargs)

    # -------------------------------------------------------------------------------- internals
    def _named(self, name: str, args: dict[str, Any], kwargs: dict[str, Any]) -> ToolResult:
        session, owner = kwargs.pop("session", None), kwargs.pop("owner", None)
        return self.tool(name, {**args, **kwargs}, session=session, owner=owner)

    def _call(self, name: str, args: dict[str, Any]) -> ToolResult:
        if self.index is None or self.search is None:
            raise InputError("no repository is configured for the code tools: start the server with --repo PATH")
        if name not in TOOLS:
            raise InputError(f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")
        fn: Callable[..., ToolResult] = self.search.query if name == "query" else getattr(codetools, name)
        params = inspect.signature(fn).parameters
        accepted = [p for p in params if p != "index"]
        unknown = sorted(set(args) - set(accepted))
        if unknown:
            raise InputError(f"{name} does not take {', '.join(unknown)}; arguments: {', '.join(accepted)}")
        return fn(**args) if name == "query" else fn(self.index, **args)

    def _ground(self, s: InvestigationSession, given: dict[str, list[str]]
                ) -> tuple[dict[str, list[str]], list[dict[str, str]], list[str]]:
        """Keep the symbols, entry points and files that the session's repository has."""
        if self.index is None or self.workspace is None or s.repo is None:
            return given, [], ["not checked against code: no repository is configured"]
        confirmed: dict[str, list[str]] = {"symbols": [], "entry_points": [], "files": []}
        unconfirmed: list[dict[str, str]] = []
        for kind in ("symbols", "entry_points"):
            for item in given[kind]:
                name = item.split("(", 1)[0].strip()
                try:
                    found = codetools.find_definitions(self.index, name, repo=s.repo, limit=1).total > 0
                    reason = "no definition in the repository"
                except InputError as exc:
                    found, reason = False, str(exc)
                if found:
                    confirmed[kind].append(item)
                else:
                    unconfirmed.append({"kind": kind[:-1], "item": item, "reason": reason})
        root = Path(s.repo)
        for item in given["files"]:
            try:
                path = self.workspace.resolve(item, root)
                if not path.is_file():
                    raise InputError(f"{item} is not a file")
            except (InputError, NotFoundError) as exc:
                unconfirmed.append({"kind": "file", "item": item, "reason": str(exc)})
                continue
            rel = self.workspace.rel(path, root)
            if rel not in confirmed["files"]:
                confirmed["files"].append(rel)
        return confirmed, unconfirmed, []

    def _evidence(self, s: InvestigationSession, items: Sequence[Mapping[str, Any]]) -> dict[str, list[ToolResult]]:
        """Re-run each evidence item's tool on the session's repository, grouped by slot ("" for none)."""
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise InputError("evidence must be a list of {\"tool\": ..., \"args\": {...}, \"slot\": ...}")
        if len(items) > 20:
            raise InputError(f"at most 20 evidence items, got {len(items)}")
        out: dict[str, list[ToolResult]] = {}
        for item in items:
            if not isinstance(item, Mapping) or not isinstance(item.get("tool"), str):
                raise InputError("each evidence item is {\"tool\": name, \"args\": {...}} (optionally \"slot\")")
            args = item.get("args") or {}
            if not isinstance(args, Mapping):
                raise InputError(f"evidence for {item['tool']}: args must be an object")
            slot = str(item.get("slot") or "")
            if slot and slot not in SLOTS:
                raise InputError(f"unknown slot {slot!r}; slots: {', '.join(SLOTS)}")
            out.setdefault(slot, []).append(self._call(item["tool"], {**dict(args), "repo": s.repo}))
        return out

    def _record(self, s: InvestigationSession, step: str, *, transitions: Sequence[str] = (), reason: str = "",
                detail: Mapping[str, Any] | None = None, tools: Sequence[ToolResult] = (),
                fallback: str | None = None) -> InvestigationSession:
        """Append the step's decision record and return the session with its log counter advanced."""
        self.log.append(s.owner, DecisionRecord(
            session_id=s.id, seq=s.log_count, step=step, query=s.query, timestamp=utcnow(), intent=s.intent.value,
            category=s.category, category_confidence=s.category_confidence, query_frame=s.query_frame,
            missing_slots=s.missing_slots, risk_level=s.risk_level.value if s.risk_level else None,
            slot_based_tools=s.recommended_tools, selected_tools=[t.tool for t in tools],
            tool_selection_reason=reason, tool_results=[t.summary() for t in tools],
            fallback_triggered=fallback is not None, fallback_reason=fallback, final_phase=s.phase.value,
            phase_transitions=list(transitions), detail=dict(detail or {})))
        return s.model_copy(update={"log_count": s.log_count + 1, "updated_at": utcnow()})

    def _load(self, session_id: str, owner: str) -> InvestigationSession:
        if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > 200:
            raise InputError("session id is empty or malformed: use the session_id start_session returned")
        value = self.store.get_state(SESSIONS, session_id, owner)
        if value is None:
            raise NotFoundError(f"no investigation session {session_id!r} for owner {owner!r}: start one with "
                                "start_session")
        return InvestigationSession.model_validate(value)

    def _session(self, session_id: str, owner: str | None) -> _Step:
        owner = owner or self.owner
        return _Step(self, session_id, owner, self._locks[hash((owner, str(session_id))) % len(self._locks)])

    def _save(self, s: InvestigationSession) -> InvestigationSession:
        self.store.put_state(SESSIONS, s.id, s.to_dict(), s.owner)
        return s


class _Step:
    """One step on a session: loads it under the session's lock and hands out a ``save``."""

    def __init__(self, inv: Investigator, session_id: str, owner: str, lock: threading.Lock) -> None:
        self.inv, self.session_id, self.owner, self.lock = inv, session_id, owner, lock

    def __enter__(self) -> tuple[InvestigationSession, Callable[[InvestigationSession], InvestigationSession]]:
        self.lock.acquire()
        try:
            return self.inv._load(self.session_id, self.owner), self.inv._save
        except BaseException:
            self.lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
