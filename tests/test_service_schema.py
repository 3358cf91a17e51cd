"""Schemathesis against the published OpenAPI schema: generated requests, valid and invalid, find no 5xx.

It runs on its own service (generated requests may forget whole owners) with a key for any owner, so
that requests reach past authentication into every endpoint.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.generation.case import Case

from memroute.embed import CachedEmbedder
from tests.service_server import KEYS, live_service, settings_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service_url(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[str]:
    with live_service(settings_for(tmp_path_factory.mktemp("schema"), max_request_bytes=100_000), embedder) as live:
        yield live.url


def test_no_generated_request_gets_a_server_error(service_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{service_url}/openapi.json")
    headers = {"Authorization": f"Bearer {KEYS['admin']}"}
    failures: list[str] = []
    statuses: list[int] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 18
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                      database=None)
            def run(case: Case) -> None:
                response = case.call(base_url=service_url, headers=headers, timeout=30)
                statuses.append(response.status_code)
                if response.status_code >= 500:
                    failures.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r:.200}: "
                                    f"{response.status_code} {response.text[:200]}")

            try:
                run()
            except Unsatisfiable:  # nothing to make invalid (e.g. GET /healthz has no parameters)
                assert mode is GenerationMode.NEGATIVE, operation.label
    assert not failures, "\n".join(failures[:20])
    assert len(statuses) >= 150 and {200, 422} <= set(statuses)  # it did reach the endpoints, both ways
