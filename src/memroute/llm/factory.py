"""An :class:`LlmAssistant` from :class:`memroute.Settings` (``MEMROUTE_LLM_*``), or None when no LLM is set."""

from __future__ import annotations

import os

from memroute.config import Settings, check_llm
from memroute.errors import ConfigError
from memroute.llm.client import OpenAICompatibleLLM
from memroute.llm.policy import LlmPolicy
from memroute.llm.steps import LlmAssistant


def policy_from_settings(settings: Settings) -> LlmPolicy:
    steps = frozenset(s.strip() for s in settings.llm_steps.split(",") if s.strip())
    return LlmPolicy(steps=steps, top_n=settings.llm_top_n, recall_top_n=settings.llm_recall_top_n,
                     step_timeout_s=settings.llm_timeout_s, request_timeout_s=settings.llm_request_timeout_s,
                     calls_per_request=settings.llm_calls_per_request,
                     tokens_per_request=settings.llm_tokens_per_request,
                     calls_per_minute=settings.llm_calls_per_minute,
                     tokens_per_minute=settings.llm_tokens_per_minute, blend=settings.llm_blend,
                     only_when_needed=settings.llm_only_when_needed, cache_ttl_s=settings.llm_cache_ttl_s)


def assistant_from_settings(settings: Settings) -> LlmAssistant | None:
    """The configured LLM with its policy; None when ``llm_url`` is empty. Raises :class:`ConfigError` for a
    configuration that cannot work (no model, no key where one is needed), before any message is handled."""
    if not settings.llm_url:
        return None
    settings = check_llm(settings, os.environ)
    if settings.llm_retries < 0:
        raise ConfigError("llm_retries cannot be negative")
    client = OpenAICompatibleLLM(settings.llm_url, settings.llm_model, settings.llm_api_key or None,
                                 timeout_s=settings.llm_timeout_s, retries=settings.llm_retries,
                                 require_key=settings.llm_require_key)
    return LlmAssistant(client, policy_from_settings(settings))
