"""Intent sets -> ``{id, text, label[, domain]}`` JSON Lines and ``labels.jsonl``.

- CLINC150 (clinc/oos-eval ``data/data_full.json``: ``train``/``val``/``test`` and ``oos_*`` lists of
  ``[text, intent]``; domains from ``data/domains.json`` when present): train = train + oos_train,
  dev = val + oos_val, out-of-scope labelled ``oos``.
- BANKING77 (PolyAI-LDN/task-specific-datasets ``banking_data/train.csv``, ``test.csv``; columns ``text``,
  ``category``): train.
- kochat (hyunwoongko/kochat ``demo/data/raw/<intent>.csv`` and ``demo/data/ood/*.csv``, column ``question``):
  the intent is the file name (``OOD`` for the ood folder); duplicates (same text and label) are dropped, the
  rest ordered by the md5 of ``text<TAB>label``; the first ``holdout`` share is the test split (kept aside
  unless ``with_test``), the rest dev.

Test splits are written only with ``with_test``: tune on train / dev.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.eval.convert.common import find, load_csv, load_json, md5, out_dir, write_jsonl, write_stats


def clinc150(src: Path, out: Path, with_test: bool = False) -> dict[str, Any]:
    path = find(src, "data/data_full.json", "data_full.json")
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object with train, val, test, oos_train, ...")
    domains_path = path.with_name("domains.json")
    domain_of: dict[str, str] = {}
    if domains_path.is_file():
        domains = load_json(domains_path)
        if not isinstance(domains, dict):
            raise InputError(f"{domains_path}: expected a JSON object domain -> [intent, ...]")
        domain_of = {str(i): str(d) for d, intents in domains.items() for i in intents}
    out = out_dir(out)
    stats: dict[str, Any] = {"source": str(path)}
    splits = [("train", "train"), ("val", "dev")] + ([("test", "test")] if with_test else [])
    for name, target in splits:
        records = []
        for part in (name, f"oos_{name}"):
            rows = data.get(part)
            if not isinstance(rows, list):
                raise InputError(f"{path}: no {part!r} list (CLINC150's data_full.json has train, val, test and "
                                 "oos_train, oos_val, oos_test)")
            for i, row in enumerate(rows):
                if not (isinstance(row, list) and len(row) == 2):
                    raise InputError(f"{path}: {part}[{i}] should be [text, intent]")
                text, label = str(row[0]), str(row[1])
                rec = {"id": f"{part}-{i}", "text": text, "label": label}
                if domain_of:
                    rec["domain"] = "oos" if label == "oos" else domain_of.get(label, "")
                records.append(rec)
        stats[target] = write_jsonl(out / f"{target}.jsonl", records)
    labels = list(domain_of) or sorted({str(r[1]) for r in data["train"]} - {"oos"})
    stats["labels"] = write_jsonl(out / "labels.jsonl", ({"label": lb, "domain": domain_of[lb]} if domain_of
                                                          else {"label": lb} for lb in labels))
    write_stats(out, stats)
    return stats


def banking77(src: Path, out: Path, with_test: bool = False) -> dict[str, Any]:
    train_path = find(src, "banking_data/train.csv", "train.csv")
    out = out_dir(out)
    stats: dict[str, Any] = {"source": str(train_path)}
    labels: list[str] = []
    categories = train_path.with_name("categories.json")
    if categories.is_file():
        found = load_json(categories)
        if not isinstance(found, list):
            raise InputError(f"{categories}: expected a JSON list of category names")
        labels = [str(c) for c in found]
    for split in ("train", "test") if with_test else ("train",):
        path = train_path.with_name(f"{split}.csv")
        rows = load_csv(path, ("text", "category"))
        stats[split] = write_jsonl(out / f"{split}.jsonl", ({"id": f"{split}-{i}", "text": r["text"],
                                                             "label": r["category"]} for i, r in enumerate(rows)))
        labels = list(dict.fromkeys([*labels, *(r["category"] for r in rows)]))
    stats["labels"] = write_jsonl(out / "labels.jsonl", ({"label": lb} for lb in labels))
    write_stats(out, stats)
    return stats


def kochat(src: Path, out: Path, holdout: float = 0.2, with_test: bool = False) -> dict[str, Any]:
    root = src / "demo" / "data" if (src / "demo" / "data").is_dir() else src
    files = sorted((root / "raw").glob("*.csv")) + sorted((root / "ood").glob("*.csv"))
    if not files:
        raise InputError(f"{root} has no raw/*.csv or ood/*.csv (kochat's demo/data folder)")
    seen: set[tuple[str, str]] = set()
    examples: list[tuple[str, str]] = []
    for path in files:
        label = "OOD" if path.parent.name == "ood" else path.stem
        for row in load_csv(path, ("question",)):
            key = (row["question"], label)  # as published: a leading space stays (it changes the md5 order)
            if key[0].strip() and key not in seen:
                seen.add(key)
                examples.append(key)
    examples.sort(key=lambda e: md5(f"{e[0]}\t{e[1]}"))
    cut = int(len(examples) * holdout)
    records = [{"text": t, "label": lb, "id": f"kochat-{i}"} for i, (t, lb) in enumerate(examples)]
    out = out_dir(out)
    stats: dict[str, Any] = {"source": str(root), "files": len(files), "examples_dedup_text_label": len(examples),
                             "dev": write_jsonl(out / "dev.jsonl", records[cut:])}
    if with_test:
        stats["test_holdout"] = write_jsonl(out / "test.jsonl", records[:cut])
    labels = sorted({lb for _, lb in examples})
    stats["labels"] = write_jsonl(out / "labels.jsonl", ({"label": lb} for lb in labels))
    write_stats(out, stats)
    return stats
