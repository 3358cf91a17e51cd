"""LoCoMo (snap-research/LoCoMo ``data/locomo10.json``) -> ``sessions.jsonl`` + ``qa.jsonl``.

Upstream: a list of samples ``{sample_id, conversation: {speaker_a, speaker_b, session_N: [turn...],
session_N_date_time}, qa: [{question, answer | adversarial_answer, evidence: [dia_id...], category}]}``, a turn
``{speaker, dia_id, text[, blip_caption, img_url, query]}``. The photo's caption is kept as ``img_caption``.

Evidence ids are resolved against the conversation's own turns: ``"D8:6; D9:17"`` is two ids, ``"D:11:26"`` is
``D11:26``, and an id no turn has (or no id at all) goes to ``evidence_unresolved``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.convert.common import find, load_json, need, out_dir, write_jsonl, write_stats

_SESSION = re.compile(r"session_(\d+)$")
_EVIDENCE = re.compile(r"^D\s*:?\s*(\d+)\s*:\s*(\d+)$")


def convert(src: Path, out: Path, first: int | None = None) -> dict[str, Any]:
    path = find(src, "data/locomo10.json", "locomo10.json")
    samples = load_json(path)
    if not isinstance(samples, list) or not samples:
        raise InputError(f"{path}: expected a JSON list of conversations (LoCoMo's locomo10.json)")
    if first is not None:
        samples = samples[:first]
    conversations, questions = [], []
    for i, sample in enumerate(samples):
        where = f"{path}: conversation {i}"
        sid = str(need(sample, "sample_id", where))
        conversation = _conversation(sample, sid, f"{path}: {sid}")
        conversations.append(conversation)
        ids = {t["dia_id"] for s in conversation["sessions"] for t in s["turns"]}
        for idx, qa in enumerate(need(sample, "qa", f"{path}: {sid}", list)):
            questions.append(_question(qa, sid, idx, ids, f"{path}: {sid} qa[{idx}]"))
    out = out_dir(out)
    stats = {"source": str(path), "conversations": write_jsonl(out / "sessions.jsonl", conversations),
             "sample_ids": [c["sample_id"] for c in conversations],
             "sessions": sum(len(c["sessions"]) for c in conversations),
             "turns": sum(len(s["turns"]) for c in conversations for s in c["sessions"]),
             "qa": write_jsonl(out / "qa.jsonl", questions),
             "qa_with_resolved_evidence": sum(1 for q in questions if q["evidence_resolved"])}
    write_stats(out, stats)
    return stats


def _conversation(sample: dict[str, Any], sid: str, where: str) -> dict[str, Any]:
    conv = need(sample, "conversation", where, dict)
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION.match(key)))
    if not numbers:
        raise InputError(f"{where}: the conversation has no session_1, session_2, ... lists")
    sessions = []
    for n in numbers:
        turns = need(conv, f"session_{n}", f"{where} conversation", list)
        date = need(conv, f"session_{n}_date_time", f"{where} conversation", str)
        out_turns = []
        for j, turn in enumerate(turns):
            twhere = f"{where} session_{n}[{j}]"
            rec = {"dia_id": str(need(turn, "dia_id", twhere)), "speaker": str(need(turn, "speaker", twhere)),
                   "text": str(turn.get("text", ""))}
            if turn.get("blip_caption"):
                rec["img_caption"] = str(turn["blip_caption"])
            out_turns.append(rec)
        sessions.append({"session": n, "date_time": date, "turns": out_turns})
    return {"sample_id": sid, "speaker_a": str(need(conv, "speaker_a", f"{where} conversation")),
            "speaker_b": str(need(conv, "speaker_b", f"{where} conversation")), "sessions": sessions}


def _question(qa: dict[str, Any], sid: str, idx: int, ids: set[str], where: str) -> dict[str, Any]:
    raw = qa.get("evidence") or []
    if not isinstance(raw, list):
        raise InputError(f"{where}: 'evidence' should be a list of turn ids such as 'D1:3'")
    resolved: list[str] = []
    unresolved: list[str] = []
    for item in raw:
        for piece in re.split(r"[;,]", str(item)):
            piece = piece.strip()
            if not piece:
                continue
            m = _EVIDENCE.match(piece)
            dia_id = f"D{m.group(1)}:{m.group(2)}" if m else piece
            if dia_id in ids:
                if dia_id not in resolved:
                    resolved.append(dia_id)
            else:
                unresolved.append(piece)
    category = need(qa, "category", where, (int, str))
    if not str(category).strip().isdigit():
        raise InputError(f"{where}: 'category' should be a number 1-5, found {category!r}")
    rec: dict[str, Any] = {"sample_id": sid, "qa_idx": idx, "question": str(need(qa, "question", where)),
                           "category": int(category), "evidence": raw,
                           "evidence_resolved": resolved, "evidence_unresolved": unresolved}
    if "answer" not in qa and "adversarial_answer" not in qa:
        raise InputError(f"{where}: no 'answer' or 'adversarial_answer'")
    for key in ("answer", "adversarial_answer"):
        if key in qa:
            rec[key] = qa[key]
    return rec
