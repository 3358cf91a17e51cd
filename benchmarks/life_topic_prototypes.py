"""Write ``memroute/retrieval/life_topic_prototypes.json`` again: the life-topic prototypes of the packaged encoders,
computed from ``life_topics.json`` (run after editing the bank; recall embeds the bank itself for an encoder whose
entry is missing or was computed from another bank).

    PYTHONPATH=src python -m benchmarks.life_topic_prototypes [NAME ...]   # default: use-m3 use-m3+e5-small
"""

from __future__ import annotations

import sys

from memroute.retrieval.topics import write_shipped

if __name__ == "__main__":
    print(write_shipped(sys.argv[1:] or ["use-m3", "use-m3+e5-small"]))
