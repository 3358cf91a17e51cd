"""How many connections each worker process serves, shared by the workers of one socket.

:class:`memroute.service.server.BalancedLoop` spreads keep-alive connections over the workers. Alone, a worker
only knows its own connections, so when several clients connected at once and a worker's loop was held up by
a recall, another took one more than its share: the service bench's four clients fell 1 / 3 on two workers in
three runs of four, and the worker with one client idled a sixth of the time (126-141 against 148 requests/s,
docs/benchmarks.md). With the board a worker that serves more connections than another defers a new one
(a bounded time) so that the other takes it.

The board is a file of :data:`SLOTS` slots (pid, connections) that the parent creates before it starts the
workers (its path in the environment, :data:`ENV`); each worker claims a slot (a free one, or one whose
process has died, under ``flock``) and writes only its own count; the others read it.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import tempfile
from pathlib import Path

ENV = "MEMROUTE_WORKER_BOARD"
SLOTS = 64
"""As many as ``memroute serve --workers`` accepts."""
_SLOT = struct.Struct("<qq")  # pid, open connections


def create() -> Path:
    """A new empty board file (the parent's; removed by the caller when the workers have stopped)."""
    fd, name = tempfile.mkstemp(prefix="memroute-workers-")
    try:
        os.write(fd, bytes(SLOTS * _SLOT.size))
    finally:
        os.close(fd)
    return Path(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WorkerBoard:
    """One worker's view of the board: its own slot to write, the others' counts to read."""

    def __init__(self, path: Path, pid: int | None = None) -> None:
        self.pid = pid if pid is not None else os.getpid()
        with open(path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), SLOTS * _SLOT.size)
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                self.slot = self._claim()
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @classmethod
    def from_environment(cls) -> WorkerBoard | None:
        """The board the parent named in :data:`ENV`, or ``None`` (one process, or a file that is gone)."""
        path = os.environ.get(ENV)
        if not path:
            return None
        try:
            return cls(Path(path))
        except (OSError, ValueError):
            return None

    def _claim(self) -> int:
        free = None
        for slot in range(SLOTS):
            pid, _ = _SLOT.unpack_from(self._map, slot * _SLOT.size)
            if pid == self.pid:
                free = slot
                break
            if free is None and (pid == 0 or not _alive(pid)):
                free = slot
        if free is None:
            raise ValueError(f"the worker board has no free slot of {SLOTS}")
        _SLOT.pack_into(self._map, free * _SLOT.size, self.pid, 0)
        return free

    def set(self, connections: int) -> None:
        """This worker now serves ``connections``."""
        _SLOT.pack_into(self._map, self.slot * _SLOT.size, self.pid, connections)

    def fewest_elsewhere(self) -> int | None:
        """The fewest connections another worker on the board serves (``None``: no other worker)."""
        fewest = None
        for slot in range(SLOTS):
            if slot == self.slot:
                continue
            pid, connections = _SLOT.unpack_from(self._map, slot * _SLOT.size)
            if pid and (fewest is None or connections < fewest):
                fewest = connections
        return fewest
