"""Running the service with uvicorn: one process, or several worker processes on one socket.

uvicorn closes idle keep-alive connections (5 s) but sets no limit on how long a client may take to send
its request headers: one that opens a connection and trickles bytes would hold it for ever, and enough
of them would exhaust the connection limit. :func:`server_config` uses uvicorn's httptools protocol (its
C parser: ~0.2-0.35 ms less of the event loop's CPU a recall than h11's, docs/benchmarks.md), or h11's where
httptools is not installed, with one addition, a deadline for the headers (``request_timeout_s``), after
which the client gets a 408 and the connection is closed (:class:`HeaderDeadline`). The body has its own
deadline in :class:`memroute.service.middleware.BodyLimit`.

Workers (``memroute serve --workers N``, :func:`serve_workers`): the parent binds the socket and starts
``N`` processes (uvicorn's supervisor: a worker that dies is replaced); each builds its own app with
:class:`WorkerApp`, so each has its own store connection (SQLite) or pool (PostgreSQL), in-memory index,
embedding cache, rate-limit buckets and metrics. A write in one worker is seen by the next search in
every other: the SQLite store brings its index up to date from the file's change log before a search.

The workers share the connections through :class:`BalancedLoop`. asyncio accepts every pending connection
of a listening socket at once, so the first worker to wake took them all: four keep-alive clients that
connected together were all served by one of two workers, which used one core while the other slept
(``benchmarks/bench_service.py`` prints the CPU time of each process).
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is not installed: h11 only
    HttpToolsProtocol = None  # type: ignore[assignment,misc]
from uvicorn.supervisors import Multiprocess

from memroute.config import Settings
from memroute.errors import InputError
from memroute.service import worker_board
from memroute.service.worker_board import WorkerBoard

MAX_CONNECTIONS = 1024
"""Open connections (and requests) per process beyond which uvicorn answers 503."""


WORKER_HEALTHCHECK_S = 60
"""A worker that does not answer the supervisor's ping for this long is replaced. uvicorn's 5 s replaced
workers that were still importing on a busy machine (over 10 s at load 14 on 2 cores), over and over."""


class ServerConfig(uvicorn.Config):
    """uvicorn's configuration and the header deadline (picklable: workers receive it)."""

    def __init__(self, app: Any, request_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.request_timeout_s = request_timeout_s


class HeaderDeadline:
    """A deadline for each request's headers (``ServerConfig.request_timeout_s``) on one of uvicorn's HTTP
    protocols (:class:`HeaderDeadlineHttpTools`, :class:`HeaderDeadlineH11`), counting the process's open
    connections (``open_connections``) for :class:`BalancedLoop`."""

    open_connections = 0
    _deadline: asyncio.TimerHandle | None = None
    _waiting_after: Any = None
    """The request cycle that was current when the deadline was armed: a newer one means headers came."""
    _heard = False
    """Whether bytes arrived since the deadline was armed (part of a request, if no newer cycle began)."""

    # the protocol's own attributes and methods, set and defined by uvicorn's class beside this one
    config: Any
    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._count(1)
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        self._heard = True
        super().data_received(data)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._count(-1)
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    @staticmethod
    def _count(change: int) -> None:
        """This process's open connections, also on the workers' board when it has one."""
        HeaderDeadline.open_connections += change
        if BalancedLoop.board is not None:
            BalancedLoop.board.set(HeaderDeadline.open_connections)

    def _timeout_s(self) -> float:
        return float(getattr(self.config, "request_timeout_s", 30.0))

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._waiting_after = self.cycle
        self._heard = False
        self._deadline = self.loop.call_later(self._timeout_s(), self._expire)

    def _expire(self) -> None:
        if self.cycle is not self._waiting_after or self.transport.is_closing():
            return  # a request arrived in time (its body has BodyLimit's deadline)
        if self._heard:  # part of a request came: say why the connection ends
            self.transport.write(_timeout_answer(self._timeout_s()))
        self.transport.close()


class HeaderDeadlineH11(HeaderDeadline, H11Protocol):
    """uvicorn's h11 protocol (pure Python) with :class:`HeaderDeadline`: where httptools is not installed."""


HeaderDeadlineHttpTools: type[HeaderDeadline] | None = None
"""uvicorn's httptools protocol (llhttp, in C) with :class:`HeaderDeadline`, the default; ``None`` where httptools
is not installed."""
if HttpToolsProtocol is not None:
    class _HeaderDeadlineHttpTools(HeaderDeadline, HttpToolsProtocol):
        """:data:`HeaderDeadlineHttpTools`."""

    HeaderDeadlineHttpTools = _HeaderDeadlineHttpTools

PROTOCOL: type[HeaderDeadline] = HeaderDeadlineHttpTools or HeaderDeadlineH11
"""The HTTP protocol the service runs."""


def _timeout_answer(timeout_s: float) -> bytes:
    body = json.dumps({"type": "RequestTimeout", "message": f"the request headers did not arrive within "
                       f"{timeout_s:g} s (request_timeout_s)", "detail": None}).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


ACCEPT_PAUSE_S = 0.001
"""How long a worker that serves ``n`` connections lets the others take a new one first: ``n`` times this,
at most ``MAX_ACCEPT_PAUSE_S``."""

MAX_ACCEPT_PAUSE_S = 0.008

MAX_DEFER_S = 0.05
"""How long a worker defers a new connection at most while another worker serves fewer."""


class BalancedLoop(asyncio.SelectorEventLoop):
    """The event loop of a worker process that shares its listening socket with other workers.

    asyncio's loop accepts every connection waiting on the socket when it becomes readable (up to the
    backlog), so the first worker to wake took a burst of connections whole. This loop accepts one
    connection at a time, and a worker that already serves ``n`` connections waits ``n`` ms
    (``ACCEPT_PAUSE_S``) before it tries, so that a worker with fewer connections, or whose loop is not
    held up by work, takes it. Keep-alive connections then spread over the workers: four clients that
    connect one after another are served two by each of two workers. With one worker nothing waits:
    ``serve`` keeps asyncio's own loop.

    A worker whose loop is held up by a recall can miss its turn; so the workers also publish their counts
    (:mod:`.worker_board`), and a worker that serves more than another defers a new connection, ``ACCEPT_PAUSE_S``
    at a time and at most ``MAX_DEFER_S`` (the other may be stuck, or dead), for the other to take."""

    board: WorkerBoard | None = None
    """This process's slot on the workers' board (set by the first loop of a worker process)."""
    _accepted = 0
    _waited = False
    _deferred_s = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if BalancedLoop.board is None:
            BalancedLoop.board = WorkerBoard.from_environment()

    def _accept_connection(self, protocol_factory: Any, sock: socket.socket, sslcontext: Any = None,
                           server: Any = None, backlog: int = 100, *timeouts: Any) -> None:
        again = (protocol_factory, sock, sslcontext, server, backlog, *timeouts)
        serving = HeaderDeadline.open_connections
        fewest = self.board.fewest_elsewhere() if self.board is not None else None
        if fewest is not None and fewest < serving and self._deferred_s < MAX_DEFER_S:
            self._deferred_s += ACCEPT_PAUSE_S  # another worker serves fewer: let it take this one
            self._pause(ACCEPT_PAUSE_S, again)
            return
        self._deferred_s = 0.0
        if serving and not self._waited:  # let a worker with fewer connections take it first
            self._waited = True
            self._pause(min(serving * ACCEPT_PAUSE_S, MAX_ACCEPT_PAUSE_S), again)
            return
        self._waited = False
        accepted = self._accepted
        super()._accept_connection(protocol_factory, sock, sslcontext, server, 1, *timeouts)  # type: ignore[misc]
        if self._accepted != accepted:  # one accepted: it is counted once connected, on the next turns
            self._pause(ACCEPT_PAUSE_S, again)

    def _accept_connection2(self, protocol_factory: Any, conn: socket.socket, *args: Any, **kwargs: Any) -> Any:
        self._accepted += 1  # _accept_connection calls this for each connection it accepted
        if conn.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio turns Nagle off only on a socket whose proto is IPPROTO_TCP, and the socket uvicorn binds
            # for --workers has proto 0: a response's body then waited for the client's delayed ACK of its
            # headers, ~45 ms a request on a keep-alive connection (16.6 requests/s from one client)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return super()._accept_connection2(protocol_factory, conn, *args, **kwargs)  # type: ignore[misc]

    def _pause(self, seconds: float, again: tuple[Any, ...]) -> None:
        """Stop listening on the socket for ``seconds``; ``again``: the arguments to listen with after."""
        sock = again[1]
        if sock.fileno() == -1:
            return
        self._remove_reader(sock.fileno())  # type: ignore[attr-defined]
        self.call_later(seconds, self._listen_again, again)

    def _listen_again(self, again: tuple[Any, ...]) -> None:
        sock, server = again[1], again[3]
        if sock.fileno() == -1 or (server is not None and not server.is_serving()):
            return  # the server closed in the meantime
        self._start_serving(*again)  # type: ignore[attr-defined]


def server_config(app: Any, settings: Settings, log_level: str = "info", workers: int = 1,
                  protocol: type[HeaderDeadline] | None = None) -> ServerConfig:
    """uvicorn's configuration for ``app`` on ``settings.host:settings.port``, with the header deadline.

    With ``workers`` > 1, ``app`` must be picklable and build the application when called (:class:`WorkerApp`);
    ``protocol``: the HTTP protocol (default :data:`PROTOCOL`)."""
    return ServerConfig(app, settings.request_timeout_s, host=settings.host, port=settings.port, log_level=log_level,
                        lifespan="on", http=protocol or PROTOCOL, timeout_keep_alive=5,
                        limit_concurrency=MAX_CONNECTIONS, server_header=False, workers=workers,
                        factory=workers > 1, timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
                        loop="memroute.service.server:BalancedLoop" if workers > 1 else "auto")


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Ask glibc for at most ``arenas`` malloc arenas (as ``MALLOC_ARENA_MAX`` would), unless the environment
    sets it. With one arena per worker thread, freed memory stayed in each thread's arena: anonymous memory
    of one process grew 273 -> 343 MB over 2,936 requests, against 265 -> 272 MB with 2 arenas (same load,
    docs/benchmarks.md). No effect outside glibc."""
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):
        return


def serve(app: Any, settings: Settings, log_level: str = "info") -> None:
    """Serve ``app`` until interrupted (Ctrl-C or SIGTERM: finishes running requests, then stops)."""
    limit_malloc_arenas()
    uvicorn.Server(server_config(app, settings, log_level)).run()


@dataclass(frozen=True)
class WorkerApp:
    """Builds one worker's application (its own :class:`memroute.Memory` on ``settings.store``, closed when
    the worker stops); picklable, so that uvicorn can hand it to worker processes."""

    settings: Settings
    demo_agents: bool = False

    def __call__(self) -> Any:
        limit_malloc_arenas()
        thread_lock_for_progress_bars()
        from memroute.cli.demo import demo_agents
        from memroute.service.app import create_app

        app = create_app(self.settings, agents=demo_agents() if self.demo_agents else None)
        warm_up(app.state.service.memory, self.settings.owner)
        return app


def thread_lock_for_progress_bars() -> None:
    """Give tqdm a thread lock in this worker process. tqdm's first bar (the search index's, even a disabled
    one) otherwise creates a multiprocessing lock, a named semaphore registered with the supervisor's resource
    tracker; uvicorn ends a worker by raising the SIGTERM it caught again once it has shut down, so the
    worker dies before multiprocessing's exit handlers unlink the semaphore, and the tracker warned "There
    appear to be N leaked semaphore objects" (one per worker) when the service stopped. A worker's bars are
    drawn by its own threads only."""
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def warm_up(memory: Any, owner: str) -> None:
    """Load the embedding model and the store's search index now, so that the first requests do not wait
    for them (about a second at 10k memories): a process is ready when it is fast."""
    memory.search("warm up", limit=1, owner=owner)


def check_workers(settings: Settings, workers: int) -> None:
    """Raise ``InputError`` unless ``workers`` processes can share ``settings.store``."""
    if not 1 <= workers <= 64:
        raise InputError(f"{workers} workers: give 1 to 64 worker processes")
    if workers > 1 and settings.store.startswith("sqlite://:memory:"):
        raise InputError("an in-memory store cannot be shared by worker processes (each would have its own): "
                         "serve a SQLite file or PostgreSQL, or use one worker")


def serve_workers(app: WorkerApp, settings: Settings, workers: int, log_level: str = "info") -> None:
    """Serve with ``workers`` processes on one socket until interrupted (SIGTERM or Ctrl-C stops them all)."""
    check_workers(settings, workers)
    config = server_config(app, settings, log_level, workers=workers)
    socket = config.bind_socket()
    board = worker_board.create()
    os.environ[worker_board.ENV] = str(board)  # the workers (spawned) inherit it
    try:
        Multiprocess(config, sockets=[socket]).run()
    finally:
        socket.close()
        os.environ.pop(worker_board.ENV, None)
        board.unlink(missing_ok=True)
