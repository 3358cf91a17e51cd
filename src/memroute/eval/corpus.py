"""Real multilingual texts for benchmarks, read from the shared evaluation data when it is there.

Benchmarks of speed should search text that looks like what users store: a template generator has too
small a vocabulary (every query then matches 5-10 % of the corpus, which no real store does). When the
data folder (``$MEMROUTE_DATA_DIR``, else ``../shared/data`` from the working directory) is present, the
texts are unique utterances from SGD (English), RealPersonaChat (Japanese) and the kochat set (Korean),
mixed 50 / 25 / 25; otherwise :mod:`memroute.eval.synthetic` is used and the report says so. These texts
are only read to measure; they are never part of memroute.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def data_dir() -> Path | None:
    env = os.environ.get("MEMROUTE_DATA_DIR")
    for candidate in ([Path(env)] if env else []) + [Path.cwd().parent / "shared" / "data", Path("shared/data")]:
        if candidate.is_dir():
            return candidate
    return None


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _english(root: Path, limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for name in ("sgd_routing/dev.jsonl", "sgd_routing/train.jsonl"):
        path = root / name
        if not path.is_file():
            continue
        for rec in _jsonl(path):
            for turn in [*rec.get("history", []), {"utterance": rec.get("utterance")}]:
                text = turn.get("utterance") if isinstance(turn, dict) else None
                if isinstance(text, str) and len(text) > 15:
                    seen.setdefault(text, None)
            if len(seen) >= limit:
                return list(seen)
    return list(seen)


def _japanese(root: Path, limit: int) -> list[str]:
    seen: dict[str, None] = {}
    path = root / "realpersonachat_ja/sessions.jsonl"
    if path.is_file():
        for rec in _jsonl(path):
            for turn in rec.get("turns", []):
                text = turn.get("text")
                if isinstance(text, str) and len(text) > 8:
                    seen.setdefault(text, None)
            if len(seen) >= limit:
                break
    return list(seen)


def _korean(root: Path, limit: int) -> list[str]:
    seen: dict[str, None] = {}
    path = root / "kochat_ko_intent/dev.jsonl"
    if path.is_file():
        for rec in _jsonl(path):
            text = rec.get("text")
            if isinstance(text, str) and len(text) > 5:
                seen.setdefault(text, None)
            if len(seen) >= limit:
                break
    return list(seen)


def real_texts(n: int, seed: int = 13) -> tuple[list[str], str]:
    """``n`` texts (en 50 %, ja 25 %, ko 25 %) and a description of where they came from.

    Where a language has fewer unique texts than its share, its texts are reused; the description says
    how many were unique.
    """
    root = data_dir()
    if root is None:
        return [], "no data folder"
    pools = {"en": _english(root, n // 2 + 1000), "ja": _japanese(root, n // 4 + 1000),
             "ko": _korean(root, n // 4 + 1000)}
    if not all(pools.values()):
        return [], f"data folder {root} lacks one of sgd_routing, realpersonachat_ja, kochat_ko_intent"
    rng = random.Random(seed)
    for pool in pools.values():
        rng.shuffle(pool)
    texts = []
    used = dict.fromkeys(pools, 0)
    for i in range(n):
        lang = ("en", "en", "ja", "ko")[i % 4]
        texts.append(pools[lang][used[lang] % len(pools[lang])])
        used[lang] += 1
    unique = len(set(texts))
    return texts, f"real utterances from {root} (SGD en, RealPersonaChat ja, kochat ko): {unique} unique of {n}"
