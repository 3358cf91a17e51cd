"""Recall's LLM steps (seed 001 phases 1 and 3), each behind the policy and falling back to the rules.

- **Expansion** adds the model's queries (at most 5) to the rule-based ones, as extra queries that weigh
  half the message (like every extra query); references it resolved that the rules did not are appended
  to the original query, so that they reach the vector search too (the rule path does the same).
- **Rerank** shows the model the best ``recall_top_n`` candidates of the local ranking, by position
  (``1``, ``2``, ...: short, and no store id reaches the prompt), and blends its judgement into the local
  score: ``(1 - blend) * local + blend * llm`` with llm = 1 for high, 0.6 for medium and 0 for a candidate
  it left out; candidates it was not shown keep their local score. Its labels and reasons replace the
  rule-based ones for the candidates it saw. It can reorder and drop what the search found, and pick a
  candidate the local ranking put low; it can never add a memory: ids are checked against the candidates
  shown, and any unknown id, duplicate, or more than 5 items drops the whole answer (``contract``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memroute.analysis import QueryAnalysis, ReferenceType
from memroute.llm.contracts import Expansion, Rerank, check_ids
from memroute.llm.policy import Budget
from memroute.llm.prompts import expansion_prompt, rerank_prompt
from memroute.llm.steps import LlmAssistant
from memroute.retrieval.decide import Relevance
from memroute.retrieval.expand import EXTRA_WEIGHT, ExpandedQuery
from memroute.retrieval.rerank import Candidate
from memroute.types import Language, Message

LLM_SCORE: dict[str, float] = {"high": 1.0, "medium": 0.6}
RESOLVED_CHARS = 200
"""At most this much of the model's resolutions is appended to the original query."""


def expand_with_llm(assistant: LlmAssistant, budget: Budget, analysis: QueryAnalysis, recent: Sequence[Message],
                    queries: list[ExpandedQuery], max_extra: int) -> tuple[list[ExpandedQuery], dict[str, Any]]:
    """The rule-based ``queries`` merged with the model's; and the step's trace record."""
    policy = assistant.policy
    unresolved = any(r.resolved is None and r.type != ReferenceType.TEMPORAL for r in analysis.references)
    why = policy.why_call(needs_context=analysis.needs_context or unresolved, short=len(analysis.keywords) < 3,
                          unsure=len(analysis.parts) > 1)
    prompt = expansion_prompt(analysis.text, [(m.role, m.text) for m in recent], analysis.language)
    outcome = assistant.run("expand", prompt, Expansion, lambda e: e, None, budget, why)
    if outcome.value is None:
        return queries, outcome.record()
    answer: Expansion = outcome.value
    original = queries[0]
    known = {original.text.casefold(), analysis.text.casefold()}
    known.update((r.resolved or "").casefold() for r in analysis.references if r.resolved)
    resolved: list[str] = []
    for ref in answer.detected_references:
        value = (ref.resolved or "").strip()
        if ref.type != "temporal" and value and value.casefold() not in known \
                and value.casefold() not in original.text.casefold():
            known.add(value.casefold())
            resolved.append(value)
    addition = " ".join(resolved)[:RESOLVED_CHARS].strip()
    if addition:
        original = replace(original, text=f"{original.text} {addition}",
                           vector_text=f"{original.vector_text} {addition}" if original.vector_text else None)
    seen = {q.text.strip().casefold() for q in queries} | {analysis.text.strip().casefold()}
    added: list[ExpandedQuery] = []
    for text in answer.expanded_queries[:max_extra]:
        if text.casefold() not in seen:
            seen.add(text.casefold())
            added.append(ExpandedQuery(text, "llm", EXTRA_WEIGHT))
    return [original, *queries[1:], *added], outcome.record(queries=[q.text for q in added], resolved=resolved)


@dataclass(frozen=True, slots=True)
class LlmJudgement:
    """The model's rerank answer applied to the candidates (indices into the candidate list)."""

    order: list[int]
    final: dict[int, float]
    """Blended score of every candidate it was shown."""
    levels: dict[int, Relevance]
    reasons: dict[int, str]
    judged: dict[int, float] = field(default_factory=dict)
    """The model's score (1 high, 0.6 medium, 0 left out) of every candidate it was shown."""
    injection_strategy: str | None = None
    record: dict[str, Any] = field(default_factory=dict)

    def apply(self, j: int, score: float, level: Relevance, reason: str) -> tuple[float, Relevance, str]:
        """A returned memory's (score, relevance, reason) with the model's judgement when it saw it."""
        if j not in self.final:
            return score, level, reason
        return self.final[j], self.levels.get(j, "none"), self.reasons.get(j, reason)


def rerank_with_llm(assistant: LlmAssistant, budget: Budget, analysis: QueryAnalysis, recent: Sequence[Message],
                    language: Language, candidates: Sequence[Candidate], order: list[int],
                    local: Sequence[float], reranked: bool, high_p: float) -> LlmJudgement:
    """``local``: each candidate's local score (the reranker's probability, or the fused score when the
    local reranker is off); ``order``: the local order. Returns the order to use and the judgement."""
    policy = assistant.policy
    shown = order[: policy.recall_top_n]
    top = [local[j] for j in shown[:2]]
    gap = top[0] - top[1] if len(top) > 1 else None
    why = policy.why_call(needs_context=analysis.needs_context, short=len(analysis.keywords) < 3,
                          top_gap=gap if reranked else None,
                          unsure=not reranked or (bool(top) and top[0] < high_p))
    rows = [(str(k + 1), _date(candidates[j]), candidates[j].memory.full_text) for k, j in enumerate(shown)]
    prompt = rerank_prompt(analysis.text, [(m.role, m.text) for m in recent], rows, language)
    allowed = {row[0]: j for row, j in zip(rows, shown, strict=True)}

    def convert(answer: Rerank) -> Rerank:
        check_ids([item.id for item in answer.relevant], allowed)
        return answer

    outcome = assistant.run("rerank", prompt, Rerank, convert, None, budget, why)
    if outcome.value is None:
        return LlmJudgement(order, {}, {}, {}, record=outcome.record())
    answer: Rerank = outcome.value
    judged = {j: 0.0 for j in shown}
    levels: dict[int, Relevance] = {}
    reasons: dict[int, str] = {}
    for item in answer.relevant:
        j = allowed[item.id]
        judged[j] = LLM_SCORE[item.relevance]
        levels[j] = item.relevance
        reasons[j] = item.reason.strip()
    b = policy.blend
    final = {j: (1 - b) * local[j] + b * judged[j] for j in shown}
    position = {j: k for k, j in enumerate(order)}
    new_order = sorted(order, key=lambda j: (-final.get(j, local[j]), position[j]))
    record = outcome.record(relevant=[{"id": candidates[allowed[i.id]].memory.id, "relevance": i.relevance}
                                      for i in answer.relevant], injection_strategy=answer.injection_strategy,
                            shown=len(shown))
    return LlmJudgement(new_order, final, levels, reasons, judged, answer.injection_strategy, record)


def _date(candidate: Candidate) -> str:
    at = candidate.memory.occurred_at
    return at.date().isoformat() if at is not None else ""
