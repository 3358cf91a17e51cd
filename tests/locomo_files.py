"""Two small conversations in LoCoMo's file format, written for the tests (not from the data set)."""

from __future__ import annotations

import json
from pathlib import Path

CONVERSATIONS = {
    "conv-a": [("Ana", "I adopted a grey kitten from the shelter on Monday."),
               ("Ben", "Nice! I started learning the cello at the community school."),
               ("Ana", "The kitten hides under the sofa and chases my shoelaces."),
               ("Ben", "My cello teacher wants me to play at the spring recital.")],
    "conv-b": [("Cho", "We booked a ferry to the island for our anniversary."),
               ("Dan", "I finished my first marathon in just under four hours."),
               ("Cho", "The island has a lighthouse you can climb at sunset."),
               ("Dan", "My knees hurt for a week after the marathon.")]}
QUESTIONS = [("conv-a", "What pet did Ana adopt?", ["D1:1"], 4),
             ("conv-a", "Which instrument is Ben learning?", ["D1:2"], 4),
             ("conv-b", "How long did Dan's marathon take?", ["D1:2"], 4),
             ("conv-b", "What can you climb?", ["D1:3"], 4)]
"""(sample id, question, evidence turns, LoCoMo category)."""


def write_locomo(root: Path, questions: list[tuple[str, str, list[str], int]] = QUESTIONS) -> None:
    """``sessions.jsonl`` and ``qa.jsonl`` of :data:`CONVERSATIONS` (one session each) and ``questions`` in ``root``."""
    sessions = [{"sample_id": sid, "speaker_a": turns[0][0], "speaker_b": turns[1][0], "sessions": [
        {"session": 1, "date_time": "3:10 pm on 4 March, 2024",
         "turns": [{"dia_id": f"D1:{i + 1}", "speaker": who, "text": text} for i, (who, text) in enumerate(turns)]}]}
        for sid, turns in CONVERSATIONS.items()]
    (root / "sessions.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sessions))
    (root / "qa.jsonl").write_text("".join(
        json.dumps({"sample_id": sid, "qa_idx": i, "question": q, "category": c, "evidence_resolved": ev}) + "\n"
        for i, (sid, q, ev, c) in enumerate(questions)))
