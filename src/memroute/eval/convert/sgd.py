"""Schema-Guided Dialogue (google-research-datasets/dstc8-schema-guided-dialogue) -> routing set.

Upstream, per split folder (``train/``, ``dev/``, ``test/``): ``schema.json`` (services with ``service_name``,
``description``, ``intents``, ``slots``) and ``dialogues_NNN.json`` (lists of ``{dialogue_id, services, turns:
[{speaker, utterance, frames: [{service, state: {active_intent}}]}]}``).

Output: ``<split>.jsonl``, one record per user turn (``gold_services`` = the services of its frames, sorted;
``gold_active_intents`` = each frame's active intent), and ``services.jsonl`` (each service once, with the
``splits`` whose schema lists it). dev and test keep the files' order; train is a sample of ``train_sample``
dialogues (``random.Random(seed).sample`` over the ids sorted), written sorted by id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.convert.common import load_json, need, out_dir, sample_ids, write_jsonl, write_stats

SPLITS = ("train", "dev", "test")


def convert(src: Path, out: Path, splits: tuple[str, ...] = ("train", "dev"), train_sample: int | None = 2000,
            seed: int = 13) -> dict[str, Any]:
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise InputError(f"unknown SGD split {', '.join(unknown)} (choose from {', '.join(SPLITS)})")
    if not src.is_dir():
        raise InputError(f"{src}: give the dstc8-schema-guided-dialogue folder (with train/, dev/, test/)")
    out = out_dir(out)
    services: dict[str, dict[str, Any]] = {}
    stats: dict[str, Any] = {"source": str(src), "seed": seed}
    for split in splits:
        folder = src / split
        files = sorted(folder.glob("dialogues_*.json"))
        if not files:
            raise InputError(f"{folder} has no dialogues_*.json files (is this the SGD repository?)")
        _add_services(services, folder / "schema.json", split)
        dialogues = [d for f in files for d in _dialogues(f)]
        if split == "train" and train_sample:
            keep = set(sample_ids((str(d["dialogue_id"]) for d in dialogues), train_sample, seed))
            dialogues = sorted((d for d in dialogues if str(d["dialogue_id"]) in keep),
                               key=lambda d: str(d["dialogue_id"]))
        records = write_jsonl(out / f"{split}.jsonl", (r for d in dialogues for r in _records(d)))
        stats[split] = {"files": len(files), "dialogues": len(dialogues), "records": records}
    stats["services"] = write_jsonl(out / "services.jsonl", services.values())
    write_stats(out, stats)
    return stats


def _dialogues(path: Path) -> list[dict[str, Any]]:
    data = load_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of dialogues")
    for i, d in enumerate(data):
        need(d, "dialogue_id", f"{path}: dialogue {i}")
        need(d, "turns", f"{path}: dialogue {d['dialogue_id']}", list)
        d["_file"] = str(path)
    return data


def _records(dialogue: dict[str, Any]) -> Iterator[dict[str, Any]]:
    did = str(dialogue["dialogue_id"])
    history: list[dict[str, str]] = []
    user_idx = 0
    for i, turn in enumerate(dialogue["turns"]):
        where = f"{dialogue['_file']}: dialogue {did} turn {i}"
        speaker = str(need(turn, "speaker", where)).upper()
        utterance = str(need(turn, "utterance", where, str))
        if speaker == "USER":
            frames = need(turn, "frames", where, list)
            intents = {str(need(f, "service", where)): (f.get("state") or {}).get("active_intent") for f in frames}
            yield {"dialogue_id": did, "turn_idx": i, "user_turn_idx": user_idx, "history": list(history),
                   "utterance": utterance, "gold_services": sorted(intents), "gold_active_intents": intents}
            user_idx += 1
        history.append({"speaker": speaker, "utterance": utterance})


def _add_services(services: dict[str, dict[str, Any]], path: Path, split: str) -> None:
    schema = load_json(path)
    if not isinstance(schema, list):
        raise InputError(f"{path}: expected a JSON list of services")
    for i, svc in enumerate(schema):
        where = f"{path}: service {i}"
        name = str(need(svc, "service_name", where))
        if name in services:
            services[name]["splits"].append(split)
            continue
        services[name] = {
            "name": name, "description": str(need(svc, "description", where)),
            "intents": [{"name": str(need(it, "name", f"{where} intent")),
                         "description": str(it.get("description", "")),
                         "is_transactional": bool(it.get("is_transactional", False))}
                        for it in need(svc, "intents", where, list)],
            "slots": [{"name": str(need(sl, "name", f"{where} slot")), "description": str(sl.get("description", ""))}
                      for sl in need(svc, "slots", where, list)],
            "splits": [split]}
