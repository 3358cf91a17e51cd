"""The workers' board of open connections (memroute.service.worker_board), on a real file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memroute.service import worker_board
from memroute.service.worker_board import WorkerBoard


@pytest.fixture
def board_file() -> Path:
    path = worker_board.create()
    yield path  # type: ignore[misc]
    path.unlink(missing_ok=True)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def test_each_worker_claims_its_own_slot_and_reads_the_others(board_file: Path) -> None:
    first, second, third = (WorkerBoard(board_file, pid=pid) for pid in (1, 2, 3))  # pid 1 is alive
    assert len({first.slot, second.slot, third.slot}) == 3
    assert first.fewest_elsewhere() == 0
    first.set(3)
    second.set(2)
    third.set(5)
    assert first.fewest_elsewhere() == 2
    assert second.fewest_elsewhere() == 3
    assert third.fewest_elsewhere() == 2
    assert WorkerBoard(board_file, pid=2).slot == second.slot  # the same process again: its own slot


def test_a_dead_workers_slot_is_taken_by_its_replacement(board_file: Path) -> None:
    alive = WorkerBoard(board_file, pid=1)
    dead = WorkerBoard(board_file, pid=_dead_pid())
    dead.set(7)
    assert alive.fewest_elsewhere() == 7  # a dead worker's count is read until a new worker takes its slot
    replacement = WorkerBoard(board_file, pid=2)
    assert replacement.slot == dead.slot
    assert alive.fewest_elsewhere() == 0


def test_a_full_board_and_no_board(board_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_board, "_alive", lambda pid: True)
    slots = {WorkerBoard(board_file, pid=1_000_000 + n).slot for n in range(worker_board.SLOTS)}
    assert len(slots) == worker_board.SLOTS
    with pytest.raises(ValueError, match="no free slot"):
        WorkerBoard(board_file, pid=5)
    monkeypatch.setenv(worker_board.ENV, str(board_file))
    assert WorkerBoard.from_environment() is None  # full: the loop balances without it
    monkeypatch.setenv(worker_board.ENV, str(board_file.with_name("gone")))
    assert WorkerBoard.from_environment() is None
    monkeypatch.delenv(worker_board.ENV)
    assert WorkerBoard.from_environment() is None
