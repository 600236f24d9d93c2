"""The tests' own HTTP requests, through one client per process.

``httpx.get`` builds a client per call, and with it an SSL context that loads the CA bundle: about 36 ms
of CPU per request, which a poll loop (every 50 ms, for a minute) pays over and over. This client keeps
what ``httpx.get`` would do (a new connection per request: no keep-alive; no cookies carried from one
request to the next; the same defaults) and builds the context once.
"""

from __future__ import annotations

from typing import Any

import httpx

_CLIENT = httpx.Client(timeout=5.0, limits=httpx.Limits(max_keepalive_connections=0))


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    _CLIENT.cookies.clear()
    return _CLIENT.request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return request("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return request("POST", url, **kwargs)
