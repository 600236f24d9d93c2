"""API-key checking exactly as SGLang 0.5.23 does it (``srt/utils/auth.py`` l.98-200): a middleware before
every route, unknown paths included; ``OPTIONS`` and paths starting ``/health``, ``/ready``, ``/metrics``
always pass; else ``Authorization`` splits on its first space into ``bearer`` (any case) and the key,
compared in constant time; refusal is 401 ``{"error": "Unauthorized"}``.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

_OPEN_PREFIXES = ("/health", "/ready", "/metrics")


def allowed(*, method: str, path: str, authorization: str | None, api_key: str | None) -> bool:
    """``decide_request_auth`` for a server with ``--api-key`` and no ``--admin-api-key``."""
    if method == "OPTIONS" or path.startswith(_OPEN_PREFIXES) or not api_key:
        return True
    if not authorization:
        return False
    parts = authorization.split(" ", 1)
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return False
    return secrets.compare_digest(parts[1].encode(), api_key.encode())


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, *, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.api_key is None:
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope.get("headers") or [])
        raw = headers.get(b"authorization")
        authorization = raw.decode("latin-1") if raw is not None else None
        if allowed(
            method=scope["method"], path=scope["path"], authorization=authorization, api_key=self.api_key
        ):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "Unauthorized"}, separators=(",", ":")).encode()
        start: dict[str, Any] = {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
        await send(start)
        await send({"type": "http.response.body", "body": body})
