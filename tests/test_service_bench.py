"""The service benchmark's load generator against a real service: what it counts as answered and as errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from benchmarks.bench_service import RawClient, drive

from memroute.embed import CachedEmbedder
from tests.service_server import KEYS, live_service, settings_for


def test_raw_client_reads_whole_answers_on_one_connection(tmp_path: Path, embedder: CachedEmbedder) -> None:
    with live_service(settings_for(tmp_path), embedder) as live:
        live.memory.remember("I adopted a cat named Miso in March", owner="alice")

        async def talk() -> tuple[list[int], int]:
            good, wrong = RawClient(live.url, KEYS["alice"]), RawClient(live.url, "not-a-key")
            statuses = [await good.post("/v1/recall", b'{"text": "what is my cat called?", "trace": true}')
                        for _ in range(3)]
            assert good._streams is not None
            port = good._streams[1].get_extra_info("sockname")[1]
            statuses.append(await good.post("/v1/recall", b'{"text": 1}'))  # a 422 answer, read whole
            statuses.append(await good.post("/v1/recall", b'{"text": "and my cat?"}'))
            assert good._streams[1].get_extra_info("sockname")[1] == port  # still the same connection
            bad = await wrong.post("/v1/recall", b'{"text": "what is my cat called?"}')
            await good.close()
            await wrong.close()
            return statuses, bad

        statuses, bad = asyncio.run(talk())
        assert statuses == [200, 200, 200, 422, 200]
        assert bad == 401


@pytest.mark.parametrize("client", ["raw", "httpx"])
def test_drive_counts_answers_and_errors_alike_with_both_clients(tmp_path: Path, embedder: CachedEmbedder,
                                                                 client: str) -> None:
    with live_service(settings_for(tmp_path), embedder) as live:
        live.memory.remember("I adopted a cat named Miso in March", owner="alice")
        ok = asyncio.run(drive(live.url, KEYS["alice"], ["my cat?", "the cat's name"], 1.0, 2, True, client=client))
        refused = asyncio.run(drive(live.url, "not-a-key", ["my cat?"], 0.5, 1, False, client=client))
    assert ok["requests"] > 0 and ok["errors"] == 0
    assert refused["requests"] == 0 and refused["errors"] > 0 and set(refused["error_kinds"]) == {"HTTP 401"}
