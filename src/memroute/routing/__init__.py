"""Routing: pick the agent for a message (seed 004), in its conversation (seed 000).

- :class:`AgentRouter` ranks agents for one query with summed strategies, status gating, deterministic
  tie-breaks, a calibrated confidence and a no-route answer.
- :class:`ConversationRouter` routes each message of a session: stays on follow-ups, moves on switches,
  uses context when the message needs it, and keeps its state in the store.
- Catalogues load from and save to TOML / YAML / JSON; :func:`fit` chooses thresholds from labelled examples;
  :func:`memroute.routing.training.fit_dialogues` fits the conversation router on labelled dialogues
  (:class:`FittedRouting`, :func:`load_fit`).
"""

from memroute.routing.agents import agent_version, dump_catalogue, load_catalogue, parse_catalogue, save_catalogue
from memroute.routing.calibration import Calibration, FitReport, fit_calibration
from memroute.routing.composite import AgentRouter, ScoredQuery
from memroute.routing.conversation import ConversationDecision, ConversationRouter
from memroute.routing.fit import LabelledExample, fit
from memroute.routing.fitted import FittedRouting, load_fit
from memroute.routing.policy import PolicyParams
from memroute.routing.query import AgentScore, ContentItem, RouterOutput, RouterQuery, StrategyScore
from memroute.routing.strategies import (
    BM25Strategy,
    EmbeddingStrategy,
    FileTypeStrategy,
    KeywordBoostStrategy,
    MentionStrategy,
    Strategy,
    ToolHintStrategy,
    default_strategies,
)

__all__ = [
    "AgentRouter",
    "AgentScore",
    "BM25Strategy",
    "Calibration",
    "ContentItem",
    "ConversationDecision",
    "ConversationRouter",
    "EmbeddingStrategy",
    "FileTypeStrategy",
    "FitReport",
    "FittedRouting",
    "KeywordBoostStrategy",
    "LabelledExample",
    "MentionStrategy",
    "PolicyParams",
    "RouterOutput",
    "RouterQuery",
    "ScoredQuery",
    "Strategy",
    "StrategyScore",
    "ToolHintStrategy",
    "agent_version",
    "default_strategies",
    "dump_catalogue",
    "fit",
    "fit_calibration",
    "load_catalogue",
    "load_fit",
    "parse_catalogue",
    "save_catalogue",
]
