"""JMultiWOZ-TC (llm-jp/JMultiWOZ-TC, ``dataset.zip`` unzipped) -> routing set + ``tools.jsonl``.

Upstream: ``jmultiwoz_tc_input.jsonl`` (``{data_id, dialogue_id, question: [chat messages]}``, one per user
turn: the dialogue so far, ending with the user's turn), ``jmultiwoz_tc_ground.jsonl`` (``{data_id,
dialogue_id, ground_truth: [{name, arguments}]}``) and ``tools.json`` (OpenAI function definitions).

A turn's ``gold_domains`` are the domains of its tool calls (``Search_taxi`` -> ``taxi``); a turn without a call
has none and is not scored. Split: dialogues ordered by the md5 of their id, the first ``test_dialogues`` are
the test split (kept aside), the next ``dev_dialogues`` dev, the rest train, of which ``train_sample``
dialogues are kept (``random.Random(seed).sample`` over the sorted ids). Files are sorted by dialogue id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.convert.common import (
    find,
    load_json,
    load_jsonl,
    md5,
    need,
    out_dir,
    sample_ids,
    write_jsonl,
    write_stats,
)

_TURN = re.compile(r"_turn_(\d+)$")


def domain(tool: str) -> str:
    return tool.partition("_")[2].lower() or tool.lower()


def convert(src: Path, out: Path, test_dialogues: int = 300, dev_dialogues: int = 300,
            train_sample: int | None = 1000, seed: int = 13) -> dict[str, Any]:
    inputs = find(src, "jmultiwoz_tc_input.jsonl", "dataset/jmultiwoz_tc_input.jsonl")
    ground_path = find(inputs.parent, "jmultiwoz_tc_ground.jsonl")
    tools_path = find(inputs.parent, "tools.json")
    ground = {str(need(g, "data_id", f"{ground_path}: a record")): need(g, "ground_truth", f"{ground_path}: "
              f"{g['data_id']}", list) for g in load_jsonl(ground_path)}
    by_dialogue: dict[str, list[dict[str, Any]]] = {}
    for rec in load_jsonl(inputs):
        where = f"{inputs}: a record"
        data_id = str(need(rec, "data_id", where))
        if data_id not in ground:
            raise InputError(f"{ground_path}: no ground truth for {data_id} (are the two files from one release?)")
        by_dialogue.setdefault(str(need(rec, "dialogue_id", f"{inputs}: {data_id}")), []).append(
            _record(rec, data_id, ground[data_id], f"{inputs}: {data_id}"))
    order = sorted(by_dialogue, key=md5)
    dev = sorted(order[test_dialogues:test_dialogues + dev_dialogues])
    train = sample_ids(order[test_dialogues + dev_dialogues:], train_sample, seed)
    out = out_dir(out)
    stats: dict[str, Any] = {"source": str(inputs.parent), "dialogues": len(order), "seed": seed,
                             "split": f"md5(dialogue_id) order: first {test_dialogues} test (not written), next "
                                      f"{dev_dialogues} dev, rest train"}
    for name, ids in (("dev", dev), ("train", train)):
        stats[name] = {"dialogues": len(ids), "records": write_jsonl(out / f"{name}.jsonl", _ordered(by_dialogue, ids))}
    stats["tools"] = write_jsonl(out / "tools.jsonl", _tools(tools_path))
    write_stats(out, stats)
    return stats


def _ordered(by_dialogue: dict[str, list[dict[str, Any]]], ids: Iterable[str]) -> Iterator[dict[str, Any]]:
    for did in ids:
        yield from sorted(by_dialogue[did], key=lambda r: int(r["user_turn_idx"]))


def _record(rec: dict[str, Any], data_id: str, calls: list[Any], where: str) -> dict[str, Any]:
    m = _TURN.search(data_id)
    if m is None:
        raise InputError(f"{where}: data_id should end in _turn_<n>")
    messages = need(rec, "question", where, list)
    # the user's and the assistant's words, as said (even empty); tool calls and tool results are left out
    turns = [{"speaker": "USER" if msg.get("role") == "user" else "SYSTEM", "utterance": msg["content"]}
             for msg in messages if isinstance(msg, dict) and msg.get("role") in ("user", "assistant")
             and isinstance(msg.get("content"), str) and not msg.get("tool_calls")]
    if not turns or turns[-1]["speaker"] != "USER":
        raise InputError(f"{where}: 'question' should end with the user's message")
    names = [str(need(c, "name", f"{where} ground_truth")) for c in calls]
    n = int(m.group(1))
    return {"dialogue_id": str(rec["dialogue_id"]), "data_id": data_id, "turn_idx": 2 * n, "user_turn_idx": n,
            "history": turns[:-1], "utterance": turns[-1]["utterance"],
            "gold_domains": sorted({domain(name) for name in names}), "gold_tool_calls": calls}


def _tools(path: Path) -> Iterator[dict[str, Any]]:
    tools = load_json(path)
    if not isinstance(tools, list):
        raise InputError(f"{path}: expected a JSON list of tool definitions")
    for i, tool in enumerate(tools):
        fn = need(tool, "function", f"{path}: tool {i}", dict)
        name = str(need(fn, "name", f"{path}: tool {i}"))
        props = (fn.get("parameters") or {}).get("properties") or {}
        yield {"name": name, "domain": domain(name), "description": str(fn.get("description", "")),
               "parameters": [{"name": str(k), "description": str((v or {}).get("description", ""))}
                              for k, v in props.items()]}
