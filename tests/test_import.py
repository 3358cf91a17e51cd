"""``memroute import``: a batch and its resume point are written together; a finished file is imported once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memroute import Memory
from memroute.cli import main
from memroute.embed import CachedEmbedder
from memroute.importing import NAMESPACE, file_sha256, import_jsonl

ROOT = Path(__file__).parents[1]


def _lines(n: int, conversation_at: int) -> list[str]:
    """n memory lines without ids (a line stored twice would be two rows) and a conversation line."""
    out = [json.dumps({"text": f"imported note {i} about topic {i % 7}"}) for i in range(n)]
    out.insert(conversation_at, json.dumps({"session": "chat", "messages": [
        {"role": "user", "text": "where is the report"}, {"role": "assistant", "text": "in the drive"},
        {"role": "user", "text": "thanks, found it"}]}))
    return out


def _texts(mem: Memory) -> list[str]:
    return sorted(m.text for m in mem.list(limit=10_000))


def test_exit_right_after_a_batch_commit_resumes_without_duplicates(tmp_path: Path,
                                                                    embedder: CachedEmbedder) -> None:
    """The process dies at the first statement after a batch's commit, where the resume point used to be saved
    by a transaction of its own; the next run must start exactly after that batch."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join(_lines(60, conversation_at=25)) + "\n")
    Memory.open(url, owner="u", embedder=embedder).close()  # created and bound to the model before the kill
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "tests.fault_procs", "import-exit-after-commit", url, str(f), "10",
                           "3"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 137, proc.stderr
    with Memory.open(url, owner="u", embedder=embedder) as mem:
        saved = mem.store.get_state(NAMESPACE, f"sha256:{file_sha256(f)}", "u")
        assert saved is not None and not saved["done"]
        assert mem.stats().memories == saved["stored"] == 30  # three batches of 10, each with its resume point
        result = import_jsonl(mem, f, batch_size=10)
        assert result.resumed_at_line == saved["next_line"] > 1
        texts = _texts(mem)
        assert len(texts) == len(set(texts)) == 62  # 60 notes and the conversation's 2 user turns, each once
        assert [m.text for m in mem.recent_messages("chat")] == ["where is the report", "in the drive",
                                                                  "thanks, found it"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_finished_import_is_not_imported_again(backend: str, request: pytest.FixtureRequest, tmp_path: Path,
                                                 embedder: CachedEmbedder) -> None:
    url = (request.getfixturevalue("pg_server").new_database() if backend == "postgres"
           else f"sqlite:///{tmp_path / 'm.db'}")
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join(_lines(12, conversation_at=5)) + "\n")
    with Memory.open(url, owner="u", embedder=embedder) as mem:
        first = import_jsonl(mem, f, batch_size=5)
        assert (first.stored, first.messages, first.already_imported) == (14, 3, None)
        # the same content under another name is the same file
        copy = tmp_path / "renamed.jsonl"
        shutil.copy(f, copy)
        for path in (f, copy):
            rerun = import_jsonl(mem, path, batch_size=5)
            assert rerun.stored == rerun.messages == 0
            assert rerun.already_imported is not None and rerun.already_imported["stored"] == 14
            assert rerun.already_imported["messages"] == 3 and rerun.already_imported["finished_at"]
        assert mem.stats().memories == 14 and len(mem.recent_messages("chat")) == 3
        # again=True imports it again: lines without an id are new memories, the conversation's turns keep theirs
        again = import_jsonl(mem, f, batch_size=5, again=True)
        assert (again.stored, again.resumed_at_line) == (14, 1)
        assert mem.stats().memories == 26 and len(mem.recent_messages("chat")) == 6
        # other content at the same path is another file, and the result says the path was imported before
        f.write_text("\n".join(_lines(12, conversation_at=5)[:3]) + "\n")
        changed = import_jsonl(mem, f)
        assert changed.stored == 3 and changed.changed_since is not None


def test_cli_says_when_a_file_was_already_imported(capsys: pytest.CaptureFixture[str], db_url: str,
                                                   tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join(_lines(4, conversation_at=0)) + "\n")
    assert main(["import", str(f), "--store", db_url, "--owner", "u"]) == 0
    assert "stored 6 memories and 3 messages" in capsys.readouterr().out
    assert main(["import", str(f), "--store", db_url, "--owner", "u"]) == 0
    out = capsys.readouterr().out
    assert "already imported" in out and "6 memories, 3 messages" in out and "--again" in out
    assert main(["import", str(f), "--store", db_url, "--owner", "u", "--again"]) == 0
    assert "stored 6 memories and 3 messages" in capsys.readouterr().out
    assert main(["stats", "--store", db_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == 10  # 4 notes twice, 2 user turns once


def test_copy_resumes_its_messages_without_duplicates(tmp_path: Path, embedder: CachedEmbedder) -> None:
    """``memroute copy`` writes each chunk of the conversation log with its count: stopped right after a chunk's
    commit, the next run copies the rest only."""
    from memroute.stores import open_store
    from memroute.stores.copy import copy_store

    with Memory.open(f"sqlite:///{tmp_path / 'src.db'}", owner="u", embedder=embedder) as mem:
        mem.remember("one memory")
        for i in range(25):
            mem.add_message("s", "user", f"turn {i}")
    src, dst = open_store(f"sqlite:///{tmp_path / 'src.db'}"), open_store(f"sqlite:///{tmp_path / 'dst.db'}")
    write_batch, calls = dst.write_batch, []

    def stop_after_second_chunk(*args: object, **kwargs: object) -> None:
        write_batch(*args, **kwargs)  # type: ignore[arg-type]
        calls.append(1)
        if len(calls) == 3:  # the memories' batch, then two chunks of messages
            raise KeyboardInterrupt

    dst.write_batch = stop_after_second_chunk  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        copy_store(src, dst, batch_size=10)
    dst.write_batch = write_batch  # type: ignore[method-assign]
    assert len(dst.recent_messages("s", "u", limit=100)) == 20
    copy_store(src, dst, batch_size=10)
    assert [m.text for m in dst.recent_messages("s", "u", limit=100)] == [f"turn {i}" for i in range(25)]
    src.close()
    dst.close()
