"""PostgreSQL BM25 and hybrid search on the distinct-text bench corpus, before and after a change, same database.

    python -m benchmarks.bench_pg_bm25 load URL N        # fill URL (a schema of its own) with N memories
    python -m benchmarks.bench_pg_bm25 measure URL OUT   # time BM25 and hybrid search; write OUT (JSON)
    python -m benchmarks.bench_pg_bm25 reference URL OUT # exact BM25 over every matching row (no index)
    python -m benchmarks.bench_pg_bm25 compare A B       # top-10 overlap of two measurements
    python -m benchmarks.bench_pg_bm25 rebuild URL       # how long writes and searches wait for a blocks rebuild
    python -m benchmarks.bench_pg_bm25 vectors URL OUT [--queries N]  # HNSW recall against exact search
    python -m benchmarks.bench_pg_bm25 pending-delete URL N  # how long a delete of N pending rows waits

``load`` writes the memories of :func:`memroute.eval.bench_corpus.bench_corpus` (distinct real texts, then
distinct combinations of two; their cached ``use-m3`` vectors, :func:`corpus_vectors`) with ``bulk_load``
(binary COPY, then the HNSW and GIN indexes built once): dates and sessions as ``memroute bench store``
gives them, one owner. A combination's tokens are its two texts' tokens one after the other (tokenising
1M texts would measure the tokenisers). ``measure`` times what ``memroute bench store`` times, on the
held-out queries: ``search_bm25`` of the query's tokens (weights 1 / 0, and 1 / 0.5 as hybrid search asks)
and ``Memory.search(mode="hybrid")`` (embedding, both searches, fusion, loading), wall and CPU time of
this process, and keeps every top 10 so that two runs (before and after a change) can be compared. The
first searches pay the collection statistics and document frequencies, as in ``memroute bench store``.
Run ``measure`` with another ``PYTHONPATH`` to measure another version of memroute on the same rows.
``rebuild`` packs the BM25 blocks again from the postings (what a store does past ``DEAD_ROWS`` deleted rows)
while one thread writes a memory at a time (owner ``rebuild-writer``, one statement each, deleted afterwards)
and another runs the bench queries' BM25 searches: each write's and search's wall time during the rebuild.
``vectors`` runs the hybrid queries' vector search as hybrid search asks for it (the same filter, ``limit``
40) exactly and through the HNSW graph at several ``hnsw.ef_search``: recall@10 and @40 of the graph against
the exact search, each one's wall time, and how often hybrid search's top 10 (the BM25 list and the vector
list fused as ``Memory.search`` fuses them) is the one it gives with the exact vector list.
``pending-delete`` writes N memories (owner ``delete-writer``, random vectors) with the store's background
indexer on, waits until the indexer has moved some of them into the HNSW graph, then deletes all N: the
delete's wall time and how many rows the indexer moved while it ran (a delete that waits for the rows it
deletes to be moved first shows most of them here).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memroute.embed import get_embedder
from memroute.eval.bench_corpus import bench_corpus, corpus_vectors
from memroute.eval.synthetic import synthetic_memories
from memroute.memory import Memory
from memroute.stores import MemoryRecord
from memroute.text import tokenize

QUERIES = 200
HYBRID = 100


def _pct(samples: list[float]) -> dict[str, float]:
    arr = np.asarray(samples)
    return {"p50": round(float(np.percentile(arr, 50)), 2), "p95": round(float(np.percentile(arr, 95)), 2),
            "max": round(float(arr.max()), 2)}


def load(url: str, n: int) -> None:
    corpus = bench_corpus(n, QUERIES)
    embedder = get_embedder().inner
    vectors, how = corpus_vectors(embedder, corpus.distinct.texts)
    print(corpus.describe(), "|", how, file=sys.stderr, flush=True)
    used = sorted({j for p in corpus.parts for j in p})
    tokens: dict[int, list[str]] = {}
    for k, j in enumerate(used):
        tokens[j] = tokenize(corpus.distinct.texts[j])
        if k % 20000 == 0:
            print(f"  tokenised {k:,} / {len(used):,}", file=sys.stderr, flush=True)
    mem = Memory.open(url, owner="owner-0", embedder=embedder)
    mem.forget(everything=True)
    t0, c0 = time.perf_counter(), time.process_time()

    def records() -> Any:
        for i, meta in zip(range(n), synthetic_memories(n), strict=True):
            item = mem.item_of({**meta, "text": corpus.text(i)})[0]
            yield MemoryRecord(item, [t for j in corpus.parts[i] for t in tokens[j]], corpus.vector(i, vectors))
            if i % 100000 == 0:
                print(f"  loading {i:,} / {n:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)

    written = mem.store.bulk_load(records(), rebuild_indexes=True)  # type: ignore[attr-defined]
    print(json.dumps({"loaded": written, "seconds": round(time.perf_counter() - t0, 1),
                      "cpu_s": round(time.process_time() - c0, 1), "corpus": corpus.describe(),
                      "load_average": os.getloadavg(), "finished": datetime.now(UTC).isoformat("T", "seconds")}))
    mem.close()


def measure(url: str, out: Path) -> None:
    corpus_queries = bench_corpus(1, QUERIES).queries
    embedder = get_embedder().inner
    mem = Memory.open(url, owner="owner-0", embedder=embedder)
    store, flt = mem.store, mem.filter()
    embedder.embed(["load the model"], side="query")
    result: dict[str, Any] = {"memories": store.count(), "started": datetime.now(UTC).isoformat("T", "seconds"),
                              "load_average_start": os.getloadavg()}
    for name, weights in (("bm25", (1.0, 0.0)), ("bm25_ctx", (1.0, 0.5))):
        wall, cpu, tops = [], [], []
        for text in corpus_queries:
            toks = tokenize(text)
            t, c = time.perf_counter(), time.process_time()
            hits = store.search_bm25(toks, flt, 10, weights=weights)
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            tops.append([[h.id, h.score] for h in hits])
        result[name] = {"wall_ms": _pct(wall), "cpu_ms": _pct(cpu), "top10": tops}
    wall, cpu, ids = [], [], []
    for text in corpus_queries[:HYBRID]:
        t, c = time.perf_counter(), time.process_time()
        found = mem.search(text, mode="hybrid", limit=10)
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        ids.append([h.memory.id for h in found])
    result["hybrid"] = {"wall_ms": _pct(wall), "cpu_ms": _pct(cpu), "top10": ids}
    result["load_average_end"] = os.getloadavg()
    result["finished"] = datetime.now(UTC).isoformat("T", "seconds")
    mem.close()
    out.write_text(json.dumps(result), encoding="utf-8")
    print(json.dumps({k: (v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk != "top10"})
                      for k, v in result.items()}))


def reference(url: str, out: Path) -> None:
    """The BM25 top 10 of each query scored over every row that holds a query term (read from the table,
    no postings, no cut): what an exact search must return. Same statistics as the store's."""
    import psycopg

    from memroute.stores.pg_sql import bm25_scores, split_schema, tsquery

    conninfo, schema = split_schema(url)
    tops: dict[str, list[list[Any]]] = {"bm25": [], "bm25_ctx": []}
    with psycopg.connect(conninfo) as conn:
        if schema:
            conn.execute(f"SET search_path = {schema}, public")
        docs, s_own, s_ctx = conn.execute("SELECT count(*), sum(len_own), sum(len_ctx) FROM "
                                          "memroute_lexical").fetchone() or (0, 0, 0)
        for text in bench_corpus(1, QUERIES).queries:
            terms = sorted({t for t in ("".join(tok.split()) for tok in tokenize(text)) if t})
            rows = conn.execute("SELECT id, tokens, context_tokens, len_own, len_ctx, row_id FROM memroute_lexical "
                                "WHERE owner = 'owner-0' AND (tsv_own @@ %s::tsquery OR tsv_ctx @@ %s::tsquery)",
                                (tsquery(terms),) * 2).fetchall() if terms else []
            dfs = {}
            for t in terms:
                dfs[t] = conn.execute("SELECT count(*) FILTER (WHERE tsv_own @@ %s::tsquery), count(*) FROM "
                                      "memroute_lexical WHERE tsv_own @@ %s::tsquery OR tsv_ctx @@ %s::tsquery",
                                      (tsquery([t]),) * 3).fetchone() or (0, 0)
            for name, w_ctx in (("bm25", 0.0), ("bm25_ctx", 0.5)):
                df = {t: max(int(v[1] if w_ctx > 0 else v[0]), 1) for t, v in dfs.items()}
                scored = bm25_scores(rows, terms, 1.0, w_ctx, (int(docs), float(s_own), float(s_ctx)), df)
                scored.sort(key=lambda s: (-s[0], s[1]))
                tops[name].append([[mid, score] for score, _, mid in scored[:10]])
    out.write_text(json.dumps({k: {"top10": v} for k, v in tops.items()}), encoding="utf-8")


def rebuild(url: str) -> None:
    import threading

    from memroute.stores import open_store
    from memroute.types import MemoryItem, SearchFilter

    queries = [tokenize(q) for q in bench_corpus(1, QUERIES).queries]
    store = open_store(url)
    dim = int(store.stats().dimension or 0)
    flt = SearchFilter(owner="owner-0")
    rng = np.random.default_rng(0)
    stop = threading.Event()
    writes: list[tuple[float, float]] = []  # (start, end) of each call
    searches: list[tuple[float, float]] = []
    ids: list[str] = []

    def write() -> None:
        while not stop.is_set():
            mid = f"rw{len(ids)}"
            vec = rng.standard_normal(dim).astype(np.float32)
            record = MemoryRecord(MemoryItem(id=mid, owner="rebuild-writer", text=f"rebuild writer note {mid}"),
                                  ["rebuild", "writer", "note", mid], vec / np.linalg.norm(vec))
            t = time.perf_counter()
            store.upsert([record])
            writes.append((t, time.perf_counter()))
            ids.append(mid)

    def search() -> None:
        k = 0
        while not stop.is_set():
            t = time.perf_counter()
            store.search_bm25(queries[k % len(queries)], flt, 10)
            searches.append((t, time.perf_counter()))
            k += 1

    result: dict[str, Any] = {"memories": store.count(), "started": datetime.now(UTC).isoformat("T", "seconds"),
                              "load_average_start": os.getloadavg()}
    threads = [threading.Thread(target=write), threading.Thread(target=search)]
    for th in threads:
        th.start()
    time.sleep(2.0)
    b0 = time.perf_counter()
    store._run("rebuild the BM25 blocks", store.op_build_blocks())  # type: ignore[attr-defined]
    b1 = time.perf_counter()
    result["rebuild_s"] = round(b1 - b0, 1)
    time.sleep(1.0)
    stop.set()
    for th in threads:
        th.join()
    for name, calls in (("writes", writes), ("searches", searches)):
        during = [(end - start) * 1000 for start, end in calls if start < b1 and end > b0]  # overlapping it
        result[f"{name}_during"] = len(during)
        result[f"{name}_ms"] = _pct(during) if during else None
    result["load_average_end"] = os.getloadavg()
    store.delete(ids, "rebuild-writer")
    store.close()
    print(json.dumps(result))


def pending_delete(url: str, n: int) -> None:
    from memroute.stores import open_store
    from memroute.types import MemoryItem

    store = open_store(url)
    indexer = store._indexer  # type: ignore[attr-defined]
    dim = int(store.stats().dimension or 0)
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"dw{i}" for i in range(n)]
    result: dict[str, Any] = {"memories": n, "started": datetime.now(UTC).isoformat("T", "seconds"),
                              "load_average_start": os.getloadavg()}
    t = time.perf_counter()
    for start in range(0, n, 500):
        store.upsert([MemoryRecord(MemoryItem(id=mid, owner="delete-writer", text=f"delete writer note {mid}"),
                                   ["delete", "writer", "note", mid], vecs[start + k])
                      for k, mid in enumerate(ids[start:start + 500])])
    result["write_s"] = round(time.perf_counter() - t, 2)
    deadline = time.monotonic() + 60
    while indexer.moved == 0 and time.monotonic() < deadline:  # a move is in flight from here on
        time.sleep(0.01)
    moved = indexer.moved
    t, c = time.perf_counter(), time.process_time()
    result["deleted"] = store.delete(ids, "delete-writer")
    result["delete_ms"] = round((time.perf_counter() - t) * 1000, 1)
    result["delete_cpu_ms"] = round((time.process_time() - c) * 1000, 1)
    result["moved_before_delete"], result["moved_during_delete"] = moved, indexer.moved - moved
    result["load_average_end"] = os.getloadavg()
    store.close()
    print(json.dumps(result))


EF_SEARCH = (None, 40, 80, 120, 160, 320)
"""``hnsw.ef_search`` values ``vectors`` sets (None: the store's own choice for the limit)."""


def vectors(url: str, out: Path, queries: int = HYBRID, exact_from: Path | None = None,
            exact_only: bool = False) -> None:
    """``exact_only``: stop after the exact searches (OUT keeps them); ``exact_from``: take them from such a
    file (the exact scan at 1M takes seconds a query, and needs no graph: it can run while the graph is built)."""
    from memroute.retrieval.fusion import rrf
    from memroute.stores import pg_ops
    from memroute.text import query_terms
    from memroute.types import ScoredId

    def fused(bm25: list[Any], vector: list[Any]) -> list[str]:
        return [mid for mid, _ in sorted(rrf([bm25, vector]).items(), key=lambda kv: (-kv[1], kv[0]))[:10]]

    texts = bench_corpus(1, QUERIES).queries[:queries]
    embedder = get_embedder().inner
    qvecs = embedder.embed(texts, side="query")
    mem = Memory.open(url, owner="owner-0", embedder=embedder)
    store, flt, depth = mem.store, mem.filter(), 40  # what Memory.search(mode="hybrid", limit=10) asks for
    result: dict[str, Any] = {"memories": store.count(), "started": datetime.now(UTC).isoformat("T", "seconds"),
                              "load_average_start": os.getloadavg()}
    exact, ms, bm25, hybrid = [], [], [], []
    if exact_from is not None:
        earlier = json.loads(exact_from.read_text(encoding="utf-8"))["exact"]
        exact, hybrid = earlier["top"][:queries], earlier["hybrid_top10"][:queries]
        bm25 = [[ScoredId(mid, 0.0) for mid in ids] for ids in earlier["bm25"][:queries]]  # rrf reads the order
        result["exact"] = {**earlier, "from": str(exact_from)}
    for text, vec in zip(texts, qvecs, strict=True):
        if exact_from is not None:
            break
        bm25.append(store.search_bm25(query_terms(text), flt, depth))
        t = time.perf_counter()
        hits = store.search_vector(vec, flt, depth, exact=True)  # type: ignore[call-arg]
        ms.append((time.perf_counter() - t) * 1000)
        exact.append([h.id for h in hits])
        hybrid.append(fused(bm25[-1], hits))
    if exact_from is None:
        result["exact"] = {"wall_ms": _pct(ms), "top": exact, "hybrid_top10": hybrid,
                           "bm25": [[h.id for h in hits] for hits in bm25]}
    own = pg_ops.vector_settings
    for ef in () if exact_only else EF_SEARCH:
        if ef is not None:  # the store's statement, at this depth exactly
            pg_ops.vector_settings = (  # type: ignore[assignment]
                lambda exact, limit, ef=ef: "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                f"set_config('hnsw.ef_search', '{ef}', true)")
        found10 = found40 = same = 0
        ms, tops = [], []
        for vec, truth, lexical, best in zip(qvecs, exact, bm25, hybrid, strict=True):
            t = time.perf_counter()
            hits = store.search_vector(vec, flt, depth, exact=False)  # type: ignore[call-arg]
            ms.append((time.perf_counter() - t) * 1000)
            got = [h.id for h in hits]
            found10 += len(set(truth[:10]) & set(got[:10]))
            found40 += len(set(truth) & set(got))
            same += fused(lexical, hits) == best
            tops.append(got)
        pg_ops.vector_settings = own
        result[f"ef_{ef or 'store'}"] = {"recall@10": round(found10 / (10 * len(exact)), 4),
                                         "recall@40": round(found40 / (depth * len(exact)), 4),
                                         "hybrid_same_as_exact": f"{same} / {len(exact)}",
                                         "wall_ms": _pct(ms), "top": tops}
    result["load_average_end"] = os.getloadavg()
    result["finished"] = datetime.now(UTC).isoformat("T", "seconds")
    mem.close()
    out.write_text(json.dumps(result), encoding="utf-8")
    lists = ("top", "hybrid_top10", "bm25")
    print(json.dumps({k: (v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk not in lists})
                      for k, v in result.items()}))


def compare(a: Path, b: Path) -> None:
    ra, rb = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    for name in ("bm25", "bm25_ctx", "hybrid"):
        if name not in ra or name not in rb:
            continue
        same, overlap, scores = 0, 0.0, 0.0
        pairs = list(zip(ra[name]["top10"], rb[name]["top10"], strict=True))
        for x, y in pairs:
            ids_x = [h[0] if isinstance(h, list) else h for h in x]
            ids_y = [h[0] if isinstance(h, list) else h for h in y]
            same += ids_x == ids_y
            overlap += len(set(ids_x) & set(ids_y)) / max(len(ids_x), len(ids_y)) if ids_x or ids_y else 1.0
            if x and isinstance(x[0], list):
                scores = max([scores] + [abs(p[1] - q[1]) for p, q in zip(x, y, strict=False)])
        print(f"{name}: identical top-10 lists {same} / {len(pairs)}; mean overlap {overlap / len(pairs):.4f}"
              + (f"; largest score difference at the same rank {scores:.2e}" if name != "hybrid" else ""))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pg_bm25")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("load")
    p.add_argument("url")
    p.add_argument("n", type=int)
    p = sub.add_parser("measure")
    p.add_argument("url")
    p.add_argument("out", type=Path)
    p = sub.add_parser("reference")
    p.add_argument("url")
    p.add_argument("out", type=Path)
    p = sub.add_parser("rebuild")
    p.add_argument("url")
    p = sub.add_parser("vectors")
    p.add_argument("url")
    p.add_argument("out", type=Path)
    p.add_argument("--queries", type=int, default=HYBRID, help="the first N hybrid queries (exact search is slow)")
    p.add_argument("--exact-only", action="store_true", help="only the exact searches, kept in OUT")
    p.add_argument("--exact-from", type=Path, help="the exact searches from an earlier OUT")
    p = sub.add_parser("pending-delete")
    p.add_argument("url")
    p.add_argument("n", type=int)
    p = sub.add_parser("compare")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "load":
        load(args.url, args.n)
    elif args.command == "measure":
        measure(args.url, args.out)
    elif args.command == "rebuild":
        rebuild(args.url)
    elif args.command == "vectors":
        vectors(args.url, args.out, args.queries, args.exact_from, args.exact_only)
    elif args.command == "pending-delete":
        pending_delete(args.url, args.n)
    elif args.command == "reference":
        reference(args.url, args.out)
    else:
        compare(args.a, args.b)
