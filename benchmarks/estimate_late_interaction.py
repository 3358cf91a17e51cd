"""Estimate MaxSim over e5's token vectors as one more reranker column, through the whole recall pipeline, held out.

The late-interaction probe (:mod:`benchmarks.probe_late_interaction`) scores texts one by one; this asks whether the
same evidence still adds anything once BM25, the vector search over windows and the reranker have run. For one
encoder it collects the reranker's candidate rows as ``memroute eval recall --loo`` / ``--fit`` see them (LoCoMo,
and the everyday **train** split: the fitting sets, never dev), adds one column per candidate (its MaxSim against the
question: question tokens on the query side, the memory's text on the passage side, from
:meth:`memroute.embed.e5_int8.E5Int8.embed_tokens`, or with ``--tokens use-m3:FORM`` from use-m3's own pass,
:mod:`benchmarks.use_m3_tokens`), and refits the reranker with and without it:

- setting ``A`` (use-m3's shipped setting): LoCoMo alone, L2 :data:`memroute.eval.recall_eval.L2`; LoCoMo scored
  leave one conversation out, everyday train by the fit on all of LoCoMo;
- setting ``B`` (the tenth everyday pass's small-store setting): every column also times ``small`` (fewer than
  ``max_candidates`` candidates), everyday train at a quarter of the weight, L2 1; LoCoMo leave one conversation out,
  train leave one store out.

Columns (per store: a LoCoMo conversation, an everyday store; its memories are the passages):

- ``maxsim``, ``maxsim-idf`` (df over the store's memories), ``maxsim-centred`` (the store's mean token vector taken
  from both sides, as the probe defines them), ``centred-idf`` (both at once);
- ``centred-idf-fixed-mean``: centred on one mean over every memory of the run (so vectors could be centred once at
  ingest); ``centred-idf-fixed``: that mean and a df over every memory of the run too.

Reported per setting and column: LoCoMo recall@5 / MRR, questions whose recall@5 rises / falls against the setting
without a column (and bootstrap intervals of the recall@5 and MRR changes, resampling questions), and everyday
train's answerable questions whose reranker-first candidate answers (``first``), with their MRR; and each column's mean
Spearman correlation with the reranker's ``bm25``, ``keyword_overlap`` and ``cosine`` across one LoCoMo question's
candidates (how much of it the reranker already had). Rows and token vectors are cached in ``--cache`` (reused when
present).

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.estimate_late_interaction --embedder use-m3 \
        --workdir /tmp/li/lm3 --cache /tmp/li [--columns centred-idf,maxsim-idf] [--json]
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.probe_encoders import EVERYDAY_TRAIN  # noqa: E402
from benchmarks.probe_late_interaction import LOCOMO, Encoded, _centred, idf  # noqa: E402

COLUMNS = ("maxsim", "maxsim-idf", "maxsim-centred", "centred-idf", "centred-idf-fixed-mean", "centred-idf-fixed")
Array = npt.NDArray[np.float64]


class Passages:
    """One store's memories as MaxSim's passages: token vectors stacked once, the store's mean and idf, and the
    run's fixed mean and idf (``fixed``: every memory of the run)."""

    def __init__(self, memories: dict[str, Encoded], fixed_mean: np.ndarray, fixed_idf: Any) -> None:
        self.pos = {mid: k for k, mid in enumerate(memories)}
        encs = list(memories.values())
        counts = np.array([max(len(e.tokens), 1) for e in encs])
        self.starts = np.r_[0, np.cumsum(counts)[:-1]]
        self.tokens = np.concatenate([e.tokens if len(e.tokens) else np.zeros((1, e.tokens.shape[1]), np.float32)
                                      for e in encs]).astype(np.float32)
        self.mean = np.asarray(self.tokens.mean(axis=0), np.float32)
        self.centred = _centred(self.tokens, self.mean)
        self.fixed_mean, self.fixed = fixed_mean, _centred(self.tokens, fixed_mean)
        self.idf, self.fixed_idf = idf(encs), fixed_idf

    def columns(self, question: Encoded, ids: Sequence[str]) -> Array:
        """Every column of :data:`COLUMNS` for the candidates ``ids`` (one row each)."""
        if not len(question.tokens):
            return np.zeros((len(ids), len(COLUMNS)))
        q = question.tokens.astype(np.float32)

        def best(qt: np.ndarray, dt: np.ndarray) -> np.ndarray:
            return np.asarray(np.maximum.reduceat(qt @ dt.T, self.starts, axis=1), np.float64)

        def weighted(b: np.ndarray, w: np.ndarray) -> np.ndarray:
            return np.asarray((b * w[:, None]).sum(axis=0) / max(float(w.sum()), 1e-9))

        raw, cen = best(q, self.tokens), best(_centred(q, self.mean), self.centred)
        fix = best(_centred(q, self.fixed_mean), self.fixed)
        w, fw = self.idf(question.ids).astype(np.float64), self.fixed_idf(question.ids).astype(np.float64)
        table = np.stack([raw.mean(axis=0), weighted(raw, w), cen.mean(axis=0), weighted(cen, w), weighted(fix, w),
                          weighted(fix, fw)], axis=1)
        return np.asarray(table[[self.pos[i] for i in ids]], np.float64)


def fill_tokens(texts: Sequence[tuple[str, str]], cache: dict[tuple[str, str], Encoded], source: str = "e5") -> None:
    """Fill ``cache`` with the token ids and vectors of each ``(side, text)`` not yet in it: e5's (``source``
    ``"e5"``), or use-m3's of one form of :data:`benchmarks.use_m3_tokens.FORMS` (``"use-m3:projected"``; use-m3
    has no query / passage side, so both sides get the same vectors)."""
    todo = [k for k in dict.fromkeys(texts) if k not in cache]
    if not todo:
        return
    if source == "e5":
        from memroute.embed.e5_int8 import E5Int8, packaged_weights

        engine = E5Int8(packaged_weights())
        for side, text in todo:
            _, ids, tokens = engine.embed_tokens(text, side)
            cache[(side, text)] = Encoded(ids, tokens.astype(np.float16), {})
        return
    from benchmarks.use_m3_tokens import FORMS, UseM3Tokens

    form = source.removeprefix("use-m3:")
    if not source.startswith("use-m3:") or form not in FORMS:
        raise ValueError(f"unknown token source {source!r}: e5, or use-m3:FORM with FORM one of {', '.join(FORMS)}")
    model = UseM3Tokens()
    done: dict[str, Encoded] = {}
    for side, text in todo:
        if text not in done:
            p = model.encode(text)
            done[text] = Encoded(p.ids, p.forms[form].astype(np.float16), {})
        cache[(side, text)] = done[text]


def collect(embedder: str, locomo: Path, everyday: Path, workdir: Path) -> dict[str, list[dict[str, Any]]]:
    """The reranker's candidate rows of every LoCoMo and everyday question, with the question's text and its
    store's memories' own texts (as MaxSim reads them)."""
    from memroute.eval import recall_eval
    from memroute.eval.everyday import load_everyday
    from memroute.eval.everyday_eval import run_everyday
    from memroute.eval.locomo import load_locomo
    from memroute.retrieval import FEATURES, RecallOptions

    rows: dict[str, list[dict[str, Any]]] = {"locomo": [], "everyday": []}
    stores = load_everyday(everyday)
    texts = {s.id: {m.id: m.text for m in s.memories} for s in stores}
    for o in run_everyday(stores, embedder):
        q, cands = o.question, o.recall.trace.candidates
        x = np.array([[c.features.get(f, 0.0) for f in FEATURES] for c in cands], np.float64)
        rows["everyday"].append(dict(group=q.store, key=q.id, text=q.text, answerable=q.answerable,
                                     gold=frozenset(q.answers), ignore=frozenset(q.stale | q.related),
                                     ids=tuple(c.id for c in cands), x=x.reshape(len(cands), len(FEATURES)),
                                     memories=texts[q.store]))
    workdir.mkdir(parents=True, exist_ok=True)
    for conv in load_locomo(locomo):
        mem = recall_eval.open_store(conv, workdir, embedder)
        try:
            runs = recall_eval.run_conversation(mem, conv, RecallOptions())
        finally:
            mem.close()
        own = {m["id"]: m["text"] for m in conv.memories()}
        for n, (lq, r) in enumerate(zip(conv.questions, runs, strict=True)):
            rows["locomo"].append(dict(group=conv.sample_id, key=f"{conv.sample_id}/{n}", text=lq.text,
                                       gold=r.evidence, ids=r.ids, x=r.features, memories=own))
    return rows


def add_columns(rows: dict[str, list[dict[str, Any]]], tokens: dict[tuple[str, str], Encoded],
                source: str = "e5") -> None:
    """Each row's ``m``: its candidates' :data:`COLUMNS` over ``source``'s token vectors (:func:`fill_tokens`); a
    store's passages are all its memories (a LoCoMo conversation's turns, an everyday store's memories)."""
    every = [r for rs in rows.values() for r in rs]
    fill_tokens([("query", r["text"]) for r in every]
                + [("passage", t) for r in every for t in r["memories"].values()], tokens, source)
    texts: dict[str, dict[str, str]] = {}
    for r in every:
        texts.setdefault(r["group"], {}).update(r["memories"])
    run = {t: tokens[("passage", t)] for mems in texts.values() for t in mems.values()}
    fixed_mean = np.asarray(np.concatenate([e.tokens for e in run.values() if len(e.tokens)]).astype(np.float32)
                            .mean(axis=0), np.float32)
    fixed_idf = idf(list(run.values()))
    stores = {g: Passages({mid: tokens[("passage", t)] for mid, t in mems.items()}, fixed_mean, fixed_idf)
              for g, mems in texts.items()}
    for r in every:
        r["m"] = stores[r["group"]].columns(tokens[("query", r["text"])], r["ids"])


def _design(r: dict[str, Any], column: int | None, small: bool, limit: int) -> Array:
    x = r["x"] if column is None else np.hstack([r["x"], r["m"][:, [column]]])
    if small:
        s = float(len(r["ids"]) < limit)
        x = np.hstack([x, s * x, np.full((len(x), 1), s)])
    return np.asarray(x, np.float64)


def _rows(rs: Sequence[dict[str, Any]], column: int | None, small: bool, limit: int) -> tuple[Array, Array]:
    xs, ys = [], []
    for r in rs:
        keep = [k for k, i in enumerate(r["ids"]) if i not in r.get("ignore", ())]
        xs.append(_design(r, column, small, limit)[keep])
        ys.append(np.array([float(r["ids"][k] in r["gold"]) for k in keep]))
    return np.vstack(xs), np.concatenate(ys)


def refit(locomo: Sequence[dict[str, Any]], everyday: Sequence[dict[str, Any]], share: float, l2: float,
          column: int | None, small: bool, limit: int) -> Any:
    """The reranker fitted as ``--fit`` does (``fit_logistic``), everyday rows at ``share`` of the total weight: a
    plain linear scorer over this script's design (its own columns; ``RerankModel`` reads the shipped ones)."""
    from memroute.retrieval.rerank_fit import fit_logistic

    x, y = _rows(locomo, column, small, limit)
    w = None
    if share > 0 and everyday:
        xe, ye = _rows(everyday, column, small, limit)
        n = len(y) + len(ye)
        w = np.concatenate([np.full(len(y), (1 - share) * n / len(y)), np.full(len(ye), share * n / len(ye))])
        x, y = np.vstack([x, xe]), np.concatenate([y, ye])
    wt, b, m, s = fit_logistic(x, y, l2, 50, w)
    return Linear(wt, b, m, s)


class Linear:
    """The logistic model of :func:`refit` over a design matrix as :func:`_design` makes it."""

    def __init__(self, weights: Array, bias: float, mean: Array, scale: Array) -> None:
        self.weights, self.bias, self.mean, self.scale = weights, bias, mean, scale

    def score(self, x: Array) -> Array:
        z = ((x - self.mean) / self.scale) @ self.weights + self.bias
        return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -30, 30))), np.float64)


def _ranked(model: Any, r: dict[str, Any], column: int | None, small: bool, limit: int) -> list[str]:
    p = model.score(_design(r, column, small, limit))
    return [r["ids"][j] for j in sorted(range(len(r["ids"])), key=lambda j: (-p[j], j))]


def held_out(rows: dict[str, list[dict[str, Any]]], share: float, l2: float, column: int | None, small: bool,
             limit: int) -> tuple[dict[str, dict[str, float]], dict[str, tuple[bool, float]]]:
    """LoCoMo's scores per question (leave one conversation out) and everyday's (first answers, reciprocal rank)
    per answerable question (the fit on all of LoCoMo when ``share`` is 0, else leave one store out)."""
    from memroute.eval.recall_eval import scores

    loc = [r for r in rows["locomo"] if r["ids"]]
    ev = [r for r in rows["everyday"] if r["ids"]]
    lo: dict[str, dict[str, float]] = {}
    for g in sorted({r["group"] for r in loc}):
        model = refit([r for r in loc if r["group"] != g], ev, share, l2, column, small, limit)
        for r in loc:
            if r["group"] == g:
                lo[r["key"]] = scores(_ranked(model, r, column, small, limit), r["gold"])
    folds = [None] if share == 0 else sorted({r["group"] for r in ev})
    out: dict[str, tuple[bool, float]] = {}
    for g in folds:
        model = refit(loc, [r for r in ev if r["group"] != g] if g else [], share, l2, column, small, limit)
        for r in ev:
            if r["answerable"] and (g is None or r["group"] == g):
                ranked = _ranked(model, r, column, small, limit)
                k = next((i for i, m in enumerate(ranked) if m in r["gold"]), None)
                out[r["key"]] = (ranked[0] in r["gold"], 0.0 if k is None else 1 / (k + 1))
    return lo, out


def _bootstrap(change: Array) -> list[float]:
    """A 95 % interval of the mean of ``change`` (1,000 resamples of questions, a fixed seed)."""
    rng = np.random.default_rng(0)
    boot = [float(change[rng.integers(0, len(change), len(change))].mean()) for _ in range(1000)]
    return [round(float(np.percentile(boot, q)), 4) for q in (2.5, 97.5)]


def compare(rows: dict[str, list[dict[str, Any]]], columns: Sequence[str], limit: int = 50) -> list[dict[str, Any]]:
    """Per setting, the figures without a column and with each of ``columns``."""
    from memroute.eval.recall_eval import L2

    answerable = sum(1 for r in rows["everyday"] if r["answerable"])
    report = []
    for setting, share, l2, small in (("A", 0.0, L2, False), ("B", 0.25, 1.0, True)):
        base: tuple[Any, Any, Any] | None = None
        for name in (None, *columns):
            lo, ev = held_out(rows, share, l2, None if name is None else COLUMNS.index(name), small, limit)
            r5 = np.array([lo[k]["recall@5"] for k in sorted(lo)])
            rr = np.array([lo[k]["mrr"] for k in sorted(lo)])
            row: dict[str, Any] = {
                "setting": setting, "column": name or "without", "locomo_recall@5": round(float(r5.mean()), 4),
                "locomo_mrr": round(float(np.mean([s["mrr"] for s in lo.values()])), 4),
                "train_first": sum(a for a, _ in ev.values()), "train_answerable": answerable,
                "train_mrr": round(sum(b for _, b in ev.values()) / max(answerable, 1), 3)}
            if base is None:
                base = (r5, ev, rr)
            else:
                d = r5 - base[0]
                row["locomo_up_down"] = [int((d > 0).sum()), int((d < 0).sum())]
                row["locomo_change_95"] = _bootstrap(d)
                row["locomo_mrr_change_95"] = _bootstrap(rr - base[2])
                row["train_first_up_down"] = [sum(a and not base[1][k][0] for k, (a, _) in ev.items()),
                                              sum(base[1][k][0] and not a for k, (a, _) in ev.items())]
            report.append(row)
    return report


def correlations(rows: Sequence[dict[str, Any]], columns: Sequence[str],
                 features: Sequence[str] = ("bm25", "keyword_overlap", "cosine")) -> dict[str, dict[str, float]]:
    """Per column, its mean Spearman correlation with each of ``features`` across one question's candidates
    (questions with at least five): how much of what the column ranks by the reranker already has."""
    from memroute.retrieval import FEATURES

    def ranks(v: Array) -> Array:
        return np.asarray(np.argsort(np.argsort(v, kind="stable"), kind="stable"), np.float64)

    out: dict[str, dict[str, list[float]]] = {c: {f: [] for f in features} for c in columns}
    for r in rows:
        if len(r["ids"]) < 5:
            continue
        for c in columns:
            a = ranks(r["m"][:, COLUMNS.index(c)])
            for f in features:
                b = ranks(r["x"][:, FEATURES.index(f)])
                if a.std() > 0 and b.std() > 0:
                    out[c][f].append(float(np.corrcoef(a, b)[0, 1]))
    return {c: {f: round(float(np.mean(v)), 3) for f, v in fs.items() if v} for c, fs in out.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="use-m3")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo-format data (a folder)")
    parser.add_argument("--everyday", type=Path, default=EVERYDAY_TRAIN, help="an everyday-format file (train)")
    parser.add_argument("--workdir", type=Path, required=True, help="LoCoMo's stores (built once, reused)")
    parser.add_argument("--cache", type=Path, required=True, help="where rows and token vectors are kept")
    parser.add_argument("--columns", default=",".join(COLUMNS), help=f"comma-separated, of {', '.join(COLUMNS)}")
    parser.add_argument("--tokens", default="e5", help="whose token vectors: e5 (default), or use-m3:FORM (FORM "
                        "one of benchmarks.use_m3_tokens.FORMS, e.g. use-m3:projected)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    columns = [c for c in args.columns.split(",") if c]
    unknown = set(columns) - set(COLUMNS)
    if unknown:
        parser.error(f"unknown columns: {', '.join(sorted(unknown))}")
    t0, c0 = time.perf_counter(), time.process_time()
    args.cache.mkdir(parents=True, exist_ok=True)
    rows_file = args.cache / f"rows-{args.embedder}.pkl"
    tokens_file = args.cache / f"{args.tokens.replace(':', '-')}-tokens.pkl"
    if rows_file.exists():
        rows = pickle.loads(rows_file.read_bytes())
    else:
        rows = collect(args.embedder, args.locomo, args.everyday, args.workdir)
        rows_file.write_bytes(pickle.dumps(rows))
    tokens = pickle.loads(tokens_file.read_bytes()) if tokens_file.exists() else {}
    add_columns(rows, tokens, args.tokens)
    tokens_file.write_bytes(pickle.dumps(tokens))
    report = compare(rows, columns)
    out = {"embedder": args.embedder, "tokens": args.tokens, "seconds": round(time.perf_counter() - t0, 1),
           "cpu_seconds": round(time.process_time() - c0, 1), "rows": report,
           "locomo_spearman": correlations(rows["locomo"], columns)}
    print(json.dumps(out, ensure_ascii=False, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
