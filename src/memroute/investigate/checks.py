"""The checks and small rules behind each step of an investigation session: phases in order, what to do
next in each phase, the shape of submitted lists and hypotheses, and whether a tool result supports a
hypothesis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memroute.analysis import Intent
from memroute.analysis.frame import SLOTS
from memroute.errors import InputError
from memroute.investigate.codeindex import ToolResult
from memroute.investigate.session import Hypothesis, InvestigationSession, Phase, PhaseChange
from memroute.types import utcnow

MAX_ITEMS = 200
WHAT_NEXT = {
    Phase.FRAME: "extract the slots with extraction_prompt and call set_query_frame",
    Phase.EXPLORATION: "explore with the code tools (pass the session id), then call submit_understanding",
    Phase.SEMANTIC: "state the blocking slots as hypotheses (slot, value, symbols, files) with submit_hypotheses; "
                    "`query` finds candidate symbols by meaning",
    Phase.VERIFICATION: "confirm each hypothesis with verify_hypothesis and tool evidence "
                        "(e.g. {\"tool\": \"find_definitions\", \"args\": {\"name\": \"LoginService\"}})",
    Phase.READY: "the session is READY: make the change, guided by the confirmed symbols and files",
}


def intent_of(value: Intent | str) -> Intent:
    try:
        return Intent(str(value).strip().upper())
    except ValueError:
        raise InputError(f"unknown intent {value!r}; use one of {', '.join(i.value for i in Intent)} "
                         "(or leave it out to classify the query)") from None


def expect_phase(s: InvestigationSession, step: str, *phases: Phase) -> None:
    if s.phase not in phases:
        raise InputError(f"{step} is not possible in phase {s.phase.value} (it needs "
                         f"{' or '.join(p.value for p in phases)}): {WHAT_NEXT[s.phase]}")


def move(s: InvestigationSession, target: Phase, step: str, reason: str) -> InvestigationSession:
    change = PhaseChange(source=s.phase, target=target, step=step, at=utcnow(), reason=reason)
    return s.model_copy(update={"phase": target, "history": [*s.history, change]})


def strings(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InputError(f"{what} must be a list of strings")
    if len(values) > MAX_ITEMS:
        raise InputError(f"{what} has {len(values)} items; at most {MAX_ITEMS}")
    out: list[str] = []
    for v in values:
        if not isinstance(v, str) or not v.strip() or len(v) > 500:
            raise InputError(f"every item of {what} must be a non-empty string of at most 500 characters")
        if v.strip() not in out:
            out.append(v.strip())
    return out


def parse_hypotheses(values: Sequence[Mapping[str, Any]]) -> list[Hypothesis]:
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise InputError("hypotheses must be a non-empty list of {\"slot\", \"value\", \"symbols\", \"files\"}")
    out: list[Hypothesis] = []
    for v in values:
        if not isinstance(v, Mapping):
            raise InputError("each hypothesis is {\"slot\", \"value\", \"symbols\": [...], \"files\": [...]}")
        slot, value = v.get("slot"), v.get("value")
        if slot not in SLOTS:
            raise InputError(f"unknown slot {slot!r}; slots: {', '.join(SLOTS)}")
        if not isinstance(value, str) or not value.strip() or len(value) > 500:
            raise InputError(f"hypothesis for {slot}: value must be a non-empty string of at most 500 characters")
        symbols, files = strings(v.get("symbols") or [], "symbols"), strings(v.get("files") or [], "files")
        if not symbols and not files:
            raise InputError(f"hypothesis for {slot}: name the symbols or files believed to implement it")
        out.append(Hypothesis(slot=slot, value=value.strip(), symbols=symbols, files=files))
    return out


def supports(h: Hypothesis, result: ToolResult) -> bool:
    """A result row that finds one of the hypothesis's symbols (by name) or one of its files."""
    names = {s.split("(", 1)[0].replace("::", ".") for s in h.symbols}
    lasts = {n.rsplit(".", 1)[-1] for n in names}
    files = {f.strip().removeprefix("./") for f in h.files}
    for row in result.results:
        name, qual = row.get("name"), str(row.get("qualname") or "")
        if name in lasts and any(qual == n or qual.endswith("." + n) or n == name for n in names):
            return True
        if row.get("file") in files:
            return True
    return False
