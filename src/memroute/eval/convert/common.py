"""What every converter shares: finding an upstream file in a folder or a zip, reading JSON / JSON Lines / CSV
with errors that name the file and what is missing, deterministic orders and samples, and writing the output."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.datasets import jsonl_records


def find(src: Path, *names: str) -> Path:
    """``src`` itself when it is a file, else the first of ``names`` (relative paths) that exists under it."""
    if src.is_file():
        return src
    if not src.exists():
        raise InputError(f"{src} does not exist (give the upstream repository folder or the file itself)")
    for name in names:
        if (src / name).is_file():
            return src / name
    raise InputError(f"{src} has none of {', '.join(names)}; give the folder of the upstream repository "
                     "(unzipped) or the file itself")


def read_text(path: Path) -> str:
    """A text file, or the one file inside a ``.zip`` with the same name (``val.json.zip`` -> ``val.json``)."""
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                members = [m for m in zf.namelist() if not m.endswith("/") and "__MACOSX" not in m]
                wanted = [m for m in members if Path(m).name == path.stem] or members
                if len(wanted) != 1:
                    raise InputError(f"{path}: expected one file inside the zip, found {len(wanted)}")
                return zf.read(wanted[0]).decode("utf-8")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except (UnicodeDecodeError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: cannot read it as UTF-8 text ({exc})") from None


def load_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def load_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    return jsonl_records(read_text(path).splitlines(), path)


def load_csv(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    """The rows of a CSV file with a header that has at least ``columns``."""
    reader = csv.DictReader(io.StringIO(read_text(path)))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{path}: the header has no column {', '.join(missing)} (found "
                         f"{', '.join(reader.fieldnames or []) or 'no header'})")
    return [{k: (v or "") for k, v in row.items() if k} for row in reader]


def need(value: Any, key: str, where: str, kind: type | tuple[type, ...] = object) -> Any:
    """``value[key]``, which must exist and be a ``kind``; else an error naming ``where`` (file and record)."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a JSON object, found {type(value).__name__}")
    if key not in value:
        raise InputError(f"{where}: no {key!r} (has {', '.join(map(repr, list(value)[:8])) or 'nothing'})")
    found = value[key]
    if not isinstance(found, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"{where}: {key!r} should be {names}, found {type(found).__name__}")
    return found


def md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def sample_ids(ids: Iterable[str], n: int | None, seed: int) -> list[str]:
    """``n`` ids drawn with ``random.Random(seed).sample`` from the sorted ids, returned sorted (all when n is
    None or not smaller than the count)."""
    ordered = sorted(ids)
    if n is None or n >= len(ordered):
        return ordered
    return sorted(random.Random(seed).sample(ordered, n))


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """Write (atomically: a partial file never replaces a good one) and return the number of records."""
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count


def write_stats(out: Path, stats: dict[str, Any]) -> None:
    (out / "stats.json").write_text(json.dumps(stats, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def out_dir(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file; give a folder to write the converted set into")
    out.mkdir(parents=True, exist_ok=True)
    return out
