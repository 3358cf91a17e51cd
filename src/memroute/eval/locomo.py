"""The LoCoMo retrieval set (``../shared/data/locomo_retrieval``, format in the data README) as memories.

Each conversation becomes one owner's memories: every turn is a memory ``"Speaker: text"`` dated by its
session (plus its position in seconds, so turns of one session keep their order), with the speaker also
in ``metadata`` (what a transcript line is: who said what; the reranker reads the speaker from there) and
its ±2 neighbouring turns as ``context`` (indexed with a lower weight than its own words). An image a
speaker shared is kept as its caption, since questions ask about what the photo showed. Each question is
asked at a ``now`` one day after the conversation's last session.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.datasets import read_jsonl

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
NEIGHBOURS = 2
"""Turns on each side indexed as a memory's context (the prototype's ±2)."""
EMBED_NEIGHBOURS = 1
"""Turns on each side embedded with a memory (vector-only recall@5: ±0 0.16, ±1 0.42, ±2 0.33)."""

_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.I)
_MONTHS = {m: i for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), start=1)}


@dataclass(frozen=True, slots=True)
class Turn:
    id: str
    """``<sample_id>:<dia_id>``: unique across conversations."""
    session: int
    speaker: str
    text: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    sample_id: str
    index: int
    text: str
    category: int
    evidence: tuple[str, ...]
    """Memory ids (``<sample_id>:<dia_id>``) of the turns that hold the answer."""


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    @property
    def now(self) -> datetime:
        return max(t.at for t in self.turns) + timedelta(days=1)

    def memories(self) -> Iterator[dict[str, Any]]:
        """``Memory.remember_many`` items: one per turn, with neighbouring turns as context."""
        by_session: dict[int, list[Turn]] = {}
        for turn in self.turns:
            by_session.setdefault(turn.session, []).append(turn)
        for session, turns in by_session.items():
            for i, turn in enumerate(turns):
                near = turns[max(0, i - NEIGHBOURS) : i] + turns[i + 1 : i + 1 + NEIGHBOURS]
                window = turns[max(0, i - EMBED_NEIGHBOURS) : i + 1 + EMBED_NEIGHBOURS]
                yield {"id": turn.id, "text": f"{turn.speaker}: {turn.text}", "session": f"{self.sample_id}/{session}",
                       "kind": "message", "occurred_at": turn.at, "metadata": {"speaker": turn.speaker},
                       "context": "\n".join(f"{t.speaker}: {t.text}" for t in near),
                       "embed_text": " ".join(t.text for t in window)}


def parse_session_date(value: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as UTC."""
    m = _DATE.search(value)
    if m is None:
        raise InputError(f"cannot read the session date {value!r} (expected e.g. '1:56 pm on 8 May, 2023')")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    mon = _MONTHS.get(month.lower())
    if mon is None:
        raise InputError(f"unknown month {month!r} in session date {value!r}")
    return datetime(int(year), mon, int(day), h, int(minute), tzinfo=UTC)


def load_locomo(data_dir: str | Path) -> list[Conversation]:
    """The conversations of ``data_dir`` (``sessions.jsonl`` + ``qa.jsonl``), questions with evidence only."""
    root = Path(data_dir)
    if (root / "locomo_retrieval").is_dir():
        root = root / "locomo_retrieval"
    if not (root / "sessions.jsonl").is_file():
        raise InputError(f"{root} has no sessions.jsonl; point --data at the locomo_retrieval folder")
    questions: dict[str, list[Question]] = {}
    for rec in read_jsonl(root / "qa.jsonl"):
        sid = str(rec["sample_id"])
        evidence = tuple(f"{sid}:{d}" for d in rec.get("evidence_resolved") or ())
        if evidence:
            questions.setdefault(sid, []).append(
                Question(sid, int(rec["qa_idx"]), str(rec["question"]), int(rec["category"]), evidence))
    out = []
    for rec in read_jsonl(root / "sessions.jsonl"):
        sid = str(rec["sample_id"])
        turns = []
        for session in rec["sessions"]:
            start = parse_session_date(str(session["date_time"]))
            for pos, turn in enumerate(session["turns"]):
                text = str(turn["text"]).strip()
                if turn.get("img_caption"):
                    text = f"{text} [shared a photo: {turn['img_caption']}]".strip()
                if not text:
                    continue
                turns.append(Turn(f"{sid}:{turn['dia_id']}", int(session["session"]), str(turn["speaker"]), text,
                                  start + timedelta(seconds=pos)))
        out.append(Conversation(sid, (str(rec["speaker_a"]), str(rec["speaker_b"])), tuple(turns),
                                tuple(questions.get(sid, ()))))
    return out
