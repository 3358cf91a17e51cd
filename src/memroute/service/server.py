"""Running the service with uvicorn, with time limits for slow clients.

uvicorn closes idle keep-alive connections (5 s) but sets no limit on how long a client may take to send
its request headers: one that opens a connection and trickles bytes would hold it for ever, and enough
of them would exhaust the connection limit. :func:`server_config` uses uvicorn's h11 protocol with one
addition, a deadline for the headers (``request_timeout_s``), after which the client gets a 408 and the
connection is closed. The body has its own deadline in :class:`memroute.service.middleware.BodyLimit`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from memroute.config import Settings

MAX_CONNECTIONS = 1024
"""Open connections (and requests) beyond which uvicorn answers 503."""


def _header_deadline_protocol(timeout_s: float) -> type[H11Protocol]:
    body = json.dumps({"type": "RequestTimeout", "message": f"the request headers did not arrive within "
                       f"{timeout_s:g} s (request_timeout_s)", "detail": None}).encode()
    answer = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
              b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    class HeaderDeadlineH11(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _waiting_after: Any = None
        """The request cycle that was current when the deadline was armed: a newer one means headers came."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._waiting_after = self.cycle
            self._deadline = self.loop.call_later(timeout_s, self._expire)

        def _expire(self) -> None:
            if self.cycle is not self._waiting_after or self.transport.is_closing():
                return  # a request arrived in time (its body has BodyLimit's deadline)
            if self.conn.trailing_data[0]:  # part of a request came: say why the connection ends
                self.transport.write(answer)
            self.transport.close()

    return HeaderDeadlineH11


def server_config(app: Any, settings: Settings, log_level: str = "info") -> uvicorn.Config:
    """uvicorn's configuration for ``app`` on ``settings.host:settings.port``, with the header deadline."""
    return uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level, lifespan="on",
                          http=_header_deadline_protocol(settings.request_timeout_s), timeout_keep_alive=5,
                          limit_concurrency=MAX_CONNECTIONS, server_header=False)


def serve(app: Any, settings: Settings, log_level: str = "info") -> None:
    """Serve ``app`` until interrupted (Ctrl-C or SIGTERM: finishes running requests, then stops)."""
    uvicorn.Server(server_config(app, settings, log_level)).run()
