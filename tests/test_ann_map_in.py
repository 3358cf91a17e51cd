"""A viewed graph's pages are mapped into the process at once, on a thread of their own (``ann.map_in``): real
usearch files and this process's own mappings, read from /proc/self/smaps."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from usearch.index import Index

from memroute.stores import ann
from memroute.stores.ann import AnnGraph

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")

DIM = 512


def resident_kb(path: Path) -> tuple[int, int]:
    """(mapped, resident) kB of this process's mappings of ``path``."""
    name, size, rss, current = os.path.realpath(path), 0, 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header line
            current = len(fields) == 6 and fields[5] == name
        elif current and fields[0] == "Size:":
            size += int(fields[1])
        elif current and fields[0] == "Rss:":
            rss += int(fields[1])
    return size, rss


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(3000, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    graph = AnnGraph.new(DIM)
    graph.add(np.arange(3000, dtype=np.int64), vectors)
    path = tmp_path_factory.mktemp("graph") / "g1-graph.usearch"
    graph.save(path)
    return path, vectors


def test_map_in_makes_every_page_of_the_mapping_resident(graph_file: tuple[Path, np.ndarray]) -> None:
    path, _ = graph_file
    index = Index.restore(str(path), view=True)  # mapped, not mapped in
    size, before = resident_kb(path)
    assert size > 0 and before < size / 2, (size, before)
    assert ann.map_in(path) >= size * 1024
    assert resident_kb(path) == (size, size)
    del index


def test_a_viewed_graph_is_mapped_in_on_its_own_thread_and_answers_as_loaded(
        graph_file: tuple[Path, np.ndarray]) -> None:
    path, vectors = graph_file
    viewed = AnnGraph.view(path, DIM)
    assert viewed.mapping_in is not None
    viewed.mapping_in.join(timeout=30)
    size, rss = resident_kb(path)
    assert size > 0 and rss == size
    loaded = AnnGraph.load(path, DIM)
    for q in vectors[:50]:
        assert np.array_equal(viewed.search(q, 20), loaded.search(q, 20))


def test_map_in_of_a_file_not_mapped_asks_for_nothing(tmp_path: Path) -> None:
    other = tmp_path / "not-mapped"
    other.write_bytes(b"x" * 8192)
    assert ann.map_in(other) == 0
