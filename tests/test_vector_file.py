"""Rows of a saved vectors file read with pread (:mod:`memroute.stores.vector_file`): the same values as the
rows themselves, in the order asked, whichever way they are read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memroute.stores import vector_file
from memroute.stores.vector_file import VectorFile


def saved(tmp_path: Path, rows: int = 3000, dim: int = 24, room: int = 500) -> tuple[Path, np.ndarray]:
    matrix = np.random.default_rng(5).standard_normal((rows, dim)).astype(np.float32)
    path = tmp_path / "v.f32"
    with open(path, "wb") as fh:
        fh.write(matrix.tobytes())
        fh.truncate((rows + room) * dim * 4)  # room for more rows, as the index files leave
    return path, matrix


@pytest.mark.parametrize("chunk_rows", [65_536, 64])  # the second reads spans in chunks
def test_take_gives_the_rows_asked_for_in_their_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      chunk_rows: int) -> None:
    monkeypatch.setattr(vector_file, "_CHUNK_ROWS", chunk_rows)
    path, matrix = saved(tmp_path)
    file = VectorFile(path, matrix.shape[1], len(matrix))
    rng = np.random.default_rng(1)
    cases = [rng.integers(0, len(matrix), 100), rng.integers(0, len(matrix), 2500),  # scattered, repeats
             np.arange(700, 1900)[::-1], np.array([5, 6, 7, 7, 2999, 0, 1]), np.empty(0, dtype=np.int64),
             np.flatnonzero(rng.random(len(matrix)) < 0.6)]  # most rows: read in chunks
    for slots in cases:
        assert np.array_equal(file.take(slots), matrix[slots])
    assert np.array_equal(file.read(0, len(matrix)), matrix)
    assert np.array_equal(file.read(1234, 1240), matrix[1234:1240])


def test_rows_outside_the_file_are_an_error(tmp_path: Path) -> None:
    path, matrix = saved(tmp_path, room=0)
    file = VectorFile(path, matrix.shape[1], len(matrix))
    with pytest.raises(IndexError):
        file.take(np.array([0, len(matrix)]))
    with pytest.raises(IndexError):
        file.read(10, len(matrix) + 1)
    with open(path, "r+b") as fh:  # cut short under the reader: a short read is an error, not zeros
        fh.truncate(100 * matrix.shape[1] * 4)
    with pytest.raises(OSError, match="ended before"):
        file.take(np.array([2000]))
    with pytest.raises(OSError, match="ended before"):  # not a mapping past the end (SIGBUS)
        file.each_mapped(50, 101, lambda first, rows: None)
    with pytest.raises(IndexError):
        file.each_mapped(10, len(matrix) + 1, lambda first, rows: None)


@pytest.mark.parametrize("map_bytes", [8 << 20, 4096, 1000])  # one map, maps of 42 rows, of 10 (not page-aligned)
def test_each_mapped_gives_every_row_once_and_leaves_no_mapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 map_bytes: int) -> None:
    monkeypatch.setattr(vector_file, "_MAP_BYTES", map_bytes)
    path, matrix = saved(tmp_path)
    file = VectorFile(path, matrix.shape[1], len(matrix))
    for start, stop in [(0, len(matrix)), (1, 2), (777, 2345), (5, 5), (2999, 3000)]:
        got = np.full_like(matrix, np.nan)
        seen = np.zeros(len(matrix), dtype=int)

        def use(first: int, rows: np.ndarray, got: np.ndarray = got, seen: np.ndarray = seen) -> None:
            assert not rows.flags.writeable
            got[first : first + len(rows)] = rows
            seen[first : first + len(rows)] += 1

        file.each_mapped(start, stop, use)
        assert np.array_equal(got[start:stop], matrix[start:stop])
        assert (seen[start:stop] == 1).all() and seen.sum() == stop - start
    maps = Path("/proc/self/maps").read_text()
    assert str(path) not in maps  # every map was undone
