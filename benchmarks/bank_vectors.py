"""Regenerate the built-in request bank's vectors shipped as package data (``routing/request_bank_vectors.npz``).

    PYTHONPATH=src python -m benchmarks.bank_vectors [--out PATH]

Embeds every description and request of ``routing/request_bank.json`` with the packaged routing encoder
(``use-m3+e5-ja-ko``) and writes them as float16 with the encoder's model id and dimension and a hash of each
capability's texts (:func:`memroute.routing.bank.write_vectors`). Run it after editing the bank or changing the
encoder; ``tests/test_routing_bank.py`` recomputes a sample and fails when the shipped vectors are stale.
"""

from __future__ import annotations

import argparse
import time
from importlib import resources
from pathlib import Path

from memroute.embed.models import ROUTING_EMBEDDER, get_embedder
from memroute.routing.bank import VECTORS_FILE, builtin_bank, read_vectors, write_vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(str(resources.files("memroute.routing").joinpath(VECTORS_FILE)))
    parser.add_argument("--out", type=Path, default=default, help=f"output file (default {default})")
    args = parser.parse_args()
    bank, embedder = builtin_bank(), get_embedder(ROUTING_EMBEDDER)
    started = time.perf_counter()
    tmp = args.out.with_name(args.out.name + ".tmp")
    with tmp.open("wb") as f:
        write_vectors(bank, embedder, f)
    read_vectors(tmp)  # readable before it replaces the old file
    tmp.replace(args.out)
    print(f"{args.out}: {len(bank)} capabilities, {embedder.model_id} ({embedder.dimension}), "
          f"{args.out.stat().st_size / 1e6:.2f} MB, {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
