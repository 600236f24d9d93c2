"""The sidecar's HTTP endpoints: ``/readyz``, ``/livez``, ``/metrics``, ``/report``, and ``/`` (the HTML
status page), served by h11 on an asyncio protocol.

h11 (a sans-IO HTTP/1.1 state machine, the parser under httpx) reads the requests: request line and
headers, keep-alive, pipelining, HTTP/1.0, the ``Content-Length`` and ``Transfer-Encoding`` rules, and which
malformed request gets which error. This module keeps what h11 leaves to its caller, the bounds a hostile
client meets: connections, buffered output, header time, idle time, head size. ``GET`` and ``HEAD`` only,
and no request body.

Why not starlette + uvicorn (which the project depends on)? Every answer here is a pre-rendered byte
string read from the latched state, so a framework would only add per-request work: routing, scopes,
middleware and ASGI message passing cost more than the whole reply, and uvicorn would sit in the
sidecar's memory for five fixed routes. h11 adds the parser and nothing else (httpx loads it anyway).

What h11 costs, measured against the hand-written parser it replaced (same run, 2-core shared box): one
client, one request at a time, ``/readyz`` p50 0.14 ms instead of 0.03-0.10 ms; 200 clients flooding,
9-12k requests/s instead of 48-64k and p50 16-19 ms instead of 2-4 ms (h11 is a pure-Python state
machine: some 40-80 us of CPU per request). The sidecar's clients are the kubelet and Prometheus, a
request every few seconds, whose probe timeouts are seconds; RSS (49 MB) and ``/livez`` during start-up
are unchanged. A flood stays bounded by the connection cap and back-pressure below, not by parser speed.

Nothing here can trigger a probe: the handlers only read the state (SGLang's own ``/health`` runs a
generation per call and piles up requests when a prober hammers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import h11

from validator.daemon.metrics import CONTENT_TYPE, DaemonMetrics
from validator.daemon.state import DaemonState
from validator.outputs import render
from validator.outputs.html import SidecarView, page, waiting_page
from validator.outputs.safe import safe_dict
from validator.redact import neutralize_deep

MAX_HEAD = 8192  # bytes of request line + headers
IDLE_TIMEOUT_S = 30.0  # a keep-alive connection with no request in progress
HEADER_TIMEOUT_S = 10.0  # from a request's first byte to the end of its head (slow-loris)
WRITE_TIMEOUT_S = 30.0  # a client that stopped reading our replies
MAX_CONNECTIONS = 256  # Prometheus and the kubelet need a handful
WRITE_HIGH_WATER = 256 * 1024  # buffered output that pauses answering (and reading) on a connection
MAX_OUTPUT = 8 * 1024 * 1024  # never more buffered than this on one connection, even for one reply
ACCEPT_LOG_INTERVAL_S = 60.0
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
# The status page runs no script and loads nothing: the browser is told so, so that even text that slipped
# past escaping could not execute or fetch anything.
PAGE_HEADERS = (
    (
        b"Content-Security-Policy",
        b"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"X-Content-Type-Options", b"nosniff"),
    (b"Referrer-Policy", b"no-referrer"),
)

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
}

Reply = tuple[h11.Response, bytes]
"""A response's status line and headers, and its body: HEAD sends the first alone."""


def _response(status: int, body: bytes, ctype: str, *, extra: tuple[tuple[bytes, bytes], ...] = ()) -> Reply:
    """A reply built once and sent as often as asked (h11 validates the headers here, not per request).
    h11 adds ``Connection: close`` itself when the connection will not be kept."""
    headers = [
        (b"Content-Type", ctype.encode("ascii")),
        (b"Content-Length", str(len(body)).encode("ascii")),
        (b"Cache-Control", b"no-store"),
        *extra,
    ]
    return h11.Response(status_code=status, reason=_REASONS[status].encode("ascii"), headers=headers), body


def _has_param(query: bytes, name: bytes) -> bool:
    """``name`` among the query's parameters (``?verbose``, ``?verbose=1``, ``?a&verbose``)."""
    return any(p.partition(b"=")[0] == name for p in query.split(b"&")) if query else False


def readyz_verbose(state: DaemonState, secrets: tuple[str, ...] = ()) -> str:
    """``/readyz?verbose`` as the Kubernetes API server writes it: ``[+]name ok`` or ``[-]name failed:
    reason`` per check, then ``readyz check passed`` or ``readyz check failed``. A line is ``[-]`` exactly
    when that check keeps the verdict from passing; a check that could not be proven but was accepted
    (``--allow-partial``) is ``[+]`` and says so. Messages are the redacted report's, on one line."""

    lines: list[str] = []
    if state.report is None:
        lines.append(f"[-]check failed: no check has finished yet ({state.phase})")
    else:
        data = neutralize_deep(safe_dict(state.report, secrets))
        passed = data["verdict"] == "pass"
        for c in data["checks"]:
            why = " ".join(str(c["message"]).split())
            status, blocking = c["status"], c["severity"] == "critical" or data.get("strict")
            if c["waived"]:
                lines.append(f"[+]{c['id']} waived: {status}: {why}")
            elif status == "pass":
                lines.append(f"[+]{c['id']} ok")
            elif status == "skip":
                lines.append(f"[+]{c['id']} skipped: {why}")
            elif status in ("warn", "info") and not (data.get("strict") and status == "warn"):
                lines.append(f"[+]{c['id']} ok ({status}: {why})")
            elif status == "error" and not blocking:
                lines.append(f"[+]{c['id']} not proven ({c['severity']}, does not block): {why}")
            elif status == "error" and passed:
                lines.append(f"[+]{c['id']} not proven (accepted by --allow-partial): {why}")
            else:
                lines.append(f"[-]{c['id']} failed: {'not proven: ' if status == 'error' else ''}{why}")
    if not state.ready and state.reason:
        lines.append(f"[-]readiness failed: {' '.join(state.reason.split())}")
    lines.append("readyz check passed" if state.ready else "readyz check failed")
    return "\n".join(lines) + "\n"


def _json_body(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n"


class Endpoints:
    """Renders each endpoint's answer from the state, once per state version (or metrics change)."""

    def __init__(
        self,
        state: DaemonState,
        metrics: DaemonMetrics,
        *,
        secrets: tuple[str, ...] = (),
        livez_stale_s: float = 15.0,
        probe_interval_s: float | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.secrets = secrets
        self.livez_stale_s = livez_stale_s
        self.probe_interval_s = probe_interval_s
        self._version = -1
        self._page = self._readyz = self._readyz_verbose = self._report = _response(503, b"", TEXT)
        self._live = (_response(200, b'{"alive":true}\n', JSON), _response(503, b'{"alive":false}\n', JSON))
        self._metrics_src: bytes | None = None
        self._metrics: Reply = _response(503, b"", TEXT)
        self.method_not_allowed = _response(
            405, _json_body({"error": "only GET and HEAD"}), JSON, extra=((b"Allow", b"GET, HEAD"),)
        )
        self.not_found = _response(404, _json_body({"error": "not found", "endpoints": list(_PATHS)}), JSON)
        # ``?verbose`` (the Kubernetes API server's convention): the same status, one line per check
        self.verbose_routes: dict[bytes, Callable[[], Reply]] = {b"/readyz": self.readyz_verbose}
        self.routes: dict[bytes, Callable[[], Reply]] = {
            b"/readyz": self.readyz,
            b"/livez": self.livez,
            b"/metrics": self.metrics_reply,
            b"/report": self.report,
            b"/": self.status_page,
        }

    def _refresh(self) -> None:
        s = self.state
        if s.version == self._version:
            return
        body: dict[str, Any] = {
            "ready": s.ready,
            "verdict": s.verdict(),
            "partial": s.report.partial if s.report is not None else False,
            "phase": s.phase,
        }
        if not s.ready:
            body["reason"] = s.reason
            body["failed"] = s.failed_ids()
        self._readyz = _response(200 if s.ready else 503, _json_body(body), JSON)
        self._readyz_verbose = _response(
            200 if s.ready else 503, readyz_verbose(s, self.secrets).encode("utf-8"), TEXT
        )
        if s.report is None:
            self._report = _response(
                503, _json_body({"error": "no check has finished yet", "phase": s.phase}), JSON
            )
        else:
            text = render(s.report, "json", secrets=self.secrets).encode()
            self._report = _response(200, text, JSON)
        self._page = _response(200, self._render_page().encode("utf-8"), HTML, extra=PAGE_HEADERS)
        self._version = s.version

    def _render_page(self) -> str:

        s = self.state
        view = SidecarView(
            ready=s.ready,
            phase=s.phase,
            reason=s.reason,
            last_run_end=s.last_run_end,
            probe_interval_s=self.probe_interval_s,
            probe_history=tuple(s.history.probe),
            server_history=tuple(s.history.server),
        )
        if s.report is None:
            return waiting_page(view)
        return page(s.report, secrets=self.secrets, view=view)

    def status_page(self) -> Reply:
        """``GET /``: the HTML status page (``validator.outputs.html``), re-rendered on each change."""
        self._refresh()
        return self._page

    def readyz(self) -> Reply:
        self._refresh()
        return self._readyz

    def readyz_verbose(self) -> Reply:
        self._refresh()
        return self._readyz_verbose

    def report(self) -> Reply:
        self._refresh()
        return self._report

    def livez(self) -> Reply:
        return self._live[0] if self.state.alive(self.livez_stale_s) else self._live[1]

    def metrics_reply(self) -> Reply:
        text = self.metrics.render()
        if text is not self._metrics_src:
            self._metrics = _response(200, text, CONTENT_TYPE)
            self._metrics_src = text
        return self._metrics


class _Protocol(asyncio.Protocol):
    """One client connection, its requests read by an ``h11.Connection`` and answered in order. When the
    client does not read its replies the transport's buffer passes the high-water mark, ``pause_writing``
    stops both answering and reading (so neither the output buffer nor the pending input can grow), and
    ``resume_writing`` picks up where it stopped. The server's reaper closes connections that stall (see
    :class:`SidecarServer`)."""

    def __init__(self, endpoints: Endpoints, server: SidecarServer) -> None:
        self.ep = endpoints
        self.server = server
        # h11 refuses (431) a head still incomplete past MAX_HEAD; _answer refuses a complete one past it.
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.transport: asyncio.Transport | None = None
        self.last = time.monotonic()
        self.request_started: float | None = None  # first byte of a request whose head is incomplete
        self.paused_since: float | None = None  # the client stopped reading our replies

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
        if self.transport is not None:
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
        while (t := self.transport) is not None and not t.is_closing() and self.paused_since is None:
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
        if request.method not in (b"GET", b"HEAD"):
            reply = self.ep.method_not_allowed
        else:
            path, _, query = request.target.partition(b"?")
            route = self.ep.routes.get(path)
            if route is not None and _has_param(query, b"verbose"):
                route = self.ep.verbose_routes.get(path, route)
            reply = self.ep.not_found if route is None else route()
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


_PATHS = ("/", "/readyz", "/livez", "/metrics", "/report")
_ERRORS = {
    status: _response(
        status, _json_body({"error": _REASONS[status]}), JSON, extra=((b"Connection", b"close"),)
    )
    for status in (400, 413, 431, 501)
}


class SidecarServer:
    """The listening socket plus the set of open connections, with the bounds that keep a hostile client
    from starving the kubelet's probes:

    - at most ``max_connections`` at once (and never more than half the file-descriptor limit): a new
      connection at the cap evicts the stalest one, so slow clients cannot lock the kubelet's probe out;
    - a request head must arrive within ``header_timeout``, an idle keep-alive connection is closed after
      ``idle_timeout``, a client that stops reading is closed after ``write_timeout`` (its output is
      bounded meanwhile by back-pressure: at most ``WRITE_HIGH_WATER`` plus one reply is buffered);
    - errors of ``accept()`` (EMFILE when the descriptors run out) are logged once per minute, as one line
      with a count, instead of a traceback per retry."""

    def __init__(
        self,
        endpoints: Endpoints,
        *,
        max_connections: int = MAX_CONNECTIONS,
        header_timeout: float = HEADER_TIMEOUT_S,
        idle_timeout: float = IDLE_TIMEOUT_S,
        write_timeout: float = WRITE_TIMEOUT_S,
        log: Any = None,
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
        self._previous_handler: Any = None

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
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(8, soft // 2)
