"""Write ``memroute/retrieval/memory_need_prototypes.json`` again: the prototypes of the memory-need bank's kinds for
the packaged encoders, computed from ``memory_need.json`` (run after editing the bank; recall embeds the bank itself
for an encoder whose entry is missing or was computed from another bank).

    PYTHONPATH=src python -m benchmarks.memory_need_prototypes [NAME ...]   # default: use-m3 use-m3+e5-small
"""

from __future__ import annotations

import sys

from memroute.retrieval.memory_need import write_shipped

if __name__ == "__main__":
    print(write_shipped(sys.argv[1:] or ["use-m3", "use-m3+e5-small"]))
