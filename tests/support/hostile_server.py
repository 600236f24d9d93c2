"""A hostile SGLang lookalike on loopback: raw asyncio sockets, one attack per mode, for the
regression tests and ``bench/hostile.py``.

Endpoints not under attack answer as the healthy simulator does (its real ``/server_info`` and
``/model_info``), so each mode exercises exactly one misbehaviour. Written on raw sockets on purpose: a web
framework would refuse to send most of these replies (two lengths, endless chunked bodies, a gzip header
over plain text, a status line dripped a byte a second).

Run as ``python -m tests.support.hostile_server MODE PORT`` (prints ``listening`` once bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import zlib
from collections.abc import Iterator
from typing import Any

ECHO_KEY_FIELD = "last_request_header"  # a name no redactor knows: only the registered value can catch it


def healthy_state() -> tuple[dict[str, Any], dict[str, Any]]:
    """The healthy simulator's ``/server_info`` and ``/model_info`` documents."""
    from validator.sim.engine import SimConfig, SimEngine
    from validator.sim.scenarios import resolve

    engine = SimEngine(SimConfig(scenario=resolve("healthy"), startup_seconds=0))
    return engine.server_info(), engine.model_info()


def _gzip_bomb(decoded: int = 256 << 20) -> bytes:
    """``decoded`` zero bytes gzip-compressed (about 1,000:1: 256 MiB in ~260 KB), in 16 MiB steps."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(16 << 20)
    parts = [z.compress(block) for _ in range(decoded // len(block))]
    parts.append(z.flush())
    return b"".join(parts)


# mode -> what it attacks; "all" modes hit every endpoint, so /health alone is no way around them.
MODES: dict[str, str] = {
    "endless_body": "every endpoint: 200 with an endless chunked body",
    "endless_length": "every endpoint: Content-Length 10^12, then an endless body",
    "gzip_bomb": "every endpoint: 200, Content-Encoding gzip, 256 MiB of zeros in ~260 KB",
    "bad_gzip": "every endpoint: 200, Content-Encoding gzip over a body that is not gzip",
    "drip": "every endpoint: the status line one byte per second",
    "silent": "accepts connections and never answers",
    "nested": "/server_info: lists nested 500 deep",
    "endless_sse": "/generate: an endless event-stream line",
    "echo_key": "/server_info, /generate: echo the Authorization header back (a leaky server)",
    "ansi": "/generate: an error message carrying terminal control sequences that redraw it as PASS",
    "markup": "/generate: an error message carrying HTML that would end the status page's table and run",
    "metrics_labels": "/metrics: one sglang:spec_accept_length series carrying 250,000 labels (2.8 MB)",
    "metrics_series": "/metrics: sglang:generation_tokens_total in 200,000 series (8 MB)",
    "wide_json": "/server_info: the healthy document plus 2 million one-element lists (7 MB)",
    "metrics_escapes": "/metrics: the five families read, 256 series each, 1,990 escaped quotes a line",
}
ANSI_MESSAGE = "\x1b[1A\x1b[2K\r  PASS  spec.accept_length  \x1b]0;owned\x07\u202e"
# Closes the status page's table and cell, then tries a script, an event handler and an element of its own.
MARKUP_MESSAGE = (
    '</p></td></tr></table><script>document.title="PWNED"</script>'
    '<img src=x onerror="document.title=\'PWNED\'"><b id="pwned">owned</b>'
)
LEAK_MODES = frozenset({"echo_key", "ansi", "markup"})  # about what reaches the user, not about bounds
# About time spent parsing a reply that is otherwise served as the healthy simulator's: the server is
# reachable, so these end in a verdict (not 69), with the reading refused and said so.
PARSE_MODES = frozenset({"metrics_labels", "metrics_series", "wide_json", "metrics_escapes"})
ALL_ENDPOINTS = {"endless_body", "endless_length", "gzip_bomb", "bad_gzip", "drip", "silent"}


class Hostile:
    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.info, self.model = healthy_state()
        self.bomb = _gzip_bomb() if mode == "gzip_bomb" else b""
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
                }
                body = b""
                if "content-length" in headers:
                    body = await reader.readexactly(int(headers["content-length"]))
                if not await self.answer(writer, method, path.split("?")[0], headers, body):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, asyncio.LimitOverrunError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def answer(
        self, w: asyncio.StreamWriter, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> bool:
        """Write one reply; False closes the connection."""
        mode = self.mode
        if mode == "silent":
            await asyncio.sleep(3600)
            return False
        if mode == "drip":
            for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}" * 1000:
                w.write(bytes([b]))
                await w.drain()
                await asyncio.sleep(1.0)
            return False
        if mode in ALL_ENDPOINTS:
            await self._attack_body(w)
            return False
        if path == "/health":
            self._reply(w, 200, b"")
        elif path in ("/server_info", "/get_server_info"):
            if mode == "nested":
                self._reply(w, 200, b'{"internal_states": [{}], "x": ' + b"[" * 500 + b"]" * 500 + b"}")
            elif mode == "wide_json":  # millions of small containers: the parse, not the bytes, is the cost
                doc_text = json.dumps(self.info)[:-1] + ', "x": [' + ",".join(["[1]"] * 2_000_000) + "]}"
                self._reply(w, 200, doc_text.encode())
            elif mode == "echo_key":
                doc = {**self.info, ECHO_KEY_FIELD: headers.get("authorization", "")}
                self._reply(w, 200, json.dumps(doc).encode())
            else:
                self._reply(w, 200, json.dumps(self.info).encode())
        elif path in ("/model_info", "/get_model_info"):
            self._reply(w, 200, json.dumps(self.model).encode())
        elif path == "/metrics" and mode.startswith("metrics_"):
            self._reply(w, 200, _hostile_metrics(mode), b"text/plain; version=0.0.4")
        elif path == "/generate" and mode == "endless_sse":
            w.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            await self._chunks(w, self._endless(b"data: " + b"a" * 65536))
            return False
        elif path == "/generate" and mode == "echo_key":
            msg = {"error": {"message": f"bad request from {headers.get('authorization', '')}"}}
            self._reply(w, 200, json.dumps(msg).encode())
        elif path == "/generate" and mode == "ansi":
            self._reply(w, 200, json.dumps({"error": {"message": ANSI_MESSAGE}}).encode())
        elif path == "/generate" and mode == "markup":
            self._reply(w, 200, json.dumps({"error": {"message": MARKUP_MESSAGE}}).encode())
        else:
            self._reply(w, 404, b'{"detail": "Not Found"}')
        await w.drain()
        return True

    @staticmethod
    def _endless(first: bytes, filler: bytes = b"a" * 65536) -> Iterator[bytes]:
        yield first
        while True:
            yield filler

    @staticmethod
    async def _chunks(w: asyncio.StreamWriter, parts: Iterator[bytes]) -> None:
        for part in parts:
            w.write(b"%x\r\n%s\r\n" % (len(part), part))
            await w.drain()

    async def _attack_body(self, w: asyncio.StreamWriter) -> None:
        mode = self.mode
        if mode == "endless_body":
            w.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            await self._chunks(w, self._endless(b'{"a": "', b" " * 65536))
        elif mode == "endless_length":
            w.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"
            )
            while True:
                w.write(b" " * 65536)
                await w.drain()
        elif mode == "gzip_bomb":
            w.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                b"Content-Length: %d\r\n\r\n" % len(self.bomb)
            )
            w.write(self.bomb)
            await w.drain()
        elif mode == "bad_gzip":
            junk = b'{"this": "is not gzip"}'
            w.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(junk), junk)
            )
            await w.drain()

    @staticmethod
    def _reply(w: asyncio.StreamWriter, status: int, body: bytes, ctype: bytes = b"application/json") -> None:
        w.write(
            b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (status, ctype, len(body), body)
        )


def _hostile_metrics(mode: str) -> bytes:
    """The Prometheus text of a ``PARSE_MODES`` mode: well-formed, each within the 16 MiB body cap."""
    if mode == "metrics_labels":  # prometheus_client's label parser is quadratic in the label count
        labels = ",".join(f'l{i}="v"' for i in range(250_000))
        head = b"# TYPE sglang:spec_accept_length gauge\n"
        return head + b"sglang:spec_accept_length{%s} 1.0\n" % labels.encode()
    if mode == "metrics_escapes":  # each line under every per-line bound; its unescaping is the cost
        from validator.sources.server.metrics_reading import _WANTED

        value = b'\\"' * 1990
        lines = [
            b'%s{v="%s",series="%d"} 1.0' % (name.encode(), value, i)
            for name in sorted(_WANTED)
            for i in range(256)
        ]
        return b"\n".join(lines) + b"\n"
    lines = [b"# TYPE sglang:generation_tokens counter"]
    lines += [b'sglang:generation_tokens_total{model_name="m",series="%d"} 1.0' % i for i in range(200_000)]
    return b"\n".join(lines) + b"\n"


async def serve(mode: str, port: int, ready: asyncio.Event | None = None) -> None:
    hostile = Hostile(mode)
    server = await asyncio.start_server(hostile.handle, "127.0.0.1", port, limit=1 << 20)
    async with server:
        if ready is not None:
            ready.set()
        print("listening", flush=True)
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2])))


@contextlib.contextmanager
def hostile_process(mode: str) -> Iterator[str]:
    """The hostile server as a real process on a free loopback port; yields its URL, stops it after."""
    import subprocess

    from tests.support.loopback import free_port, stop, wait_listening
    from tests.support.sim_process import REPO

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.hostile_server", mode, str(port)],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_listening(port, proc, what=f"hostile server ({mode})", timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc, kill=True)
