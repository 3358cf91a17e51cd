"""Build the hand-written Japanese and Korean routing sets from their compact sources.

Sources: ``benchmarks/routing_sets/<lang>/*.txt`` (read in name order). A line ``== <dialogue id>`` starts a
dialogue; every following line is one user turn ``<agent> | <user text> | <system reply>``: the reply (it may
contain ``|``) is the assistant's answer that the next user turn sees; the last turn's reply stays in the source
only. A user text writes `` | `` as `` \\| ``. ``#`` starts a comment line. Agent codes are the short names in
``AGENTS``.

Output: ``src/memroute/eval/data/routing/<lang>/{dev,test}.jsonl`` in the routing-set format (one record per
user turn, ``history`` = every earlier USER and SYSTEM turn). A dialogue goes to dev when the first 8 hex
digits of the md5 of ``ko-<its number>`` fall in the lower half (``is_dev``): deterministic, the same for the
Japanese and Korean dialogue of one number, and adding a dialogue never moves another.

The train sets are a separate collection on a catalogue of their own (``<lang>/train_services.jsonl``, agent
codes ``TRAIN_AGENTS``): sources ``benchmarks/routing_sets/<lang>/train/*.txt``, dialogue ids
``<lang>-train-NNN``, 4-9 user turns each, all written to ``<lang>/train.jsonl``.

    python -m benchmarks.build_routing_sets          # writes both languages, prints the counts
    python -m benchmarks.build_routing_sets --check  # fails if the shipped files differ from the sources
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "benchmarks" / "routing_sets"
OUT = ROOT / "src" / "memroute" / "eval" / "data" / "routing"
LANGUAGES = ("ko", "ja")

AGENTS = {
    "cal": "calendar", "tr": "translate", "wx": "weather", "trv": "travel", "rest": "restaurant",
    "shop": "shopping", "code": "code_review", "sum": "summarize", "rem": "reminder", "mus": "music",
}
TRAIN_AGENTS = {
    "cal": "calendar", "wx": "weather", "mus": "music", "mail": "email", "msg": "messenger",
    "home": "smart_home", "taxi": "taxi", "news": "news", "cook": "recipe", "pkg": "parcel",
}


class SourceError(ValueError):
    pass


def parse(path: Path, agents: dict[str, str] = AGENTS) -> list[tuple[str, list[tuple[str, str, str]]]]:
    dialogues: list[tuple[str, list[tuple[str, str, str]]]] = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("=="):
            dialogues.append((line[2:].strip(), []))
            continue
        parts = [p.strip().replace("\\|", "|") for p in line.split(" | ", 2)]
        if not dialogues or len(parts) not in (2, 3) or parts[0] not in agents or not parts[1]:
            raise SourceError(f"{path}:{lineno}: expected '<agent> | <user> | <system>', got {line!r}")
        dialogues[-1][1].append((agents[parts[0]], parts[1], parts[2] if len(parts) == 3 else ""))
    return dialogues


def is_dev(dialogue_id: str) -> bool:
    """Dev when the md5 of the Korean id of the dialogue's number (``ko-NNN``) falls in the lower half.

    Keyed on the number, not the language, so that ``ja-NNN`` and ``ko-NNN`` share a split: the first Japanese
    dialogues adapt the Korean ones with the same number, and a scenario tuned on in one language's dev must
    not be reported in the other's test. (The Korean id, because the Korean split was published first.)
    """
    number = dialogue_id.partition("-")[2]
    return int(hashlib.md5(f"ko-{number}".encode()).hexdigest()[:8], 16) < 0x80000000


def records(dialogue_id: str, turns: list[tuple[str, str, str]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    history: list[dict[str, str]] = []
    for i, (agent, user, system) in enumerate(turns):
        out.append({"dialogue_id": dialogue_id, "turn_idx": 2 * i, "user_turn_idx": i,
                    "history": list(history), "utterance": user, "gold_services": [agent]})
        if i < len(turns) - 1:
            if not system:
                raise SourceError(f"{dialogue_id}: turn {i} needs a system reply (a user turn follows it)")
            history += [{"speaker": "USER", "utterance": user}, {"speaker": "SYSTEM", "utterance": system}]
    return out


def _dialogues(paths: list[Path], prefix: str, agents: dict[str, str],
               turns: range) -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    """Every dialogue of ``paths``: ids unique and prefixed ``prefix``, user turns counted in ``turns``."""
    seen: set[str] = set()
    for path in paths:
        for did, dialogue in parse(path, agents):
            if did in seen or not did.startswith(prefix):
                raise SourceError(f"{path}: dialogue id {did!r} repeated or not prefixed {prefix}")
            seen.add(did)
            if len(dialogue) not in turns:
                wanted = f"{turns.start}-{turns.stop - 1}"
                raise SourceError(f"{path}: {did} has {len(dialogue)} user turns ({wanted} wanted)")
            yield did, dialogue


def build(lang: str) -> dict[str, str]:
    """The text of ``dev.jsonl``, ``test.jsonl`` and ``train.jsonl`` for one language."""
    lines: dict[str, list[str]] = {"dev": [], "test": [], "train": []}
    for did, turns in _dialogues(sorted((SOURCES / lang).glob("*.txt")), f"{lang}-", AGENTS, range(3, 9)):
        split = "dev" if is_dev(did) else "test"
        lines[split] += [json.dumps(r, ensure_ascii=False) for r in records(did, turns)]
    train = sorted((SOURCES / lang / "train").glob("*.txt"))
    for did, turns in _dialogues(train, f"{lang}-train-", TRAIN_AGENTS, range(4, 10)):
        lines["train"] += [json.dumps(r, ensure_ascii=False) for r in records(did, turns)]
    return {split: "".join(line + "\n" for line in rows) for split, rows in lines.items()}


def counts(text: str) -> tuple[int, int, int]:
    """(dialogues, user turns, switch turns: a gold agent other than the previous turn's)."""
    dialogues: set[str] = set()
    turns = switches = 0
    prev: dict[str, list[str]] = {}
    for line in text.splitlines():
        rec = json.loads(line)
        did = rec["dialogue_id"]
        dialogues.add(did)
        turns += 1
        if did in prev and rec["gold_services"] != prev[did]:
            switches += 1
        prev[did] = rec["gold_services"]
    return len(dialogues), turns, switches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare the shipped files with the sources")
    args = parser.parse_args(argv)
    stale = []
    for lang in LANGUAGES:
        for split, text in build(lang).items():
            target = OUT / lang / f"{split}.jsonl"
            if args.check:
                if not target.exists() or target.read_text(encoding="utf-8") != text:
                    stale.append(str(target))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            d, t, s = counts(text)
            print(f"{lang} {split}: {d} dialogues, {t} user turns, {s} switch turns ({s / max(t, 1):.0%})")
    if stale:
        print("stale (run python -m benchmarks.build_routing_sets):", *stale, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
