"""The SQLite store's files are owner-only and a forgotten memory leaves no readable copy in them (issue 19,
defect 6): the database, ``-wal`` and ``-shm`` files are created ``0600`` whatever the umask and set back to it on
open, memroute turns ``secure_delete`` on itself, ``forget`` leaves the forgotten text in neither the database nor
the WAL file, and ``memroute doctor`` warns about a store other users can read.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memroute import Memory
from memroute.cli import main
from memroute.embed import CachedEmbedder
from memroute.stores.sqlite import SQLiteStore

SECRET = "Bob's locker code is 4417 and his zebra nickname is Quokkaroo"
MARKS = (b"Quokkaroo", b"quokkaroo", b"locker code is 4417")


@pytest.fixture
def wide_umask() -> Iterator[None]:
    """The usual 022 umask, under which SQLite on its own makes world-readable files."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def modes(db: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in db.parent.iterdir() if p.name.startswith(db.name)}


@pytest.mark.usefixtures("wide_umask")
def test_the_store_and_its_side_files_are_owner_only_and_stay_so(tmp_path: Path, embedder: CachedEmbedder,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "private.db"
    with Memory.open(f"sqlite:///{db}", owner="bob", embedder=embedder) as mem:
        mem.remember(SECRET, sensitivity="secret")
        mem.add_message("s", "user", "hello")
        found = modes(db)
        assert set(found) >= {"private.db", "private.db-wal", "private.db-shm"}
        assert set(found.values()) == {0o600}, found
    for name in found:  # e.g. copied by hand, or made by an older memroute
        if (tmp_path / name).exists():
            os.chmod(tmp_path / name, 0o644)
    with caplog.at_level(logging.WARNING, logger="memroute.store"), \
            Memory.open(f"sqlite:///{db}", owner="bob", embedder=embedder) as mem:
        assert mem.search("locker code", max_sensitivity="secret")  # still works
        assert set(modes(db).values()) == {0o600}, modes(db)
    assert "readable by other users" in caplog.text


@pytest.fixture
def upstream_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections start with secure_delete off, as in upstream SQLite (this machine's build turns it on)."""
    connect = sqlite3.connect

    def connect_upstream(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_upstream)


@pytest.mark.usefixtures("upstream_default")
def test_secure_delete_is_on_for_every_connection(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    try:
        assert store._conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    finally:
        store.close()


def file_has_secret(path: Path) -> bool:
    data = path.read_bytes() if path.exists() else b""
    return any(mark in data for mark in MARKS)


@pytest.mark.usefixtures("upstream_default")
def test_a_forgotten_secret_leaves_no_copy_in_the_database_or_its_wal(tmp_path: Path,
                                                                      embedder: CachedEmbedder) -> None:
    db = tmp_path / "forget.db"
    wal = Path(f"{db}-wal")
    with Memory.open(f"sqlite:///{db}", owner="bob", embedder=embedder) as mem:
        for i in range(20):
            mem.remember(f"an ordinary note number {i} about the weekly plan", session="plans")
        item = mem.remember(SECRET, sensitivity="secret", session="lockers")
        mem.add_message("lockers", "user", SECRET)
        assert file_has_secret(db) or file_has_secret(wal)  # the check can see it while it is stored
        mem.forget(item.id)
        mem.forget(session="lockers")  # the message too
        # while the store is still open, as another user reading the files would see them
        assert not file_has_secret(db) and not file_has_secret(wal)
        assert len(mem.list(limit=100)) == 20
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not file_has_secret(db) and not file_has_secret(wal)


def test_doctor_warns_about_a_store_other_users_can_read(tmp_path: Path, embedder: CachedEmbedder,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "doctor.db"
    url = f"sqlite:///{db}"
    Memory.open(url, embedder=embedder).close()
    assert main(["doctor", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "WARNING" not in out and "all good" in out
    os.chmod(db, 0o644)
    assert main(["doctor", "--store", url]) == 0
    out = capsys.readouterr().out
    assert f"WARNING: {db} is 0644" in out and "other users" in out and "with warnings" in out
