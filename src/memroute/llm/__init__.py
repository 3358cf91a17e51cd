"""Optional LLM assistance through any OpenAI-compatible endpoint, with budgets, timeouts and fallbacks."""

from memroute.llm.client import LLM, Completion, LLMError, OpenAICompatibleLLM
from memroute.llm.contracts import (
    AgentScores,
    ContractError,
    Expansion,
    Intents,
    Keywords,
    Rerank,
    Slots,
    check_ids,
    parse_json,
)
from memroute.llm.policy import Budget, LlmPolicy
from memroute.llm.prompts import Prompt, expansion_prompt, keywords_prompt, rerank_prompt, route_rerank_prompt
from memroute.llm.steps import LlmAssistant, StepOutcome

__all__ = [
    "LLM",
    "AgentScores",
    "Budget",
    "Completion",
    "ContractError",
    "Expansion",
    "Intents",
    "Keywords",
    "LLMError",
    "LlmAssistant",
    "LlmPolicy",
    "OpenAICompatibleLLM",
    "Prompt",
    "Rerank",
    "Slots",
    "StepOutcome",
    "check_ids",
    "expansion_prompt",
    "keywords_prompt",
    "parse_json",
    "rerank_prompt",
    "route_rerank_prompt",
]
