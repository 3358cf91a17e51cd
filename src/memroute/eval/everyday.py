"""The everyday-recall set (``eval/data/everyday/{train,dev}.jsonl``): small personal stores and questions.

Written by hand for memroute (format, categories and counts in the folder's README). Each line is one
store: an owner's memories (8-20, each with an ``occurred_at``) and the questions asked of them. A question
has a ``type``: ``direct``, ``paraphrase`` (no content word shared with the answer), ``constraint`` (a
request that a stored constraint or preference bears on), ``update`` (an older and a newer fact about
one subject: the newer is the answer, the older ``stale``) or ``unanswerable`` (``subtype`` general,
chitchat, task or personal: nothing in the store answers it). ``answers`` are the memories that answer
(any one of them is enough); ``related`` memories are fair to show but neither answer nor count against
precision. Splits are by store, so no store is in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.datasets import read_jsonl

SPLITS = ("train", "dev")
LANGUAGES = ("en", "ja", "ko")
TYPES = ("direct", "paraphrase", "constraint", "update", "unanswerable")
SUBTYPES = ("general", "chitchat", "task", "personal")
REGISTERS = ("casual", "polite")


@dataclass(frozen=True, slots=True)
class EverydayMemory:
    id: str
    text: str
    language: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class EverydayQuestion:
    id: str
    store: str
    text: str
    language: str
    type: str
    subtype: str | None
    """For ``unanswerable``: general, chitchat, task or personal; else None."""
    register: str
    now: datetime
    cross_language: bool
    """Asked in a language none of its answers is written in."""
    answers: frozenset[str]
    stale: frozenset[str]
    related: frozenset[str]
    recent: tuple[dict[str, str], ...]
    """Turns before the question, oldest first (``{"role", "text"}``)."""

    @property
    def answerable(self) -> bool:
        return self.type != "unanswerable"


@dataclass(frozen=True, slots=True)
class EverydayStore:
    id: str
    split: str
    persona: str
    memories: tuple[EverydayMemory, ...]
    questions: tuple[EverydayQuestion, ...]


def data_path(split: str) -> Path:
    """The shipped file of a split (``train`` or ``dev``)."""
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    return Path(str(resources.files("memroute.eval") / "data" / "everyday" / f"{split}.jsonl"))


def load_everyday(path: str | Path) -> list[EverydayStore]:
    """The stores of one file, checked: unique ids, answers and stale ids that name the store's memories,
    known languages and types, and ISO 8601 times with a UTC offset."""
    stores = []
    seen: set[str] = set()
    for n, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}: store {n}"
        try:
            store = _store(rec)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: {exc.args[0] if exc.args else exc!r} (format: eval/data/everyday/README.md)"
                             ) from None
        ids = [store.id, *(m.id for m in store.memories), *(q.id for q in store.questions)]
        dup = seen.intersection(ids) | {i for i in ids if ids.count(i) > 1}
        if dup:
            raise InputError(f"{where}: ids used twice: {', '.join(sorted(dup))}")
        seen.update(ids)
        stores.append(store)
    if not stores:
        raise InputError(f"{path}: no stores")
    return stores


def _store(rec: dict[str, Any]) -> EverydayStore:
    sid = str(rec["store"])
    memories = tuple(EverydayMemory(str(m["id"]), _text(m["text"]), _choice(m["language"], LANGUAGES),
                                    _time(m["occurred_at"])) for m in rec["memories"])
    if not memories:
        raise ValueError(f"store {sid} has no memories")
    ids = {m.id for m in memories}
    questions = tuple(_question(q, sid, ids) for q in rec["questions"])
    return EverydayStore(sid, str(rec.get("split", "")), str(rec.get("persona", "")), memories, questions)


def _question(q: dict[str, Any], store: str, memory_ids: set[str]) -> EverydayQuestion:
    qid = str(q["id"])
    qtype = _choice(q["type"], TYPES)
    answers, stale, related = (frozenset(str(i) for i in q.get(k, ())) for k in ("answers", "stale", "related"))
    unknown = (answers | stale | related) - memory_ids
    if unknown:
        raise ValueError(f"question {qid} names memories not in store {store}: {', '.join(sorted(unknown))}")
    if qtype == "unanswerable" and (answers or stale):
        raise ValueError(f"question {qid} is unanswerable but has answers or stale memories")
    if qtype != "unanswerable" and not answers:
        raise ValueError(f"question {qid} ({qtype}) has no answers")
    if (qtype == "update") != bool(stale):
        raise ValueError(f"question {qid}: update questions, and only they, have stale memories")
    if answers & (stale | related) or stale & related:
        raise ValueError(f"question {qid}: a memory is in two of answers, stale and related")
    recent = tuple({"role": str(t["role"]), "text": _text(t["text"])} for t in q.get("recent", ()))
    subtype = q.get("subtype")
    return EverydayQuestion(qid, store, _text(q["text"]), _choice(q["language"], LANGUAGES), qtype,
                            _choice(subtype, SUBTYPES) if qtype == "unanswerable" else None,
                            _choice(q.get("register", "casual"), REGISTERS), _time(q["now"]),
                            bool(q.get("cross_language", False)), answers, stale, related, recent)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty text, got {value!r}")
    return value


def _choice(value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _time(value: Any) -> datetime:
    at = datetime.fromisoformat(str(value))
    if at.tzinfo is None:
        raise ValueError(f"time {value!r} has no UTC offset")
    return at
