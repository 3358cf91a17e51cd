"""Loaders for the evaluation sets in ``../shared/data`` (formats in its README): routing dialogues
(SGD, MultiWOZ, JMultiWOZ-TC), their candidate descriptions as agents, and intent sets."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.types import Agent


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    path = Path(path)
    try:
        fh = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"data file {path} does not exist") from None
    with fh:
        yield from jsonl_records(fh, path)


def jsonl_records(lines: Iterable[str], path: str | Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of JSON Lines ``lines`` (blank lines skipped); ``InputError`` names ``path`` and the line."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}:{lineno}: each line must be a JSON object")
        yield record


# ------------------------------------------------------------------------------------ routing sets
@dataclass(frozen=True, slots=True)
class Turn:
    """A user turn to route, with the system turn just before it (part of the conversation)."""

    utterance: str
    system_before: str | None
    gold: tuple[str, ...]
    """Gold agent ids; empty when the turn is not scored (e.g. no tool call)."""


@dataclass(frozen=True, slots=True)
class Dialogue:
    dialogue_id: str
    turns: tuple[Turn, ...]


def load_dialogues(path: str | Path) -> list[Dialogue]:
    """Dialogues of a routing set, user turns in order, each with the system turn that preceded it."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for rec in read_jsonl(path):
        _check_record(path, rec)
        by_id.setdefault(str(rec["dialogue_id"]), []).append(rec)
    return [_dialogue(did, recs) for did, recs in by_id.items()]


def iter_dialogues(path: str | Path) -> Iterator[Dialogue]:
    """The dialogues of a routing set one at a time, reading the file as a stream (for files too large to
    hold): a dialogue's records must be next to each other, as routing sets write them."""
    seen: set[str] = set()
    current: str | None = None
    recs: list[dict[str, Any]] = []
    for rec in read_jsonl(path):
        _check_record(path, rec)
        did = str(rec["dialogue_id"])
        if did != current:
            if current is not None:
                yield _dialogue(current, recs)
            if did in seen:
                raise InputError(f"{path}: the turns of dialogue {did!r} are not next to each other; sort the "
                                 "file by dialogue_id (then turn_idx) and try again")
            seen.add(did)
            current, recs = did, []
        recs.append(rec)
    if current is not None:
        yield _dialogue(current, recs)


def _check_record(path: str | Path, rec: dict[str, Any]) -> None:
    if "utterance" not in rec or "dialogue_id" not in rec:
        raise InputError(f"{path}: records need dialogue_id and utterance (a routing set, see the data README)")


def _dialogue(did: str, recs: list[dict[str, Any]]) -> Dialogue:
    recs.sort(key=lambda r: int(r.get("turn_idx", 0)))
    turns = []
    for rec in recs:
        history = rec.get("history") or []
        last = history[-1] if history else None
        system = (str(last["utterance"]) if isinstance(last, dict) and last.get("utterance") is not None
                  and str(last.get("speaker", "")).upper() == "SYSTEM" else None)
        gold = rec.get("gold_services", rec.get("gold_domains", rec.get("agents"))) or rec.get("agent") or []
        if isinstance(gold, str):
            gold = [gold]
        turns.append(Turn(str(rec["utterance"]), system, tuple(str(g) for g in gold if str(g).strip())))
    return Dialogue(did, tuple(turns))


def load_candidates(path: str | Path, split: str | None = None) -> tuple[Agent, ...]:
    """The candidates of a routing set as agents, described only by their descriptions, intents and slots.

    SGD / MultiWOZ ``services.jsonl`` (one service per line; with ``split``, SGD services whose ``splits``
    do not list it are left out) or JMultiWOZ-TC ``tools.jsonl`` (tools grouped into one agent per domain).
    """
    records = list(read_jsonl(path))
    if not records:
        raise InputError(f"{path}: no candidates")
    if "domain" in records[0] and "parameters" in records[0]:
        return _tool_domains(records)
    agents = []
    for rec in records:
        if split and rec.get("splits") and split not in rec["splits"]:
            continue
        intents = rec.get("intents") or []
        caps = [str(i.get("description", "")) for i in intents] + [str(s.get("description", ""))
                                                                   for s in rec.get("slots") or []]
        agents.append(Agent(id=str(rec["name"]), name=str(rec["name"]), description=str(rec.get("description", "")),
                            tools=tuple(str(i["name"]) for i in intents if i.get("name")),
                            metadata={"capabilities": [c for c in dict.fromkeys(caps) if c.strip()]}))
    return tuple(agents)


def _tool_domains(records: Sequence[dict[str, Any]]) -> tuple[Agent, ...]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        grouped.setdefault(str(rec["domain"]), []).append(rec)
    agents = []
    for domain, tools in grouped.items():
        tools.sort(key=lambda t: (not str(t["name"]).startswith("Search"), str(t["name"])))
        caps = [str(t.get("description", "")) for t in tools[1:]]
        caps += [str(p.get("description", "")) for t in tools for p in t.get("parameters") or []]
        agents.append(Agent(id=domain, name=domain, description=str(tools[0].get("description", "")),
                            tools=tuple(str(t["name"]) for t in tools),
                            metadata={"capabilities": [c for c in dict.fromkeys(caps) if c.strip()]}))
    return tuple(agents)


def family(label: str) -> str:
    """SGD services of one family count as one label: ``Hotels_1`` and ``Hotels_4`` are ``Hotels``."""
    head, _, tail = label.rpartition("_")
    return head if head and tail.isdigit() else label


# ------------------------------------------------------------------------------------ intent sets
@dataclass(frozen=True, slots=True)
class IntentExample:
    text: str
    label: str


OUT_OF_SCOPE = frozenset({"oos", "ood", "out_of_scope", "outofscope"})


def is_out_of_scope(label: str) -> bool:
    return label.strip().lower() in OUT_OF_SCOPE


def load_intents(path: str | Path) -> list[IntentExample]:
    out = []
    for rec in read_jsonl(path):
        if "text" not in rec or "label" not in rec:
            raise InputError(f"{path}: intent records need text and label")
        out.append(IntentExample(str(rec["text"]), str(rec["label"])))
    return out


def holdout_split(examples: Sequence[IntentExample],
                  fraction: float) -> tuple[list[IntentExample], list[IntentExample]]:
    """A deterministic split (md5 of the text) for sets that ship one file: (train, held out)."""
    if not 0.0 < fraction < 1.0:
        raise InputError(f"holdout fraction must be between 0 and 1, got {fraction}")
    train: list[IntentExample] = []
    test: list[IntentExample] = []
    for ex in examples:
        bucket = int(hashlib.md5(ex.text.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
        (test if bucket < fraction else train).append(ex)
    return train, test


def intent_agents(train: Sequence[IntentExample]) -> tuple[Agent, ...]:
    """One agent per in-scope label, its training utterances as examples (out-of-scope becomes no-route)."""
    grouped: dict[str, list[str]] = {}
    for ex in train:
        if not is_out_of_scope(ex.label):
            grouped.setdefault(ex.label, []).append(ex.text)
    return tuple(Agent(id=label, name=label, examples=tuple(dict.fromkeys(texts)))
                 for label, texts in sorted(grouped.items()))
