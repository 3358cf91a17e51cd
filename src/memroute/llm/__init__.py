"""Optional LLM assistance through any OpenAI-compatible endpoint, with budgets, timeouts and fallbacks.

    >>> from memroute.llm import LlmAssistant, LlmPolicy, OpenAICompatibleLLM
    >>> llm = LlmAssistant(OpenAICompatibleLLM("http://localhost:11434/v1", "qwen2.5:7b-instruct"), LlmPolicy())
    >>> # Memory.open(url, llm=llm); AgentRouter(llm=llm): see docs/llm.md

Without it everything is rule-based; with it, each step asks the model only when its policy says so, and
falls back to the rule-based result on any failure, naming why in the trace.
"""

from memroute.llm.client import LLM, Completion, LLMError, OpenAICompatibleLLM, needs_key
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
from memroute.llm.factory import assistant_from_settings, policy_from_settings
from memroute.llm.frame import query_frame
from memroute.llm.policy import DEFAULT_STEPS, STEPS, Budget, LlmPolicy
from memroute.llm.prompts import (
    Prompt,
    expansion_prompt,
    intents_prompt,
    keywords_prompt,
    rerank_prompt,
    route_rerank_prompt,
    slots_prompt,
)
from memroute.llm.steps import LlmAssistant, StepOutcome
from memroute.llm.usage import LlmUsage

__all__ = [
    "DEFAULT_STEPS",
    "LLM",
    "STEPS",
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
    "LlmUsage",
    "OpenAICompatibleLLM",
    "Prompt",
    "Rerank",
    "Slots",
    "StepOutcome",
    "assistant_from_settings",
    "check_ids",
    "expansion_prompt",
    "intents_prompt",
    "keywords_prompt",
    "needs_key",
    "parse_json",
    "policy_from_settings",
    "query_frame",
    "rerank_prompt",
    "route_rerank_prompt",
    "slots_prompt",
]
