"""A server reply's body, decoded within a cap: gzip/deflate inflated by us with ``max_length``, and an event
stream cut into bounded lines.

httpx inflates a whole chunk at once (a gzip bomb's 1,000:1 included) and raises a ``DecodingError`` that is
no ``TransportError``; here no more than the cap plus one byte ever exists decoded, inflating yields to the
event loop, and every way a body goes wrong is one :class:`ServerError`.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from typing import Any

from validator.sources.server.replies import ServerError

MiB = 1024 * 1024
SSE_LINE_CAP = 1 * MiB  # one ``data:`` frame of /generate
STREAM_CHUNK_CAP = 4 * MiB  # decoded bytes from one network chunk of a stream (its lines are cut after)
INFLATE_STEP = 256 * 1024  # decoded bytes per zlib call between yields to the event loop


class BoundedBody:
    """Collects a reply body, decoding ``Content-Encoding`` gzip/deflate ourselves with ``max_length``,
    so no more than ``cap + 1`` decoded bytes ever exist, however the server compressed them."""

    def __init__(self, endpoint: str, encodings: list[str], cap: int, *, keep: bool = True) -> None:
        self.endpoint = endpoint
        self.cap = cap
        self.keep = keep  # False for a stream: its lines are consumed as they come
        self.size = 0
        self.parts: list[bytes] = []
        codings = [c.strip().lower() for h in encodings for c in h.split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self._coding = ""  # "gzip" (x-gzip too) or "deflate" when the body is compressed
        self._z: Any = None
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            shown = ", ".join(codings)[:60]
            raise ServerError(endpoint, f"unsupported Content-Encoding {shown!r}")
        if codings:
            self._coding = "deflate" if codings[0] == "deflate" else "gzip"
            # gzip: wbits 31; deflate: zlib-wrapped (15) as RFC 9110 says (raw deflate is refused).
            self._z = zlib.decompressobj(wbits=31 if self._coding == "gzip" else 15)

    def _keep(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.cap:
            raise ServerError(self.endpoint, f"body over the {self.cap}-byte cap")
        if data and self.keep:
            self.parts.append(data)

    async def feed(self, data: bytes) -> bytes:
        """Add raw bytes; returns the newly decoded bytes when the body is not kept (a stream's lines),
        else ``b""`` (see :meth:`finish`). Compressed data is inflated in ``INFLATE_STEP`` slices with a
        yield to the event loop between them: 64 KiB of a gzip bomb is 8 MiB of output, tens of ms of CPU
        that must not delay the sidecar's ``/livez``."""
        if self._z is None:
            self._keep(data)
            return b"" if self.keep else data
        out: list[bytes] = []
        produced = 0
        buf = data
        try:
            while buf and not self._z.eof:
                chunk = self._z.decompress(buf, min(INFLATE_STEP, self.cap + 1 - self.size))
                self._keep(chunk)
                if not self.keep:
                    out.append(chunk)
                    produced += len(chunk)
                    if produced > STREAM_CHUNK_CAP:  # no real event stream inflates 1,000:1
                        raise ServerError(self.endpoint, f"one chunk inflates past {STREAM_CHUNK_CAP} bytes")
                buf = self._z.unconsumed_tail
                if buf:
                    await asyncio.sleep(0)
            if self._z.eof and (self._z.unused_data or buf):
                raise ServerError(self.endpoint, f"data after the end of the {self._coding} body")
        except zlib.error as exc:
            raise ServerError(self.endpoint, f"body is not valid {self._coding} ({exc})") from None
        return b"".join(out)

    def finish(self) -> bytes:
        if self._z is not None:
            try:
                self._keep(self._z.flush())
            except zlib.error as exc:
                raise ServerError(self.endpoint, f"body is not valid {self._coding} ({exc})") from None
            if not self._z.eof:
                raise ServerError(self.endpoint, f"{self._coding} body is truncated")
        return b"".join(self.parts)


async def stream_lines(
    endpoint: str, raw: AsyncIterator[bytes], decoder: BoundedBody
) -> AsyncIterator[bytes]:
    """The lines of an event stream (``\n`` or ``\r\n``), each at most ``SSE_LINE_CAP`` bytes, the whole
    stream at most the decoder's cap."""
    pending = b""
    async for chunk in raw:
        *lines, pending = (pending + await decoder.feed(chunk)).split(b"\n")
        for line in lines:
            if len(line) > SSE_LINE_CAP:
                break
            yield line.rstrip(b"\r")
        if len(pending) > SSE_LINE_CAP or any(len(line) > SSE_LINE_CAP for line in lines):
            raise ServerError(endpoint, f"event-stream line over the {SSE_LINE_CAP}-byte cap")
    decoder.finish()
    if pending.strip():
        yield pending.rstrip(b"\r")
