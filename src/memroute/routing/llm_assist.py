"""Seed 004's LLM-assisted routing: keywords, intent labels and a top-N rerank, behind the policy.

1. **Enrich** (cheap): the model's keywords (at most 16, normalised by the same tokenizer as the message)
   join the message's tokens, and its intent labels ("translate", "vision", ...) join the query's tags,
   where the keyword-boost strategy counts them; then every agent is scored again.
2. **Rerank** (costly): the best ``top_n`` agents by rule score and their safe documents (seed 004's doc
   builder: never a full system prompt) go to the model, which scores each 0..1; the final score of those
   agents is ``(1 - blend) * rule + blend * llm`` (seed 004: 0.6 rule + 0.4 LLM), with the model's score
   put on the rule scale of the agents shown (0 → the lowest rule score among them, 1 → the highest).
   So the blend reorders within the range the rules gave those agents and leaves the spread of scores,
   in which no-route thresholds and the conversation router's margins are measured, as the rules set it:
   the model refines the rule ranking (it wins close calls) and cannot override a clear rule lead. With
   raw 0..1 scores, a scripted model that only repeated the rule order took SGD conversation routing
   from 0.959 to 0.574 (20 dialogues: docs/llm.md). Agents it did not score keep their rule score, so
   the order of the rest is untouched. Only the agent ids shown may come back.

Both run only when the policy says the rules are unsure: the message is short, Japanese or Korean, needs
its conversation, or the two best rule scores are close. On any failure the rule scores stand and the
step's record says why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from memroute.llm.contracts import AgentScores, Intents, Keywords, check_ids
from memroute.llm.prompts import intents_prompt, keywords_prompt, route_rerank_prompt
from memroute.llm.steps import LlmAssistant
from memroute.routing.documents import build_doc
from memroute.routing.strategies import PreparedQuery
from memroute.text import detect_language, tokenize

if TYPE_CHECKING:
    from memroute.routing.composite import AgentRouter, ScoredQuery

DOC_CHARS = 400
"""Characters of an agent's safe document shown to the model."""


def assist(router: AgentRouter, assistant: LlmAssistant, scored: ScoredQuery, *, locale: str | None = None,
           needs_context: bool = False) -> tuple[ScoredQuery, tuple[dict[str, Any], ...]]:
    """``scored`` with the LLM's help where the policy allows it, and a record of every step."""
    policy = assistant.policy
    budget = assistant.budget()
    query = scored.query
    language = detect_language(query.text) if query.text else "en"
    cjk = language in ("ja", "ko") or (locale or "").lower().startswith(("ja", "ko", "zh"))
    short = len(query.tokens) <= 3

    def why() -> str | None:
        best = router.order(scored, limit=2)
        gap = float(scored.total[best[0]] - scored.total[best[1]]) if len(best) > 1 else None
        return policy.why_call(needs_context=needs_context, short=short, cjk=cjk, top_gap=gap)

    records: list[dict[str, Any]] = []
    enrich_why = why()
    none: list[str] = []
    keywords = assistant.run("keywords", keywords_prompt(query.text, language), Keywords,
                             lambda k: [t for word in k.keywords for t in tokenize(word)], none, budget, enrich_why)
    intents = assistant.run("intents", intents_prompt(query.text), Intents,
                            lambda i: [label.strip().lower() for label in i.intents if label.strip()], none, budget,
                            enrich_why)
    new_tokens = [t for t in keywords.value if t not in query.tokens]
    new_tags = [t for t in intents.value if t not in query.tags]
    records.append(keywords.record(tokens=new_tokens) if keywords.used_llm else keywords.record())
    records.append(intents.record(tags=new_tags) if intents.used_llm else intents.record())
    if new_tokens or new_tags:
        enriched = PreparedQuery(query.text, [*query.tokens, *dict.fromkeys(new_tokens)], query.content_types,
                                 (*query.tags, *dict.fromkeys(new_tags)), query.hints, query.vector)
        scored = router.score(enriched, scored.index)

    shown = router.order(scored, limit=min(policy.top_n, scored.index.n))
    agents = scored.index.agents
    ids = {agents[i].id: i for i in shown}

    def convert(answer: AgentScores) -> dict[int, float]:
        check_ids([s.id for s in answer.scores], ids)
        return {ids[s.id]: s.score for s in answer.scores}

    prompt = route_rerank_prompt(query.text, [(agents[i].id, build_doc(agents[i])[:DOC_CHARS]) for i in shown],
                                 locale or language)
    unscored: dict[int, float] = {}
    rerank = assistant.run("route_rerank", prompt, AgentScores, convert, unscored, budget,
                           why() if len(shown) > 1 else None)
    if rerank.used_llm and rerank.value:
        total = scored.total.copy()
        b = np.float32(policy.blend)
        # The model's 0..1 is put on the rule scale of the agents shown (0: the lowest, 1: the highest):
        # raw 0..1 scores dwarf rule scores (sums over many strategies), and would move every no-route
        # threshold and conversation margin measured on that scale. Exact ties get a hair of spread.
        lo, hi = float(scored.total[shown].min()), float(scored.total[shown].max())
        spread = max(hi - lo, 1e-3)
        for i, llm_score in rerank.value.items():
            total[i] = (1 - b) * scored.total[i] + b * np.float32(lo + llm_score * spread)
        scored = replace(scored, total=np.round(total, 6).astype(np.float32))
        records.append(rerank.record(scores={agents[i].id: round(v, 3) for i, v in rerank.value.items()}))
    else:
        records.append(rerank.record())
    return scored, tuple(records)
