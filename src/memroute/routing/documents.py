"""What routing reads from an agent: the safe document, the scored pieces, the names it answers to.

Seed 004's doc builder: name, description, keywords, categories, tool names and at most a short snippet of
the prompt — never the full system prompt. Embeddings score the agent piece by piece (its description,
each capability, each example) because a message usually matches one intent or one slot of an agent, and
a single averaged vector of everything blurs exactly that match.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memroute.routing.agents import capabilities
from memroute.text import tokenize
from memroute.types import Agent

PROMPT_SNIPPET_CHARS = 256
_SPLIT_IDENT = re.compile(r"[_\-./:]+|(?<=[a-z0-9])(?=[A-Z])")
_VERSION = re.compile(r"v?\d+(\.\d+)*", re.IGNORECASE)


def normalise_name(value: str) -> str:
    """Lower-cased, NFKC, separators (``_ - . /`` and spaces) collapsed to one space."""
    text = unicodedata.normalize("NFKC", value).strip().lower()
    return " ".join(re.split(r"[\s_\-./:@]+", text)).strip()


def humanise(identifier: str) -> str:
    """``Restaurants_2`` → ``Restaurants 2``, ``findHotel`` → ``find Hotel``: words an encoder can read."""
    return " ".join(p for p in _SPLIT_IDENT.split(identifier) if p)


def name_words(name: str) -> str:
    """The words of an agent's name for matching, without a trailing version number: ``Restaurants_2`` →
    ``Restaurants``. A version says nothing about what the agent does, yet as a token it would match any
    message with that number in it ("2 people", "I want four")."""
    words = humanise(name).split()
    while len(words) > 1 and _VERSION.fullmatch(words[-1]):
        words.pop()
    return " ".join(words)


def build_doc(agent: Agent, prompt_limit: int = PROMPT_SNIPPET_CHARS) -> str:
    """The safe agent document for lexical matching (seed 004's ``BuildDocFn``)."""
    parts = [name_words(agent.name), agent.description, " ".join(agent.keywords), " ".join(agent.categories),
             " ".join(humanise(t) for t in agent.tools), *capabilities(agent)]
    if agent.prompt:
        parts.append(agent.prompt[:prompt_limit])
    return "\n".join(p for p in parts if p.strip())


@dataclass(frozen=True, slots=True)
class AgentDocument:
    """Everything routing precomputes for one agent version (cached by agent id + version)."""

    doc_tokens: tuple[str, ...]
    example_tokens: tuple[str, ...]
    pieces: tuple[str, ...]
    """Texts embedded one by one: the description first, then each capability."""
    examples: tuple[str, ...]
    names: tuple[str, ...]
    """Normalised id and name: what a mention must match."""
    label: str
    """The name's words (``code_review`` → ``code review``), embedded on their own: read across languages."""
    keyword_tokens: frozenset[str]
    tool_names: frozenset[str]


def describe(agent: Agent) -> AgentDocument:
    head = name_words(agent.name)
    description = f"{head}: {agent.description}" if agent.description.strip() else head
    pieces = (description, *(c for c in capabilities(agent) if c.strip()))
    keyword_tokens = frozenset(t for k in (*agent.keywords, *agent.categories) for t in tokenize(humanise(k)))
    tool_names = frozenset(normalise_name(t) for t in agent.tools if t.strip())
    names = tuple(dict.fromkeys(n for n in (normalise_name(agent.id), normalise_name(agent.name)) if n))
    return AgentDocument(
        doc_tokens=tuple(tokenize(build_doc(agent))),
        example_tokens=tuple(t for e in agent.examples for t in tokenize(e)),
        pieces=pieces, examples=tuple(e for e in agent.examples if e.strip()), names=names, label=head,
        keyword_tokens=keyword_tokens, tool_names=tool_names,
    )
