"""A response body in parts for ``httpx.MockTransport``, for the client tests that need the body unread when
the response arrives (the transport reads plain ``content`` whole): decoding, size caps and bad framing are
then met chunk by chunk, as from a socket."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


class ChunkedBody(httpx.AsyncByteStream):
    """Yields ``parts`` one by one, as a network stream delivers them."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for p in self.parts:
            yield p
