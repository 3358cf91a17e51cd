"""The SQLite store's files are its owner's only: they hold ``secret`` memories.

The database file is created ``0600`` before SQLite opens it, and SQLite gives the ``-wal`` and ``-shm`` files it
creates later the database file's permissions, so they are ``0600`` too, whatever the process's umask. A store
whose files another user can read (made by an older memroute, copied, restored) is set back to owner-only when
memroute opens it for writing, with a warning; ``memroute doctor`` reports it before opening.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from memroute.errors import StoreError

SIDE_FILES = ("-wal", "-shm", "-journal")
log = logging.getLogger("memroute.store")


def store_files(path: str | Path) -> list[Path]:
    """The database file and those of its side files that exist."""
    base = Path(path)
    return [base] + [p for p in (Path(f"{base}{suffix}") for suffix in SIDE_FILES) if p.exists()]


def open_to_others(path: str | Path) -> list[str]:
    """``"<file> is 0644"`` for each of the store's files that its group or other users may access."""
    found = []
    for file in store_files(path):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            found.append(f"{file} is {mode:04o}")
    return found


def make_owner_only(path: str) -> None:
    """Create the database file ``0600`` if it does not exist; set the store's files back to owner-only if not."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc}; check that the directory is writable") from exc
    else:
        os.close(fd)
        return
    for file in store_files(path):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            if mode & 0o077:
                os.chmod(file, mode & 0o700)
                log.warning("%s was readable by other users (%04o); memroute set it to %04o (owner only)", file,
                            mode, mode & 0o700)
        except OSError as exc:  # e.g. another user's file: reported, not fatal
            log.warning("%s is readable by other users and its permissions cannot be changed: %s", file, exc)
