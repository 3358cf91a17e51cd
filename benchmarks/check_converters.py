"""Check ``memroute eval convert`` against the converted sets the figures were measured on.

The upstream files cannot be fetched here, so each check rebuilds the upstream shape (LoCoMo's locomo10.json,
SGD's split folders and schema.json, JMultiWOZ-TC's input/ground/tools files, MultiWOZ's log file, CLINC150's
data_full.json, BANKING77's train.csv, kochat's CSVs) from a converted folder, runs the converter on it in a
temporary folder, and compares every record with the folder it came from. What a rebuild cannot carry (the
md5 split of JMultiWOZ-TC needs all 4,246 dialogues; MultiWOZ's belief states are not in the routing records)
is checked as far as the records allow and said so in the output.

    python -m benchmarks.check_converters [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memroute.eval.convert import common, intents, jmultiwoz, locomo, multiwoz, sgd
from memroute.eval.datasets import read_jsonl

Check = Callable[[Path, Path], str]


def rows(path: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(path))


def dump(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def same(name: str, got: list[dict[str, Any]], want: list[dict[str, Any]]) -> str:
    if got == want:
        return f"{name}: {len(want)} records equal"
    diff = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    def show(recs: list[dict[str, Any]]) -> str:
        return json.dumps(recs[diff] if diff < len(recs) else None, ensure_ascii=False)[:400]

    raise AssertionError(f"{name}: {len(got)} records vs {len(want)}; first difference at {diff}:\n"
                         f"  converted {show(got)}\n  expected  {show(want)}")


def check_locomo(data: Path, tmp: Path) -> str:
    folder = data / "locomo_retrieval"
    qa = rows(folder / "qa.jsonl")
    samples = []
    for conv in rows(folder / "sessions.jsonl"):
        c: dict[str, Any] = {"speaker_a": conv["speaker_a"], "speaker_b": conv["speaker_b"]}
        for s in conv["sessions"]:
            c[f"session_{s['session']}_date_time"] = s["date_time"]
            c[f"session_{s['session']}"] = [{"speaker": t["speaker"], "dia_id": t["dia_id"], "text": t["text"],
                                             **({"blip_caption": t["img_caption"]} if "img_caption" in t else {})}
                                            for t in s["turns"]]
        questions = sorted((q for q in qa if q["sample_id"] == conv["sample_id"]), key=lambda q: q["qa_idx"])
        assert [q["qa_idx"] for q in questions] == list(range(len(questions)))
        samples.append({"sample_id": conv["sample_id"], "conversation": c, "qa": [
            {"question": q["question"], "evidence": q["evidence"], "category": q["category"],
             **{k: q[k] for k in ("answer", "adversarial_answer") if k in q}} for q in questions]})
    dump(tmp / "locomo10.json", samples)
    locomo.convert(tmp / "locomo10.json", tmp / "out")
    return "; ".join((same("locomo sessions", rows(tmp / "out" / "sessions.jsonl"), rows(folder / "sessions.jsonl")),
                      same("locomo qa (evidence resolution included)", rows(tmp / "out" / "qa.jsonl"), qa)))


def _sgd_dialogues(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rebuild SGD dialogue files (``<file number>`` -> dialogues in order) from routing records."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_id.setdefault(r["dialogue_id"], []).append(r)
    files: dict[str, list[dict[str, Any]]] = {}
    for did, recs in by_id.items():
        user = {r["turn_idx"]: r for r in recs}
        last = recs[-1]
        turns = []
        for i, h in enumerate([*last["history"], {"speaker": "USER", "utterance": last["utterance"]}]):
            frames = [{"service": s, **({"state": {"active_intent": a}} if a is not None else {})}
                      for s, a in user[i]["gold_active_intents"].items()] if i in user else []
            turns.append({"speaker": h["speaker"], "utterance": h["utterance"], "frames": frames})
        files.setdefault(did.split("_")[0], []).append({"dialogue_id": did, "turns": turns})
    return files


def check_sgd(data: Path, tmp: Path) -> str:
    folder = data / "sgd_routing"
    services = rows(folder / "services.jsonl")
    for split in ("train", "dev"):
        dump(tmp / split / "schema.json", [{"service_name": s["name"], "description": s["description"],
                                            "intents": s["intents"], "slots": s["slots"]}
                                           for s in services if split in s["splits"]])
        for number, dialogues in _sgd_dialogues(rows(folder / f"{split}.jsonl")).items():
            dump(tmp / split / f"dialogues_{int(number):03d}.json", dialogues)
    # The train sample cannot be re-drawn here: random.Random(13).sample needs every train id, and files with
    # fewer than 128 dialogues have gaps in their numbering. So the sampled dialogues are converted unsampled
    # and compared in id order (the order the converter writes a sample in).
    sgd.convert(tmp, tmp / "out", train_sample=None)
    key = lambda r: (r["dialogue_id"], r["turn_idx"])  # noqa: E731
    return "; ".join([same("sgd dev (file order)", rows(tmp / "out" / "dev.jsonl"), rows(folder / "dev.jsonl")),
                      same("sgd train sample (records; the draw itself needs all train ids)",
                           sorted(rows(tmp / "out" / "train.jsonl"), key=key), rows(folder / "train.jsonl")),
                      same("sgd services", rows(tmp / "out" / "services.jsonl"), services)])


def check_jmultiwoz(data: Path, tmp: Path) -> str:
    folder = data / "jmultiwoz_tc_routing"
    records = rows(folder / "dev.jsonl") + rows(folder / "train.jsonl")
    with (tmp / "jmultiwoz_tc_input.jsonl").open("w", encoding="utf-8") as fi, \
            (tmp / "jmultiwoz_tc_ground.jsonl").open("w", encoding="utf-8") as fg:
        for r in records:
            msgs = [{"role": "system", "content": "-"}] + [
                {"role": "user" if h["speaker"] == "USER" else "assistant", "content": h["utterance"]}
                for h in r["history"]] + [{"role": "user", "content": r["utterance"]}]
            fi.write(json.dumps({"data_id": r["data_id"], "dialogue_id": r["dialogue_id"], "question": msgs},
                                ensure_ascii=False) + "\n")
            fg.write(json.dumps({"data_id": r["data_id"], "dialogue_id": r["dialogue_id"],
                                 "ground_truth": r["gold_tool_calls"]}, ensure_ascii=False) + "\n")
    tools = rows(folder / "tools.jsonl")
    dump(tmp / "tools.json", [{"type": "function", "function": {
        "name": t["name"], "description": t["description"], "parameters": {"type": "object", "properties": {
            p["name"]: {"type": "string", "description": p["description"]} for p in t["parameters"]}}}}
        for t in tools])
    jmultiwoz.convert(tmp, tmp / "out", test_dialogues=0, dev_dialogues=10**9, train_sample=None)
    want = sorted(records, key=lambda r: (r["dialogue_id"], r["user_turn_idx"]))
    dev_md5 = max(common.md5(r["dialogue_id"]) for r in rows(folder / "dev.jsonl"))
    train_md5 = min(common.md5(r["dialogue_id"]) for r in rows(folder / "train.jsonl"))
    assert dev_md5 < train_md5, "dev dialogues should all come before train ones in md5 order"
    return "; ".join((same("jmultiwoz dev+train records", rows(tmp / "out" / "dev.jsonl"), want),
                      same("jmultiwoz tools", rows(tmp / "out" / "tools.jsonl"), tools),
                      "dev precedes train in md5(dialogue_id) order (the 300/300 cut needs all 4,246 dialogues)"))


def check_multiwoz(data: Path, tmp: Path) -> str:
    folder = data / "multiwoz_routing"
    services = rows(folder / "services.jsonl")
    dump(tmp / "schema.json", [{"service_name": s["name"], "description": s["description"],
                                "intents": s["intents"], "slots": s["slots"]} for s in services])
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in rows(folder / "dev.jsonl"):
        by_id.setdefault(r["dialogue_id"], []).append(r)
    dialogues = {}
    for did, recs in by_id.items():  # belief states rebuilt so that exactly state_domains change at each turn
        counter: dict[str, int] = {}
        log = []
        for r in recs:
            for d in r["state_domains"]:
                counter[d] = counter.get(d, 0) + 1
            system = next((h["utterance"] for h in _after(recs, r)), "-")
            log += [{"text": r["utterance"], "metadata": {}, "dialog_act": {a: [] for a in r["user_acts"]}},
                    {"text": system, "metadata": {d: {"semi": {"n": str(n)}, "book": {"booked": []}}
                                                  for d, n in counter.items()}, "dialog_act": {}}]
        dialogues[did] = {"log": log}
    dump(tmp / "val.json", dialogues)
    multiwoz.convert(tmp / "val.json", tmp / "out", schema=tmp / "schema.json")
    return "; ".join((same("multiwoz records (belief states synthesised from state_domains)",
                           rows(tmp / "out" / "dev.jsonl"), rows(folder / "dev.jsonl")),
                      same("multiwoz services", rows(tmp / "out" / "services.jsonl"), services)))


def _after(recs: list[dict[str, Any]], r: dict[str, Any]) -> list[dict[str, str]]:
    """The system turn after ``r``: the last history entry of the next record."""
    later = [x for x in recs if x["turn_idx"] > r["turn_idx"]]
    return [later[0]["history"][-1]] if later else []


def check_intents(data: Path, tmp: Path) -> str:
    out = []
    clinc = data / "clinc150"
    train, dev, labels = rows(clinc / "train.jsonl"), rows(clinc / "dev.jsonl"), rows(clinc / "labels.jsonl")
    full = {"train": [], "val": [], "test": [], "oos_train": [], "oos_val": [], "oos_test": []}
    for recs in (train, dev):
        for r in recs:
            full[r["id"].rsplit("-", 1)[0]].append([r["text"], r["label"]])
    dump(tmp / "clinc" / "data_full.json", full)
    domains: dict[str, list[str]] = {}
    for lb in labels:
        domains.setdefault(lb["domain"], []).append(lb["label"])
    dump(tmp / "clinc" / "domains.json", domains)
    intents.clinc150(tmp / "clinc", tmp / "clinc_out")
    out += [same(f"clinc150 {n}", rows(tmp / "clinc_out" / f"{n}.jsonl"), w)
            for n, w in (("train", train), ("dev", dev), ("labels", labels))]

    bank = data / "banking77"
    (tmp / "bank").mkdir()
    with (tmp / "bank" / "train.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerows([["text", "category"], *([r["text"], r["label"]] for r in rows(bank / "train.jsonl"))])
    intents.banking77(tmp / "bank", tmp / "bank_out")
    out += [same(f"banking77 {n}", rows(tmp / "bank_out" / f"{n}.jsonl"), rows(bank / f"{n}.jsonl"))
            for n in ("train", "labels")]

    ko = data / "kochat_ko_intent"
    dev_ko = rows(ko / "dev.jsonl")
    for label in {r["label"] for r in dev_ko}:
        path = tmp / "kochat" / ("ood" if label == "OOD" else "raw") / f"{label}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as fh:
            texts = [[r["text"], "O"] for r in dev_ko if r["label"] == label]
            csv.writer(fh).writerows([["question", "label"], *texts])
    intents.kochat(tmp / "kochat", tmp / "ko_out", holdout=0.0)
    offset = int(dev_ko[0]["id"].split("-")[1])
    want = [{**r, "id": f"kochat-{int(r['id'].split('-')[1]) - offset}"} for r in dev_ko]
    out.append(same("kochat dev (md5 order; ids shifted by the held-out test split)",
                    rows(tmp / "ko_out" / "dev.jsonl"), want))
    return "; ".join(out)


CHECKS: dict[str, Check] = {"locomo": check_locomo, "sgd": check_sgd, "jmultiwoz": check_jmultiwoz,
                            "multiwoz": check_multiwoz, "intents": check_intents}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("only", nargs="*", help=f"checks to run: {', '.join(CHECKS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.only if n not in CHECKS]
    if unknown:
        parser.error(f"unknown check {', '.join(unknown)} (choose from {', '.join(CHECKS)})")
    failed = 0
    for name in args.only or CHECKS:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                print(f"ok   {CHECKS[name](args.data, Path(tmp))}")
            except AssertionError as exc:
                failed += 1
                print(f"FAIL {name}: {exc}")
    print(f"command: python -m benchmarks.check_converters --data {args.data}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
