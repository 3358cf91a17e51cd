"""The memroute service: the HTTP API over one :class:`memroute.Memory` (``memroute serve``).

- :mod:`memroute.service.app`: ``create_app(settings, memory)``, the FastAPI application.
- :mod:`memroute.service.core`: the state it shares with whatever is mounted beside it.
- :mod:`memroute.service.auth`: API keys (stored hashed) and owner scoping.
- :mod:`memroute.service.limits`: rate limits and the worker threads of library calls.
- :mod:`memroute.service.schemas`: the JSON shapes (pydantic only; the client reads them too).
- :mod:`memroute.service.server`: running it with uvicorn.

Nothing is imported here, so that :mod:`memroute.client` can read the schemas without FastAPI installed.
"""
