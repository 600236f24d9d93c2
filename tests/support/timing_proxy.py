"""A reverse proxy in front of the simulator that scales the timings ``/generate`` reports, for the
``perf.tpot`` tests: a server (or a broken metrics path) claiming decode speeds the hardware cannot reach.

Everything else passes through unchanged; a streaming ``/generate`` is answered with the final JSON
object (the client accepts a non-event-stream reply), whose ``e2e_latency`` and ``first_token_latency``
are multiplied by ``factor``. Served on a real 127.0.0.1 socket (``tests.support.probe_live_server.serve``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.probe_live_server import serve

TIMING_KEYS = ("e2e_latency", "first_token_latency")


def _app(upstream: str, factor: float) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=60)

    async def forward(request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        if path == "/generate" and body:
            doc = json.loads(body)
            doc["stream"] = False
            body = json.dumps(doc).encode()
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")}
        resp = await client.request(request.method, path, content=body, headers=headers)
        content = resp.content
        if path == "/generate" and resp.status_code == 200:
            doc = json.loads(content)
            meta = doc.get("meta_info") or {}
            for key in TIMING_KEYS:
                if isinstance(meta.get(key), (int, float)):
                    meta[key] = meta[key] * factor
            content = json.dumps(doc).encode()
        kept = {"content-type": resp.headers.get("content-type", "application/json")}
        return Response(content, status_code=resp.status_code, headers=kept)

    methods = ["GET", "POST"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)])


@contextmanager
def timing_proxy(upstream: str, factor: float) -> Iterator[str]:
    """``upstream``'s API on a new loopback URL, its reported decode timings multiplied by ``factor``."""
    with serve(_app(upstream, factor)) as url:
        yield url
