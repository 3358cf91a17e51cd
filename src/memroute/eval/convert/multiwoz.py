"""MultiWOZ -> routing set (``<split>.jsonl``) + ``services.jsonl`` from the MultiWOZ 2.2 ``schema.json``.

Dialogues, in either upstream shape:

- a ``log`` file: ``{dialogue_id: {log: [{text, metadata, dialog_act}]}}`` (MultiWOZ 2.0/2.1 ``data.json``, or
  ConvLab's ``val.json`` / ``val.json.zip``), user turns at even positions, the belief state in the
  ``metadata`` of the system turn after each user turn; ``ids`` (e.g. ``valListFile.txt``) picks a split;
- a MultiWOZ 2.2 split folder (``dev/`` with ``dialogues_*.json``; acts from ``dialog_acts.json`` beside it).

A user turn's ``gold_domains`` = the domains of its own dialogue acts (``act_domains``, ``general`` left out)
plus the domains whose belief state it changed (``state_domains``), sorted; only domains the schema has count.
Dialogues are written sorted by id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.convert.common import find, load_json, need, out_dir, read_text, write_jsonl, write_stats

_UNSET = {"", "not mentioned", "none"}


def convert(dialogues: Path, out: Path, schema: Path, ids: Path | None = None, split: str = "dev") -> dict[str, Any]:
    schema_path = find(schema, "data/MultiWOZ_2.2/schema.json", "MultiWOZ_2.2/schema.json", "schema.json")
    services = list(_services(schema_path))
    names = {s["name"] for s in services}
    if dialogues.is_dir():
        records = list(_from_22(dialogues, names))
    else:
        keep = {line.strip().removesuffix(".json") for line in read_text(ids).splitlines() if line.strip()} \
            if ids else None
        records = list(_from_log(dialogues, names, keep))
    if not records:
        raise InputError(f"{dialogues}: no dialogues to convert" + (f" with the ids in {ids}" if ids else ""))
    out = out_dir(out)
    stats = {"source": str(dialogues), "schema": str(schema_path),
             "dialogues": len({r["dialogue_id"] for r in records}),
             "records": write_jsonl(out / f"{split}.jsonl", records),
             "services": write_jsonl(out / "services.jsonl", services)}
    write_stats(out, stats)
    return stats


def _services(path: Path) -> Iterator[dict[str, Any]]:
    schema = load_json(path)
    if not isinstance(schema, list):
        raise InputError(f"{path}: expected a JSON list of services (MultiWOZ 2.2 schema.json)")
    for i, svc in enumerate(schema):
        where = f"{path}: service {i}"
        yield {"name": str(need(svc, "service_name", where)), "description": str(need(svc, "description", where)),
               "intents": [{"name": str(need(it, "name", where)), "description": str(it.get("description", ""))}
                           for it in need(svc, "intents", where, list)],
               "slots": [{"name": str(need(sl, "name", where)), "description": str(sl.get("description", ""))}
                         for sl in need(svc, "slots", where, list)]}


def _act_domains(acts: Any, names: set[str]) -> tuple[list[str], list[str]]:
    keys = sorted(str(k) for k in acts) if isinstance(acts, dict) else []
    return keys, sorted({k.partition("-")[0].lower() for k in keys} & names)


def _record(did: str, turn_idx: int, user_idx: int, history: list[dict[str, str]], text: str, acts: Any,
            state_domains: set[str], names: set[str]) -> dict[str, Any]:
    user_acts, act_domains = _act_domains(acts, names)
    state = sorted(state_domains & names)
    return {"dialogue_id": did, "turn_idx": turn_idx, "user_turn_idx": user_idx, "history": list(history),
            "utterance": text, "gold_domains": sorted(set(act_domains) | set(state)), "act_domains": act_domains,
            "state_domains": state, "user_acts": user_acts}


def _belief(metadata: Any) -> dict[str, dict[str, str]]:
    """Domain -> the slots it has a value for (``semi`` and ``book``, not the ``booked`` results)."""
    out: dict[str, dict[str, str]] = {}
    for dom, parts in (metadata or {}).items():
        values = {f"{part}-{slot}": str(v) for part in ("semi", "book") for slot, v in ((parts or {}).get(part) or {})
                  .items() if slot != "booked" and str(v).strip().lower() not in _UNSET}
        out[str(dom).lower()] = values
    return out


def _changed(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> set[str]:
    return {d for d in set(before) | set(after) if before.get(d, {}) != after.get(d, {})}


def _from_log(path: Path, names: set[str], keep: set[str] | None) -> Iterator[dict[str, Any]]:
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object dialogue_id -> {{log: [...]}} (MultiWOZ data.json shape)")
    for key in sorted(data, key=lambda k: str(k).removesuffix(".json")):
        did = str(key).removesuffix(".json")
        if keep is not None and did not in keep:
            continue
        log = need(data[key], "log", f"{path}: {key}", list)
        history: list[dict[str, str]] = []
        state: dict[str, dict[str, str]] = {}
        for i in range(0, len(log), 2):
            turn = log[i]
            text = str(need(turn, "text", f"{path}: {key} turn {i}"))
            after = _belief(log[i + 1].get("metadata")) if i + 1 < len(log) else state
            yield _record(did, i, i // 2, history, text, turn.get("dialog_act"), _changed(state, after), names)
            state = after
            history.append({"speaker": "USER", "utterance": text})
            if i + 1 < len(log):
                history.append({"speaker": "SYSTEM", "utterance": str(need(log[i + 1], "text", f"{path}: {key} "
                                                                                               f"turn {i + 1}"))})


def _from_22(folder: Path, names: set[str]) -> Iterator[dict[str, Any]]:
    files = sorted(folder.glob("dialogues_*.json"))
    if not files:
        raise InputError(f"{folder} has no dialogues_*.json (a MultiWOZ 2.2 split folder such as dev/)")
    acts_path = find(folder, "dialog_acts.json", "../dialog_acts.json")
    acts = load_json(acts_path)
    if not isinstance(acts, dict):
        raise InputError(f"{acts_path}: expected a JSON object dialogue_id -> {{turn_id: {{dialog_act}}}}")
    dialogues = []
    for f in files:
        found = load_json(f)
        if not isinstance(found, list):
            raise InputError(f"{f}: expected a JSON list of dialogues")
        dialogues += found
    for dialogue in sorted(dialogues, key=lambda d: str(d.get("dialogue_id", ""))):
        did = str(need(dialogue, "dialogue_id", f"{folder}: a dialogue"))
        history: list[dict[str, str]] = []
        state: dict[str, dict[str, str]] = {}
        user_idx = 0
        for i, turn in enumerate(need(dialogue, "turns", f"{folder}: {did}", list)):
            where = f"{folder}: {did} turn {i}"
            speaker = str(need(turn, "speaker", where)).upper()
            text = str(need(turn, "utterance", where))
            if speaker == "USER":
                after = {str(f["service"]): {k: "|".join(map(str, v)) for k, v in
                                             ((f.get("state") or {}).get("slot_values") or {}).items()}
                         for f in turn.get("frames") or []}
                turn_acts = ((acts.get(did) or {}).get(str(turn.get("turn_id", i))) or {}).get("dialog_act")
                yield _record(did.removesuffix(".json"), i, user_idx, history, text, turn_acts,
                              _changed(state, after), names)
                state, user_idx = after, user_idx + 1
            history.append({"speaker": speaker, "utterance": text})
