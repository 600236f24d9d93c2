"""The sidecar's HTTP endpoints on a small asyncio protocol: ``/readyz``, ``/livez``, ``/metrics``,
``/report``.

Why not starlette + uvicorn (which the project depends on)? Every answer here is a pre-rendered byte
string read from the latched state, so a framework would only add per-request work: routing, scopes,
middleware and ASGI message passing cost more than the whole reply. A protocol that parses the request line,
skips the headers and writes one cached buffer keeps ``/readyz`` well under a millisecond with hundreds of
clients and the process small (no uvicorn in memory). It speaks HTTP/1.1 with keep-alive and pipelining,
HTTP/1.0, ``GET`` and ``HEAD`` only, refuses request bodies, and bounds the header size and idle time.

Nothing here can trigger a probe: the handlers only read the state (SGLang's own ``/health`` runs a
generation per call and piles up requests when a prober hammers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from validator.daemon.metrics import CONTENT_TYPE, DaemonMetrics
from validator.daemon.state import DaemonState
from validator.outputs.safe import safe_dict

MAX_HEAD = 8192  # bytes of request line + headers
IDLE_TIMEOUT_S = 30.0
JSON = "application/json"

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def _response(status: int, body: bytes, ctype: str, *, close: bool = False) -> tuple[bytes, bytes]:
    """(head, body) so that HEAD can send the head alone."""
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"Cache-Control: no-store\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
    ).encode("ascii")
    return head, body


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
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.secrets = secrets
        self.livez_stale_s = livez_stale_s
        self._version = -1
        self._readyz: tuple[bytes, bytes] = (b"", b"")
        self._report: tuple[bytes, bytes] = (b"", b"")
        self._live = (_response(200, b'{"alive":true}\n', JSON), _response(503, b'{"alive":false}\n', JSON))
        self._metrics_src: bytes | None = None
        self._metrics: tuple[bytes, bytes] = (b"", b"")
        self.routes: dict[bytes, Callable[[], tuple[bytes, bytes]]] = {
            b"/readyz": self.readyz,
            b"/livez": self.livez,
            b"/metrics": self.metrics_reply,
            b"/report": self.report,
        }

    def _refresh(self) -> None:
        s = self.state
        if s.version == self._version:
            return
        body = {"ready": s.ready, "verdict": s.verdict(), "phase": s.phase}
        if not s.ready:
            body["reason"] = s.reason
            body["failed"] = s.failed_ids()
        self._readyz = _response(200 if s.ready else 503, _json_body(body), JSON)
        if s.report is None:
            self._report = _response(
                503, _json_body({"error": "no check has finished yet", "phase": s.phase}), JSON
            )
        else:
            text = json.dumps(safe_dict(s.report, self.secrets), indent=2).encode() + b"\n"
            self._report = _response(200, text, JSON)
        self._version = s.version

    def readyz(self) -> tuple[bytes, bytes]:
        self._refresh()
        return self._readyz

    def report(self) -> tuple[bytes, bytes]:
        self._refresh()
        return self._report

    def livez(self) -> tuple[bytes, bytes]:
        return self._live[0] if self.state.alive(self.livez_stale_s) else self._live[1]

    def metrics_reply(self) -> tuple[bytes, bytes]:
        text = self.metrics.render()
        if text is not self._metrics_src:
            self._metrics = _response(200, text, CONTENT_TYPE)
            self._metrics_src = text
        return self._metrics


class _Protocol(asyncio.Protocol):
    def __init__(self, endpoints: Endpoints, conns: set[_Protocol]) -> None:
        self.ep = endpoints
        self.conns = conns
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.last = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conns.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.last = time.monotonic()
        self.buf = self.buf + data if self.buf else data
        while self.transport is not None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    self._fail(431)
                return
            head, self.buf = self.buf[:end], self.buf[end + 4 :]
            self._handle(head)

    def _fail(self, status: int) -> None:
        if self.transport is not None:
            h, b = _response(status, _json_body({"error": _REASONS[status]}), JSON, close=True)
            self.transport.write(h + b)
            self.transport.close()

    def _handle(self, head: bytes) -> None:
        assert self.transport is not None
        line, _, headers = head.partition(b"\r\n")
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return self._fail(400)
        method, target, version = parts
        lower = headers.lower()
        if b"transfer-encoding:" in lower or (b"content-length:" in lower and not _zero_length(lower)):
            return self._fail(413)  # no endpoint takes a body; refusing keeps the framing unambiguous
        keep = (
            b"connection: close" not in lower
            if version == b"HTTP/1.1"
            else b"connection: keep-alive" in lower
        )
        path = target.split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            h, b = _response(405, _json_body({"error": "only GET and HEAD"}), JSON, close=not keep)
            h = h.replace(b"\r\n\r\n", b"\r\nAllow: GET, HEAD\r\n\r\n", 1)
        else:
            route = self.ep.routes.get(path)
            if route is None:
                h, b = _response(
                    404, _json_body({"error": "not found", "endpoints": list(_PATHS)}), JSON, close=not keep
                )
            else:
                h, b = route()
                if not keep:
                    h = h[:-2] + b"Connection: close\r\n\r\n"
            if method == b"HEAD":
                b = b""
        self.transport.write(h + b if b else h)
        if not keep:
            self.transport.close()


_PATHS = ("/readyz", "/livez", "/metrics", "/report")


def _zero_length(lower_headers: bytes) -> bool:
    for raw in lower_headers.split(b"\r\n"):
        if raw.startswith(b"content-length:"):
            return raw.partition(b":")[2].strip() == b"0"
    return True


class SidecarServer:
    """The listening socket plus the set of open connections (closed on shutdown and when idle)."""

    def __init__(self, endpoints: Endpoints) -> None:
        self.endpoints = endpoints
        self.conns: set[_Protocol] = set()
        self.server: asyncio.Server | None = None
        self._reaper: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: _Protocol(self.endpoints, self.conns), host, port, backlog=1024, reuse_address=True
        )
        self._reaper = asyncio.create_task(self._reap_idle(), name="sidecar-idle-reaper")
        addr = self.server.sockets[0].getsockname()
        return str(addr[0]), int(addr[1])

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(IDLE_TIMEOUT_S / 3)
            cutoff = time.monotonic() - IDLE_TIMEOUT_S
            for c in list(self.conns):
                if c.last < cutoff and c.transport is not None:
                    c.transport.close()

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if self.server is not None:
            self.server.close()
            for c in list(self.conns):
                if c.transport is not None:
                    c.transport.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 0.5)
