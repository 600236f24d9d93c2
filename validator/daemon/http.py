"""The sidecar's HTTP server: the replies of :mod:`validator.daemon.endpoints` served by h11 on an asyncio
protocol, ``GET`` and ``HEAD`` only.

h11 parses (keep-alive, pipelining, framing rules, errors); this module keeps the bounds a hostile client
meets: connections, buffered output, header and idle time, head size, requests per loop turn. No framework:
every answer is pre-rendered from the latched state, so routing and ASGI would only add per-request work
(figures in ``bench/sidecar_request_cpu.py`` and ``bench/sidecar_pipeline.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import h11

from validator.daemon.endpoints import JSON, REASONS, Endpoints, json_body, response
from validator.daemon.logs import Logger

MAX_HEAD = 8192  # bytes of request line + headers
IDLE_TIMEOUT_S = 30.0  # a keep-alive connection with no request in progress
HEADER_TIMEOUT_S = 10.0  # from a request's first byte to the end of its head (slow-loris)
WRITE_TIMEOUT_S = 30.0  # a client that stopped reading our replies
MAX_CONNECTIONS = 256  # Prometheus and the kubelet need a handful
WRITE_HIGH_WATER = 256 * 1024  # buffered output that pauses answering (and reading) on a connection
MAX_OUTPUT = 8 * 1024 * 1024  # never more buffered than this on one connection, even for one reply
ACCEPT_LOG_INTERVAL_S = 60.0
# Requests answered on one connection before the event loop serves the others: pipelined requests arrive
# by the thousand in one read, and without a turn one client's burst held every other client (the
# kubelet's probe included).
REQUESTS_PER_TURN = 8


class _Protocol(asyncio.Protocol):
    """One client connection, requests read by an ``h11.Connection`` and answered in order. Past the
    transport's high-water mark ``pause_writing`` stops both answering and reading, so neither buffer
    grows; the server's reaper closes connections that stall."""

    def __init__(self, endpoints: Endpoints, server: SidecarServer) -> None:
        self.ep = endpoints
        self.server = server
        # h11 refuses (431) a head still incomplete past MAX_HEAD; _answer refuses a complete one past it.
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.transport: asyncio.Transport | None = None
        self.last = time.monotonic()
        self.request_started: float | None = None  # first byte of a request whose head is incomplete
        self.paused_since: float | None = None  # the client stopped reading our replies
        self.turn_ended = False  # REQUESTS_PER_TURN answered: reading waits for the next turn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.server.admit(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.conns.discard(self)
        self.transport = None

    def pause_writing(self) -> None:
        self.paused_since = time.monotonic()
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused_since = None
        if self.transport is not None and not self.turn_ended:
            self.transport.resume_reading()
            self._process()

    def _next_turn(self) -> None:
        self.turn_ended = False
        if self.transport is not None and not self.transport.is_closing() and self.paused_since is None:
            self.transport.resume_reading()
            self._process()

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        self.last = now
        if self.request_started is None:
            self.request_started = now
        self.http.receive_data(data)
        self._process()

    def _process(self) -> None:
        http = self.http
        answered = 0
        while (t := self.transport) is not None and not t.is_closing() and self.paused_since is None:
            if self.turn_ended:
                break
            if answered == REQUESTS_PER_TURN:  # the rest of a pipelined burst waits for the next turn
                self.turn_ended = True
                t.pause_reading()
                asyncio.get_running_loop().call_soon(self._next_turn)
                break
            try:
                event = http.next_event()
            except h11.RemoteProtocolError as exc:
                return self._fail(exc.error_status_hint)
            if event is h11.NEED_DATA:
                if not http.trailing_data[0]:  # at most MAX_HEAD bytes: h11 refuses more while incomplete
                    self.request_started = None
                elif self.request_started is None:
                    self.request_started = time.monotonic()
                break
            if type(event) is h11.Request:
                self._answer(event, t)
                answered += 1
            elif type(event) is h11.EndOfMessage and http.our_state is h11.DONE:
                http.start_next_cycle()
                self.request_started = None
            else:  # the client closed, or the end of a request we answered with Connection: close
                t.close()
        if self.transport is not None and self.transport.get_write_buffer_size() > MAX_OUTPUT:
            self.transport.abort()  # one reply larger than the cap: never buffer more than this

    def _fail(self, status: int) -> None:
        """Answer a request that is refused before routing (``status``: h11's hint, or ours) and close:
        after a malformed head or a refused body the framing of what follows is lost."""
        t = self.transport
        if t is None:
            return
        head, body = _ERRORS.get(status, _ERRORS[400])
        if self.http.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                out = self.http.send(head) or b""
                with contextlib.suppress(h11.LocalProtocolError):  # a HEAD request's answer has no body
                    out += self.http.send(h11.Data(data=body)) or b""
                t.write(out)
        t.close()

    def _answer(self, request: h11.Request, t: asyncio.Transport) -> None:
        if request.http_version not in (b"1.1", b"1.0"):
            return self._fail(400)
        size = (
            len(request.method) + len(request.target) + sum(len(n) + len(v) + 4 for n, v in request.headers)
        )
        if size > MAX_HEAD:
            return self._fail(431)
        body_headers = [v for n, v in request.headers if n in (b"content-length", b"transfer-encoding")]
        if body_headers and body_headers != [b"0"]:
            # no endpoint takes a body; refusing it keeps the framing unambiguous (h11 has already refused
            # conflicting lengths and codings other than chunked)
            return self._fail(413)
        reply = self.ep.answer(request.method, request.target)
        http = self.http
        out = http.send(reply[0]) or b""
        if request.method != b"HEAD" and reply[1]:
            out += http.send(h11.Data(data=reply[1])) or b""
        http.send(h11.EndOfMessage())
        t.write(out)
        if http.our_state is h11.MUST_CLOSE:
            t.close()

    def stalled(self, now: float, server: SidecarServer) -> str | None:
        """Why the reaper should close this connection now, if it should."""
        if self.paused_since is not None and now - self.paused_since > server.write_timeout:
            return "not reading its replies"
        if self.request_started is not None and now - self.request_started > server.header_timeout:
            return "request head too slow"
        if self.request_started is None and now - self.last > server.idle_timeout:
            return "idle"
        return None

    def staleness(self) -> float:
        """When this connection last made progress (for evicting the stalest one at the cap)."""
        if self.paused_since is not None:
            return self.paused_since
        return self.request_started if self.request_started is not None else self.last


_ERRORS = {
    status: response(status, json_body({"error": REASONS[status]}), JSON, extra=((b"Connection", b"close"),))
    for status in (400, 413, 431, 501)
}


class SidecarServer:
    """The listening socket and its connections, bounded so a hostile client cannot starve the kubelet's
    probes: ``max_connections`` (at most half the fd limit; the stalest is evicted), ``header_timeout``,
    ``idle_timeout``, ``write_timeout`` with back-pressure, and ``accept()`` errors logged once a minute."""

    def __init__(
        self,
        endpoints: Endpoints,
        *,
        max_connections: int = MAX_CONNECTIONS,
        header_timeout: float = HEADER_TIMEOUT_S,
        idle_timeout: float = IDLE_TIMEOUT_S,
        write_timeout: float = WRITE_TIMEOUT_S,
        log: Logger | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.conns: set[_Protocol] = set()
        self.servers: list[asyncio.Server] = []  # one listening socket per --listen address
        self._reaper: asyncio.Task[None] | None = None
        self.max_connections = min(max_connections, _fd_budget())
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self.write_timeout = write_timeout
        self.log = log
        self.evicted = 0
        self._accept_errors = 0
        self._accept_logged = -math.inf
        self._previous_handler: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None = None
        self._closed = False

    def admit(self, conn: _Protocol) -> None:
        if len(self.conns) >= self.max_connections:
            stalest = min(self.conns, key=_Protocol.staleness)
            self.conns.discard(stalest)
            if stalest.transport is not None:
                stalest.transport.abort()
            self.evicted += 1
        self.conns.add(conn)

    def _warn(self, event: str, **fields: Any) -> None:
        if self.log is not None:
            self.log.warning(event, **fields)
        else:
            sys.stderr.write(f"spark-validate serve: {event} {json.dumps(fields, default=str)}\n")

    def _exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if message.startswith("socket.accept() out of system resource"):
            self._accept_errors += 1
            now = time.monotonic()
            if now - self._accept_logged >= ACCEPT_LOG_INTERVAL_S:
                exc = context.get("exception")
                self._warn(
                    "accept failing",
                    error=str(exc) if exc else message,
                    count=self._accept_errors,
                    connections=len(self.conns),
                    max_connections=self.max_connections,
                )
                self._accept_logged = now
                self._accept_errors = 0
            return
        if self._closed and getattr(context.get("handle"), "_callback", None) == getattr(
            loop, "_start_serving", 0
        ):
            return  # asyncio's accept retry after EMFILE, come due on a listening socket close() shut
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` (the bound address is returned); called again, listen on another
        address too, with the same endpoints and the same connection bounds over all of them."""
        loop = asyncio.get_running_loop()
        if self._reaper is None:
            self._previous_handler = loop.get_exception_handler()
            loop.set_exception_handler(self._exception_handler)
        server = await loop.create_server(
            lambda: _Protocol(self.endpoints, self), host, port, backlog=1024, reuse_address=True
        )
        self.servers.append(server)
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap(), name="sidecar-reaper")
        addr = server.sockets[0].getsockname()
        return str(addr[0]), int(addr[1])

    async def _reap(self) -> None:
        tick = max(0.05, min(1.0, self.header_timeout / 4, self.idle_timeout / 4, self.write_timeout / 4))
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for c in list(self.conns):
                if c.transport is not None and c.stalled(now, self):
                    c.transport.abort()

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        for server in self.servers:
            server.close()
        if self.servers:
            for c in list(self.conns):
                if c.transport is not None:
                    c.transport.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(s.wait_closed() for s in self.servers)), 0.5)


def _fd_budget() -> int:
    """Half the soft descriptor limit: the rest stays for the client to the server, files and logs."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(8, soft // 2)
