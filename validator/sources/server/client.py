"""Async HTTP client for a live SGLang server (``/health``, ``/server_info``, ``/generate``, ...).

Every misbehaviour ends as one :class:`ServerError` naming the endpoint (``error``, exit 69). Transient
failures (connect, timeout, 502/503/504) are retried with bounded backoff, 4xx never. The API key goes only
in ``Authorization``; replies are redacted. Every request has a total deadline (httpx's read timeout
restarts per byte) and a decoded-size cap (``BODY_CAPS``); bodies decode in ``bounded_body`` and shapes are
checked in ``server.replies``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from validator.errors import InputError
from validator.redact import redact, redact_text, register_secret, safe_url
from validator.sources.server.bounded_body import BoundedBody, MiB, stream_lines
from validator.sources.server.replies import (
    Generation,
    ServerError,
    expect_object,
    parse_generation,
    parse_json,
)
from validator.trusted_files import UnsafeLocation, read_guarded

__all__ = ["API_KEY_ENV", "BODY_CAPS", "Generation", "SGLangClient", "ServerError", "load_api_key"]

API_KEY_ENV = "SPARK_VALIDATE_API_KEY"
TRANSIENT_STATUS = frozenset({502, 503, 504})

# Decoded-size caps per endpoint. Real replies: /server_info ~20 KB, /model_info < 1 KB, one /generate
# reply a few KB, /metrics ~100 KB; /weights_checker lists every parameter (a few MB for 124B).
BODY_CAPS: dict[str, int] = {
    "/health": 64 * 1024,
    "/server_info": 8 * MiB,
    "/get_server_info": 8 * MiB,
    "/model_info": 1 * MiB,
    "/get_model_info": 1 * MiB,
    "/generate": 8 * MiB,
    "/metrics": 16 * MiB,
    "/weights_checker": 16 * MiB,  # ~30k parameters x ~100 bytes: a few MB
}
DEFAULT_BODY_CAP = 8 * MiB
SSE_TOTAL_CAP = 64 * MiB  # a whole stream (max_new_tokens is capped far below this)
# Total deadline of one request (all its bytes), for everything but /generate, whose deadline is the
# probe's (``read_timeout``): a server that answers /health at all answers it in milliseconds.
INFO_TIMEOUT_S = 10.0
MAX_BACKOFF_S = 4.0  # the longest pause between two attempts


def load_api_key(path: str | Path | None, env: Mapping[str, str] | None = None) -> str | None:
    """The key from ``--api-key-file`` (first line, stripped), else ``$SPARK_VALIDATE_API_KEY``, else None.
    Keys never come from the command line, where ``ps`` would show them."""
    if path is not None:
        p = Path(path)
        try:  # a regular file, small; no link another user could have planted is followed (its target,
            # a file only root may read, would otherwise be sent to the URL as the key)
            data, _ = read_guarded(p, 64 * 1024, what="API key file", links_from=(os.geteuid(),))
            text = data.decode("utf-8")
        except FileNotFoundError:
            raise InputError(str(p), "cannot read API key file: no such file") from None
        except UnsafeLocation as exc:
            raise InputError(str(p), str(exc).removeprefix(f"{p}: ")) from None
        except UnicodeDecodeError:
            raise InputError(str(p), "API key file is not UTF-8 text") from None
        key = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not key:
            raise InputError(str(p), "API key file is empty")
        register_secret(key)  # scrubbed from every message from now on, wherever a server echoes it
        return _sendable(key, str(p))
    value = (os.environ if env is None else env).get(API_KEY_ENV, "").strip()
    if value:
        register_secret(value)
        _sendable(value, f"${API_KEY_ENV}")
    return value or None


def _sendable(key: str, where: str) -> str:
    """A key an ``Authorization`` header can carry: visible ASCII only. Anything else (a NUL, a control or
    a non-ASCII character) made httpx fail with a message quoting the key, escaped past the redactor."""
    if not all(0x20 < ord(c) < 0x7F for c in key):
        raise InputError(where, "the API key holds a space, a control or a non-ASCII character (never sent)")
    return key


class SGLangClient:
    """One server, one connection pool: ``async with SGLangClient(url, api_key=...) as c``. ``INFO_TIMEOUT_S``
    and ``read_timeout`` are total deadlines (state endpoints, ``/generate``); URL credentials are sent as
    basic auth but never shown."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise InputError("--url", f"expected http:// or https://, got {safe_url(url)!r}")
        self.url = safe_url(url).rstrip("/")
        self.retries = max(0, retries)
        self.backoff = backoff
        self.read_timeout = read_timeout
        self.info_timeout = INFO_TIMEOUT_S
        self._secrets = (api_key,) if api_key else ()
        if api_key:
            register_secret(api_key)
        headers = {"Accept-Encoding": "gzip, deflate"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        timeout = httpx.Timeout(min(read_timeout, INFO_TIMEOUT_S * 3), connect=connect_timeout)
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers=headers,
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
        )
        self.server_info_endpoint = "/server_info"
        # httpcore imports anyio's asyncio backend at the first request; done here instead, so
        # a caller that builds the client in a worker thread keeps that off its event loop.
        with contextlib.suppress(ImportError):
            importlib.import_module("anyio._backends._asyncio")

    def __repr__(self) -> str:  # never shows the key
        return f"SGLangClient({self.url!r})"

    async def __aenter__(self) -> SGLangClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def endpoint(self, path: str) -> str:
        return f"{self.url}{path}"

    def _transport_reason(self, exc: BaseException) -> str:
        return f"connection failed ({type(exc).__name__}: {redact_text(str(exc), self._secrets)[:200]})"

    async def _fetch(
        self, method: str, path: str, *, json_body: Any, timeout: float, read_body: bool
    ) -> tuple[int, bytes]:
        """One request whose every byte arrives within ``timeout`` seconds, body capped (and read only
        for a 2xx when ``read_body``); raises ServerError (transient for timeouts and transport errors)."""
        ep = self.endpoint(path)
        cap = BODY_CAPS.get(path, DEFAULT_BODY_CAP)

        async def go() -> tuple[int, bytes]:
            async with self._http.stream(method, path, json=json_body) as resp:
                if not (read_body and 200 <= resp.status_code < 300):
                    return resp.status_code, b""
                return resp.status_code, await _read_body(ep, resp, cap)

        try:
            return await asyncio.wait_for(go(), timeout=max(0.001, timeout))
        except asyncio.TimeoutError:
            raise ServerError(
                ep, f"timed out (no complete reply within {timeout:.1f} s)", transient=True
            ) from None
        except httpx.TimeoutException as exc:
            raise ServerError(ep, f"timed out ({type(exc).__name__})", transient=True) from None
        except (httpx.HTTPError, httpx.StreamError, UnicodeError) as exc:
            raise ServerError(ep, self._transport_reason(exc), transient=True) from None

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        timeout: float | None = None,
    ) -> bytes:
        """Send with bounded retries on transient failures, all within one deadline (``timeout``, default
        ``info_timeout``); return the capped body of a 200 reply."""
        ep = self.endpoint(path)
        deadline = time.monotonic() + (self.info_timeout if timeout is None else timeout)
        attempts = 1 + self.retries
        delay = self.backoff
        last = "no attempt made"
        made = 0
        for attempt in range(attempts):
            if attempt:
                pause = min(delay, MAX_BACKOFF_S)
                if time.monotonic() + pause >= deadline:
                    break
                await asyncio.sleep(pause)
                delay *= 2
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            made += 1
            try:
                status, body = await self._fetch(
                    method, path, json_body=json_body, timeout=remaining, read_body=True
                )
            except ServerError as exc:
                if not exc.transient:
                    raise
                last = exc.reason
                continue
            if status == 200:
                return body
            if status in TRANSIENT_STATUS:
                last = f"HTTP {status}"
                continue
            raise ServerError(ep, _status_reason(status, key_sent=bool(self._secrets)), status)
        suffix = f" after {made} attempts" if made > 1 else ""
        status_code = int(last[5:]) if last.startswith("HTTP ") else None
        raise ServerError(ep, f"{last}{suffix}", status_code, transient=True)

    async def _json(self, method: str, path: str, json_body: Any = None, timeout: float | None = None) -> Any:
        body = await self._request(method, path, json_body=json_body, timeout=timeout)
        return parse_json(self.endpoint(path), body)

    async def _get_either(self, path: str, deprecated: str, timeout: float | None = None) -> tuple[str, Any]:
        """``GET path``, or ``GET deprecated`` when the build answers 404 (older builds): (the path that
        answered, its JSON)."""
        try:
            return path, await self._json("GET", path, timeout=timeout)
        except ServerError as exc:
            if exc.status != 404:
                raise
        return deprecated, await self._json("GET", deprecated, timeout=timeout)

    async def health(self, timeout: float | None = None) -> int:
        """The status code of one ``GET /health`` (no retries: readiness polling owns the loop), within
        ``timeout`` seconds (default ``info_timeout``); its body is never read.
        Raises ServerError when no HTTP answer came at all."""
        status, _ = await self._fetch(
            "GET",
            "/health",
            json_body=None,
            timeout=self.info_timeout if timeout is None else timeout,
            read_body=False,
        )
        return status

    async def server_info(self, timeout: float | None = None) -> dict[str, Any]:
        """``/server_info`` (or the deprecated ``/get_server_info`` on 404), redacted."""
        self.server_info_endpoint, raw = await self._get_either("/server_info", "/get_server_info", timeout)
        info = expect_object(self.endpoint(self.server_info_endpoint), raw)
        states = info.get("internal_states")
        if states is not None and not (isinstance(states, list) and all(isinstance(s, dict) for s in states)):
            ep = self.endpoint(self.server_info_endpoint)
            raise ServerError(ep, "internal_states: expected a list of objects")
        return dict(redact(info, secrets=self._secrets))

    async def model_info(self) -> dict[str, Any]:
        path, raw = await self._get_either("/model_info", "/get_model_info")
        info = expect_object(self.endpoint(path), raw)
        archs = info.get("architectures")
        if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
            raise ServerError(self.endpoint(path), "architectures: expected a list of strings")
        return dict(redact(info, secrets=self._secrets))

    async def generate(self, payload: dict[str, Any]) -> Generation:
        """Non-streaming ``POST /generate`` for one prompt, within ``read_timeout``."""
        body = {**payload, "stream": False}
        t0 = time.perf_counter()
        raw = await self._json("POST", "/generate", json_body=body, timeout=self.read_timeout)
        gen = parse_generation(self.endpoint("/generate"), raw)
        return Generation(gen.text, gen.output_ids, gen.meta_info, None, time.perf_counter() - t0)

    async def generate_stream(self, payload: dict[str, Any]) -> Generation:
        """Streaming ``POST /generate``: the final frame, plus the client-side time to the first frame
        that carries generated text (TTFT as a user sees it). Not retried once bytes have arrived.
        Bounded: the whole stream within ``read_timeout``, each line under ``SSE_LINE_CAP``."""
        ep = self.endpoint("/generate")
        try:
            return await asyncio.wait_for(self._stream(ep, payload), timeout=self.read_timeout)
        except asyncio.TimeoutError:
            raise ServerError(ep, f"timed out while streaming (over {self.read_timeout:g} s)") from None
        except httpx.TimeoutException:
            raise ServerError(ep, "timed out while streaming") from None
        except (httpx.HTTPError, httpx.StreamError, UnicodeError) as exc:
            raise ServerError(ep, f"stream broken ({type(exc).__name__})") from None

    async def _stream(self, ep: str, payload: dict[str, Any]) -> Generation:
        body = {**payload, "stream": True}
        t0 = time.perf_counter()
        ttft: float | None = None
        last: Any = None
        done = False
        async with self._http.stream("POST", "/generate", json=body) as resp:
            if resp.status_code != 200:
                raise ServerError(
                    ep, _status_reason(resp.status_code, key_sent=bool(self._secrets)), resp.status_code
                )
            if "text/event-stream" not in resp.headers.get("content-type", ""):
                whole = await _read_body(ep, resp, BODY_CAPS["/generate"])
                gen = parse_generation(ep, parse_json(ep, whole))
                return Generation(gen.text, gen.output_ids, gen.meta_info, None, time.perf_counter() - t0)
            encodings, chunks = _raw_body(resp)
            decoder = BoundedBody(ep, encodings, SSE_TOTAL_CAP, keep=False)
            async for line in stream_lines(ep, chunks, decoder):
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                last = parse_json(ep, data)
                frame = expect_object(ep, last, "stream frame")
                if ttft is None and frame.get("text"):
                    ttft = time.perf_counter() - t0
        if last is None:
            raise ServerError(ep, "stream ended without a data frame")
        if not done:
            raise ServerError(ep, "stream ended without data: [DONE]")
        gen = parse_generation(ep, last)
        return Generation(gen.text, gen.output_ids, gen.meta_info, ttft, time.perf_counter() - t0)

    async def metrics_text(self) -> str:
        """Prometheus text from ``/metrics`` (404 when the server runs without ``--enable-metrics``)."""
        body = await self._request("GET", "/metrics")
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ServerError(self.endpoint("/metrics"), f"body is not UTF-8 (byte {exc.start})") from None

    async def weights_checker(self) -> dict[str, str]:
        """Per-parameter checksums from ``/weights_checker`` (``action=checksum``), merged over ranks.
        Expensive on a real server: it hashes every weight; callers make it opt-in."""
        ep = self.endpoint("/weights_checker")
        body = {"action": "checksum", "selector": "all"}
        raw = await self._json("POST", "/weights_checker", body, timeout=self.read_timeout)  # hashes all
        obj = expect_object(ep, raw)
        if obj.get("success") is False:
            raise ServerError(ep, f"server reported failure: {str(obj.get('message'))[:200]}")
        ranks = obj.get("ranks")
        if not isinstance(ranks, list) or not ranks:
            raise ServerError(ep, "ranks: expected a non-empty list")
        merged: dict[str, str] = {}
        for i, rank in enumerate(ranks):
            r = expect_object(ep, rank, f"ranks[{i}]")
            sums = r.get("checksums")
            if not isinstance(sums, dict) or not all(isinstance(v, str) for v in sums.values()):
                raise ServerError(ep, f"ranks[{i}].checksums: expected an object of strings")
            merged.update(sums)
        return merged


def _raw_body(resp: httpx.Response) -> tuple[list[str], AsyncIterator[bytes]]:
    """The body's content codings and its raw (still encoded) chunks. A response that its transport has
    already read whole (``httpx.MockTransport`` does) is already decoded: its content, no codings."""
    if resp.is_stream_consumed:

        async def whole() -> AsyncIterator[bytes]:
            yield resp.content

        return [], whole()
    return resp.headers.get_list("content-encoding"), resp.aiter_raw()


async def _read_body(endpoint: str, resp: httpx.Response, cap: int) -> bytes:
    """The whole body, decoded within ``cap`` (a declared length over it is refused before reading)."""
    _check_length(endpoint, resp, cap)
    encodings, chunks = _raw_body(resp)
    body = BoundedBody(endpoint, encodings, cap)
    async for raw in chunks:
        await body.feed(raw)
    return body.finish()


def _check_length(endpoint: str, resp: httpx.Response, cap: int) -> None:
    """Refuse a declared body over the cap before reading it; two different lengths are refused too."""
    values = {v.strip() for v in resp.headers.get_list("content-length")}
    if len(values) > 1:
        raise ServerError(endpoint, "conflicting Content-Length headers")
    if values:
        (value,) = values
        if (
            value.isascii()
            and value.isdigit()
            and len(value) < 20
            and int(value) > cap
            and not resp.headers.get("content-encoding")
        ):
            raise ServerError(endpoint, f"body of {value} bytes is over the {cap}-byte cap")


def _status_reason(status: int, *, key_sent: bool) -> str:
    """A refused key and a missing key need different fixes: say which one happened."""
    if status in (401, 403) and key_sent:
        return (
            f"HTTP {status} (the server refused the API key given: check --api-key-file or "
            f"${API_KEY_ENV} against the server's --api-key)"
        )
    if status in (401, 403):
        return (
            f"HTTP {status} (the server needs an API key and none was given: use --api-key-file or "
            f"${API_KEY_ENV})"
        )
    if status == 404:
        return "HTTP 404 (endpoint not found)"
    return f"HTTP {status}"
