"""Async HTTP client for a live SGLang server (``/health``, ``/server_info``, ``/generate``, ...).

Every way a server can misbehave (refused connection, timeout, 5xx, 401, a body that is not JSON or not
the expected shape) ends as one :class:`ServerError` whose one-line message names the endpoint, so
``check`` reports ``error``/exit 69 instead of a traceback. Transient failures (connect errors,
timeouts, 502/503/504) are retried a bounded number of times with exponential backoff; 4xx never is,
because asking again cannot fix a wrong key or a wrong path.

The API key goes only into the ``Authorization`` header; replies are redacted before they are returned
(SGLang's ``/server_info`` echoes ``api_key`` in clear).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from validator.errors import InputError, UnavailableError
from validator.redact import redact, redact_text

API_KEY_ENV = "SPARK_VALIDATE_API_KEY"
TRANSIENT_STATUS = frozenset({502, 503, 504})


class ServerError(UnavailableError):
    """The server could not give the evidence asked for; names the endpoint and what went wrong."""

    def __init__(
        self, endpoint: str, reason: str, status: int | None = None, *, transient: bool = False
    ) -> None:
        super().__init__(f"{endpoint}: {reason}")
        self.endpoint = endpoint
        self.reason = reason
        self.status = status
        self.transient = transient  # connect error, timeout or 502/503/504: may heal by itself


def load_api_key(path: str | Path | None, env: Mapping[str, str] | None = None) -> str | None:
    """The key from ``--api-key-file`` (first line, stripped), else ``$SPARK_VALIDATE_API_KEY``, else None.
    Keys never come from the command line, where ``ps`` would show them."""
    if path is not None:
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise InputError(str(p), f"cannot read API key file: {why}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(str(p), "API key file is not UTF-8 text") from None
        key = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not key:
            raise InputError(str(p), "API key file is empty")
        return key
    value = (os.environ if env is None else env).get(API_KEY_ENV, "").strip()
    return value or None


@dataclass(frozen=True)
class Generation:
    """One ``/generate`` reply, shape-checked. ``ttft_s`` is measured client-side when streamed."""

    text: str
    output_ids: list[int] | None
    meta_info: dict[str, Any]
    ttft_s: float | None = None
    wall_s: float | None = None


def parse_json(endpoint: str, body: bytes) -> Any:
    """Decode a JSON body, turning every decoder failure into a ServerError naming the byte offset."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServerError(endpoint, f"body is not UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise ServerError(endpoint, "empty body, expected JSON")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ServerError(endpoint, f"invalid JSON at byte {exc.pos}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise ServerError(endpoint, f"invalid JSON: {type(exc).__name__}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _type_name(v: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(v), "null" if v is None else type(v).__name__
    )


def expect_object(endpoint: str, value: Any, what: str = "reply") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ServerError(endpoint, f"{what}: expected an object, got {_type_name(value)}")
    return value


def parse_generation(endpoint: str, value: Any) -> Generation:
    """Check a ``/generate`` reply's shape: an object with string ``text`` and object ``meta_info`` whose
    numeric fields are finite numbers. A list (batch reply) or an ``error`` object is rejected."""
    obj = expect_object(endpoint, value)
    if "error" in obj and "meta_info" not in obj:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise ServerError(endpoint, f"server reported an error: {str(msg)[:200]}")
    if "text" not in obj:
        raise ServerError(endpoint, "missing field text")
    if not isinstance(obj["text"], str):
        raise ServerError(endpoint, f"text: expected a string, got {_type_name(obj['text'])}")
    if "meta_info" not in obj:
        raise ServerError(endpoint, "missing field meta_info")
    meta = expect_object(endpoint, obj["meta_info"], "meta_info")
    for key, val in meta.items():
        if key.startswith("spec_") or key in _NUMERIC_META:
            _check_meta_value(endpoint, key, val)
    if "completion_tokens" not in meta:
        raise ServerError(endpoint, "missing field meta_info.completion_tokens")
    ids = obj.get("output_ids")
    if ids is not None and not (isinstance(ids, list) and all(type(i) is int for i in ids)):
        raise ServerError(endpoint, "output_ids: expected a list of integers")
    return Generation(text=obj["text"], output_ids=ids, meta_info=meta)


_NUMERIC_META = frozenset(
    {"completion_tokens", "prompt_tokens", "e2e_latency", "first_token_latency", "decode_throughput"}
)
_INT_META = frozenset(
    {
        "completion_tokens",
        "prompt_tokens",
        "spec_verify_ct",
        "spec_num_correct_drafts",
        "spec_num_proposed_drafts",
    }
)


def _check_meta_value(endpoint: str, key: str, val: Any) -> None:
    where = f"meta_info.{key}"
    if key == "spec_correct_drafts_histogram" or key.endswith("_histogram"):
        if val is not None and not (isinstance(val, list) and all(type(v) is int and v >= 0 for v in val)):
            raise ServerError(endpoint, f"{where}: expected a list of non-negative integers")
        return
    if val is None:
        return
    if key in _INT_META:
        if type(val) is not int or val < 0:
            raise ServerError(endpoint, f"{where}: expected a non-negative integer, got {_type_name(val)}")
        return
    if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val) or val < 0:
        raise ServerError(endpoint, f"{where}: expected a non-negative number, got {_type_name(val)}")


class SGLangClient:
    """One server, one connection pool. Use as ``async with SGLangClient(url, api_key=...) as c``."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 4.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise InputError("--url", f"expected http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._secrets = (api_key,) if api_key else ()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport, follow_redirects=False
        )
        self.server_info_endpoint = "/server_info"

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

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        retry: bool = True,
        ok: tuple[int, ...] = (200,),
    ) -> httpx.Response:
        """Send with bounded retries on transient failures; return a response whose status is in ``ok``."""
        ep = self.endpoint(path)
        attempts = 1 + (self.retries if retry else 0)
        delay = self.backoff
        last = "no attempt made"
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(min(delay, self.max_backoff))
                delay *= 2
            try:
                resp = await self._http.request(method, path, json=json_body)
            except httpx.TimeoutException as exc:
                last = f"timed out ({type(exc).__name__})"
                continue
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__}: {redact_text(str(exc), self._secrets)})"
                continue
            if resp.status_code in ok:
                return resp
            if resp.status_code in TRANSIENT_STATUS:
                last = f"HTTP {resp.status_code}"
                continue
            raise ServerError(ep, _status_reason(resp.status_code), resp.status_code)
        suffix = f" after {attempts} attempts" if attempts > 1 else ""
        status = int(last[5:]) if last.startswith("HTTP ") else None
        raise ServerError(ep, f"{last}{suffix}", status, transient=True)

    async def _json(self, method: str, path: str, json_body: Any = None, ok: tuple[int, ...] = (200,)) -> Any:
        resp = await self._request(method, path, json_body=json_body, ok=ok)
        return parse_json(self.endpoint(path), resp.content)

    async def health(self) -> int:
        """The status code of one ``GET /health`` (no retries: readiness polling owns the loop).
        Raises ServerError when no HTTP answer came at all."""
        try:
            resp = await self._http.get("/health")
        except httpx.TimeoutException:
            raise ServerError(self.endpoint("/health"), "timed out", transient=True) from None
        except httpx.TransportError as exc:
            reason = f"connection failed ({type(exc).__name__})"
            raise ServerError(self.endpoint("/health"), reason, transient=True) from None
        return resp.status_code

    async def server_info(self) -> dict[str, Any]:
        """``/server_info`` (or the deprecated ``/get_server_info`` on 404), redacted."""
        try:
            raw = await self._json("GET", "/server_info")
            self.server_info_endpoint = "/server_info"
        except ServerError as exc:
            if exc.status != 404:
                raise
            raw = await self._json("GET", "/get_server_info")
            self.server_info_endpoint = "/get_server_info"
        info = expect_object(self.endpoint(self.server_info_endpoint), raw)
        states = info.get("internal_states")
        if states is not None and not (isinstance(states, list) and all(isinstance(s, dict) for s in states)):
            ep = self.endpoint(self.server_info_endpoint)
            raise ServerError(ep, "internal_states: expected a list of objects")
        return dict(redact(info, secrets=self._secrets))

    async def model_info(self) -> dict[str, Any]:
        try:
            raw = await self._json("GET", "/model_info")
            path = "/model_info"
        except ServerError as exc:
            if exc.status != 404:
                raise
            raw = await self._json("GET", "/get_model_info")
            path = "/get_model_info"
        info = expect_object(self.endpoint(path), raw)
        archs = info.get("architectures")
        if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
            raise ServerError(self.endpoint(path), "architectures: expected a list of strings")
        return dict(redact(info, secrets=self._secrets))

    async def generate(self, payload: dict[str, Any]) -> Generation:
        """Non-streaming ``POST /generate`` for one prompt."""
        body = {**payload, "stream": False}
        t0 = time.perf_counter()
        raw = await self._json("POST", "/generate", json_body=body)
        gen = parse_generation(self.endpoint("/generate"), raw)
        return Generation(gen.text, gen.output_ids, gen.meta_info, None, time.perf_counter() - t0)

    async def generate_stream(self, payload: dict[str, Any]) -> Generation:
        """Streaming ``POST /generate``: the final frame, plus the client-side time to the first frame
        that carries generated text (TTFT as a user sees it). Not retried once bytes have arrived."""
        ep = self.endpoint("/generate")
        body = {**payload, "stream": True}
        t0 = time.perf_counter()
        ttft: float | None = None
        last: Any = None
        try:
            async with self._http.stream("POST", "/generate", json=body) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    raise ServerError(ep, _status_reason(resp.status_code), resp.status_code)
                if "text/event-stream" not in resp.headers.get("content-type", ""):
                    raw = parse_json(ep, await resp.aread())
                    gen = parse_generation(ep, raw)
                    return Generation(gen.text, gen.output_ids, gen.meta_info, None, time.perf_counter() - t0)
                done = False
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    last = parse_json(ep, data.encode("utf-8", "surrogatepass"))
                    frame = expect_object(ep, last, "stream frame")
                    if ttft is None and frame.get("text"):
                        ttft = time.perf_counter() - t0
        except httpx.TimeoutException:
            raise ServerError(ep, "timed out while streaming") from None
        except httpx.TransportError as exc:
            raise ServerError(ep, f"stream broken ({type(exc).__name__})") from None
        if last is None:
            raise ServerError(ep, "stream ended without a data frame")
        if not done:
            raise ServerError(ep, "stream ended without data: [DONE]")
        gen = parse_generation(ep, last)
        return Generation(gen.text, gen.output_ids, gen.meta_info, ttft, time.perf_counter() - t0)

    async def metrics_text(self) -> str:
        """Prometheus text from ``/metrics`` (404 when the server runs without ``--enable-metrics``)."""
        resp = await self._request("GET", "/metrics")
        try:
            return resp.content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ServerError(self.endpoint("/metrics"), f"body is not UTF-8 (byte {exc.start})") from None

    async def weights_checker(self, selector: str = "all") -> dict[str, str]:
        """Per-parameter checksums from ``/weights_checker`` (``action=checksum``), merged over ranks.
        Expensive on a real server: it hashes every weight; callers make it opt-in."""
        ep = self.endpoint("/weights_checker")
        raw = await self._json("POST", "/weights_checker", {"action": "checksum", "selector": selector})
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


def _status_reason(status: int) -> str:
    if status in (401, 403):
        return f"HTTP {status} (unauthorized: give the server's key with --api-key-file or ${API_KEY_ENV})"
    if status == 404:
        return "HTTP 404 (endpoint not found)"
    return f"HTTP {status}"
