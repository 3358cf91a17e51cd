"""Guided code investigation (seed 002, SPEC section 6) and the code-intelligence tools it relies on.

- :class:`Investigator`: sessions (start → query frame → exploration → READY, or SEMANTIC → VERIFICATION →
  READY), persisted in the memroute store with their decision log.
- :class:`Workspace`: the repository roots the tools may read; nothing outside them is ever read.
- The tools: ``find_definitions``, ``find_references``, ``search_text``, ``get_symbols``,
  ``analyze_structure`` (:mod:`~memroute.investigate.codetools`) and ``query``, a hybrid search over symbols
  and docstrings (:mod:`~memroute.investigate.codesearch`).
"""

from memroute.investigate.codeindex import CodeIndex, ToolResult
from memroute.investigate.consistency import is_related, split_identifier
from memroute.investigate.decisions import DecisionRecord
from memroute.investigate.investigator import TOOLS, Investigator
from memroute.investigate.risk import REQUIREMENTS, Requirements, RiskLevel, assess_risk
from memroute.investigate.session import Hypothesis, InvestigationSession, Phase, SlotSource, StepResult
from memroute.investigate.symbols import Symbol
from memroute.investigate.workspace import Workspace

__all__ = [
    "REQUIREMENTS",
    "TOOLS",
    "CodeIndex",
    "DecisionRecord",
    "Hypothesis",
    "InvestigationSession",
    "Investigator",
    "Phase",
    "Requirements",
    "RiskLevel",
    "SlotSource",
    "StepResult",
    "Symbol",
    "ToolResult",
    "Workspace",
    "assess_risk",
    "is_related",
    "split_identifier",
]
