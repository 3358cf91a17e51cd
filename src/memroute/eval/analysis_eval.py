"""Evaluation and benchmark of ``memroute.analysis``.

The evaluation set (``eval/data/analysis/{en,ja,ko}.jsonl``) is hand-written by the project: one chat
message per line with its short history, a fixed ``now`` and labels for every field::

    {"id": "en-001", "text": "Now to French", "now": "2025-03-12T15:00:00+00:00",
     "history": [{"role": "user", "text": "Translate 'Hello' to Japanese"}, ...],
     "labels": {"language": "en", "continuation": "follow_up", "needs_context": true,
                "query_type": "factual", "time_range": null, "keywords": ["French"],
                "references": [{"type": "ellipsis", "surface": "Now to French"}], "parts": 1}}

Scoring per field: exact for ``language``, ``continuation``, ``needs_context``, ``query_type`` and the
number of ``parts``; ``time_range`` must have the same start and end (or both be null); ``keywords``
(scored on items that list some) must all be among the predicted keywords (case-insensitive; a label
may sit inside a longer keyword); ``references`` must have the same set of types, and every labelled
surface must match a predicted surface of its type (one inside the other, case-insensitive).

The benchmark times :func:`~memroute.analysis.analyze` on real messages from ``../shared/data`` (with
their dialogue history where the data has one).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from memroute.analysis import QueryAnalysis, analyze
from memroute.errors import InputError

FIELDS = ("language", "continuation", "needs_context", "query_type", "time_range", "keywords", "references", "parts")
LANGUAGES = ("en", "ja", "ko")
TARGET = 0.90


def default_data_dir() -> Path:
    return Path(str(resources.files("memroute.eval") / "data" / "analysis"))


def load_items(data_dir: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """The labelled items of each language file; a bad line is an InputError naming file and line."""
    base = data_dir or default_data_dir()
    out: dict[str, list[dict[str, Any]]] = {}
    for lang in LANGUAGES:
        path = base / f"{lang}.jsonl"
        if not path.exists():
            raise InputError(f"no evaluation file {path}: expected en.jsonl, ja.jsonl and ko.jsonl in {base}")
        items = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                _ = item["text"], item["labels"], item["now"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise InputError(f"{path}:{lineno}: not an evaluation item ({exc})") from None
            items.append(item)
        out[lang] = items
    return out


@dataclass
class FieldScore:
    correct: int = 0
    total: int = 0

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 1.0


@dataclass
class Report:
    scores: dict[str, dict[str, FieldScore]]
    errors: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": TARGET,
            "languages": {lang: {f: {"accuracy": round(s.accuracy, 4), "n": s.total} for f, s in fields.items()}
                          for lang, fields in self.scores.items()},
            "all_at_target": self.all_at_target,
            "errors": self.errors,
        }

    @property
    def all_at_target(self) -> bool:
        return all(s.accuracy >= TARGET for fields in self.scores.values() for s in fields.values())


def evaluate(data_dir: Path | None = None) -> Report:
    items = load_items(data_dir)
    scores: dict[str, dict[str, FieldScore]] = {}
    errors: list[dict[str, Any]] = []
    for lang, lang_items in items.items():
        fields = {f: FieldScore() for f in FIELDS}
        for item in lang_items:
            result = analyze(item["text"], item.get("history", []), datetime.fromisoformat(item["now"]))
            for name, ok in score_item(result, item["labels"]).items():
                fields[name].total += 1
                fields[name].correct += ok
                if not ok:
                    errors.append({"id": item.get("id"), "field": name, "text": item["text"],
                                   "expected": item["labels"].get(name), "got": result.to_dict().get(name)})
        scores[lang] = fields
    return Report(scores, errors)


def score_item(result: QueryAnalysis, labels: dict[str, Any]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    out["language"] = result.language == labels["language"]
    out["continuation"] = result.continuation.kind.value == labels["continuation"]
    out["needs_context"] = result.needs_context == labels["needs_context"]
    out["query_type"] = result.query_type.value == labels["query_type"]
    gold_time = labels.get("time_range")
    if gold_time is None:
        out["time_range"] = result.time_range is None
    else:
        out["time_range"] = (result.time_range is not None
                             and result.time_range.start == datetime.fromisoformat(gold_time["start"])
                             and result.time_range.end == datetime.fromisoformat(gold_time["end"]))
    gold_keywords = labels.get("keywords") or []
    if gold_keywords:
        predicted = [k.casefold() for k in result.keywords]
        out["keywords"] = all(any(g.casefold() == p or g.casefold() in p for p in predicted) for g in gold_keywords)
    gold_refs = labels.get("references") or []
    types = {r.type.value for r in result.references}
    ok = types == {g["type"] for g in gold_refs}
    for g in gold_refs:
        surface = g.get("surface", "").casefold()
        if surface and not any(r.type.value == g["type"] and (surface in r.surface.casefold()
                                                              or r.surface.casefold() in surface)
                               for r in result.references):
            ok = False
    out["references"] = ok
    out["parts"] = len(result.parts) == labels["parts"]
    return out


# -------------------------------------------------------------------------------------------- benchmark

SHARED_DATA = Path("/work/shared/data")


def bench_texts(data_dir: Path = SHARED_DATA, n: int = 10_000) -> list[tuple[str, list[dict[str, str]]]]:
    """``n`` real messages with their history: 40% English (SGD), 35% Japanese (JMultiWOZ-TC and
    RealPersonaChat), 25% Korean (KoChat), taken in file order (deterministic)."""
    sources = [
        (data_dir / "sgd_routing" / "dev.jsonl", _routing, int(n * 0.40)),
        (data_dir / "jmultiwoz_tc_routing" / "dev.jsonl", _routing, int(n * 0.20)),
        (data_dir / "realpersonachat_ja" / "sessions.jsonl", _persona, int(n * 0.15)),
        (data_dir / "kochat_ko_intent" / "dev.jsonl", _intent, 0),
    ]
    out: list[tuple[str, list[dict[str, str]]]] = []
    for path, reader, count in sources:
        if not path.exists():
            raise InputError(f"benchmark data not found: {path} (the shared data folder is {data_dir})")
        want = count or n - len(out)
        for pair in reader(path):
            if len(out) >= n or want <= 0:
                break
            out.append(pair)
            want -= 1
    return out


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _routing(path: Path) -> Iterator[tuple[str, list[dict[str, str]]]]:
    for rec in _lines(path):
        history = [{"role": "user" if h["speaker"] == "USER" else "assistant", "text": h["utterance"]}
                   for h in rec.get("history", [])[-4:]]
        yield rec["utterance"], history


def _persona(path: Path) -> Iterator[tuple[str, list[dict[str, str]]]]:
    for rec in _lines(path):
        turns = rec.get("turns", [])
        for i, turn in enumerate(turns):
            history = [{"role": "user" if t["speaker"] == turn["speaker"] else "assistant", "text": t["text"]}
                       for t in turns[max(0, i - 4):i]]
            yield turn["text"], history


def _intent(path: Path) -> Iterator[tuple[str, list[dict[str, str]]]]:
    for rec in _lines(path):
        yield rec["text"], []


@dataclass
class BenchResult:
    """Wall-clock and CPU time per message, in milliseconds.

    Both are reported because on a shared machine a call that spans a scheduler preemption pays a whole
    time slice (a few ms) of wall time; the CPU time (``time.thread_time``) is what analysis costs.
    """

    n: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    cpu_p50_ms: float
    cpu_p95_ms: float
    cpu_p99_ms: float
    by_language: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "p50_ms": self.p50_ms, "p95_ms": self.p95_ms, "p99_ms": self.p99_ms,
                "mean_ms": self.mean_ms, "cpu_p50_ms": self.cpu_p50_ms, "cpu_p95_ms": self.cpu_p95_ms,
                "cpu_p99_ms": self.cpu_p99_ms, "by_language": self.by_language}


def run_bench(texts: list[tuple[str, list[dict[str, str]]]], now: datetime) -> BenchResult:
    for text, history in texts[:200]:  # warm up: tokenizers load, regexes compile
        analyze(text, history, now)
    times: list[float] = []
    cpu: list[float] = []
    by_lang: dict[str, list[tuple[float, float]]] = {}
    for text, history in texts:
        c0 = time.thread_time()
        t0 = time.perf_counter()
        result = analyze(text, history, now)
        elapsed = (time.perf_counter() - t0) * 1000
        cpu_ms = (time.thread_time() - c0) * 1000
        times.append(elapsed)
        cpu.append(cpu_ms)
        by_lang.setdefault(result.language, []).append((elapsed, cpu_ms))
    return BenchResult(len(times), _pct(times, 50), _pct(times, 95), _pct(times, 99),
                       round(statistics.fmean(times), 4) if times else 0.0,
                       _pct(cpu, 50), _pct(cpu, 95), _pct(cpu, 99),
                       {lang: {"n": len(v), "p50_ms": _pct([w for w, _ in v], 50),
                               "p95_ms": _pct([w for w, _ in v], 95), "cpu_p95_ms": _pct([c for _, c in v], 95)}
                        for lang, v in sorted(by_lang.items())})


def _pct(values: list[float], q: int) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))], 4)
