from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.loopback import free_port
from tests.support.probe_live_server import serve
from validator.errors import InputError
from validator.sources.server.client import API_KEY_ENV, ServerError, SGLangClient, load_api_key

URL = "http://sglang.test:30000"
KEY = "sk-test-5b1e77aa"

GOOD_GEN = {
    "text": "Paris.",
    "output_ids": [1, 2],
    "meta_info": {"completion_tokens": 2, "finish_reason": {"type": "stop"}, "e2e_latency": 0.1},
}
GOOD: dict[str, str | bytes] = {
    "/health": b"",
    "/server_info": json.dumps({"moe_runner_backend": "humming", "api_key": KEY, "internal_states": [{}]}),
    "/model_info": json.dumps({"model_path": "/m", "architectures": ["BailingMoeV3ForCausalLM"]}),
    "/generate": json.dumps(GOOD_GEN),
    "/metrics": "sglang:spec_accept_length 2.7\n",
    "/weights_checker": json.dumps({"success": True, "ranks": [{"checksums": {"lm_head.weight": "ab"}}]}),
}


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def client(handler: Callable[[httpx.Request], httpx.Response], **kw: Any) -> SGLangClient:
    kw.setdefault("backoff", 0.001)
    return SGLangClient(URL, transport=httpx.MockTransport(handler), **kw)


def test_retries_transient_then_succeeds() -> None:
    calls: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req.url.path)
        if len(calls) < 3:
            return httpx.Response(503 if len(calls) == 1 else 502)
        return httpx.Response(200, content=GOOD["/server_info"])

    info = run(client(handler, retries=3).server_info())
    assert len(calls) == 3 and info["moe_runner_backend"] == "humming"


def _always(
    answer: int | type[httpx.TimeoutException],
) -> tuple[Callable[[httpx.Request], httpx.Response], list[httpx.Request]]:
    """A handler that answers every attempt alike (that HTTP status, or that timeout), and the list of the
    attempts it saw: what a retry budget is counted on."""
    attempts: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        attempts.append(req)
        if isinstance(answer, int):
            return httpx.Response(answer)
        raise answer("slow", request=req)

    return handler, attempts


def test_gives_up_after_retry_budget_naming_endpoint() -> None:
    handler, attempts = _always(504)
    with pytest.raises(ServerError) as err:
        run(client(handler, retries=2).model_info())
    assert len(attempts) == 3
    assert str(err.value) == f"{URL}/model_info: HTTP 504 after 3 attempts" and err.value.transient


def test_4xx_is_not_retried() -> None:
    handler, attempts = _always(401)
    with pytest.raises(ServerError) as err:
        run(client(handler, retries=5).generate({"text": "x"}))
    assert len(attempts) == 1 and err.value.status == 401
    assert f"{URL}/generate: HTTP 401" in str(err.value) and "--api-key-file" in str(err.value)


def test_timeouts_are_retried_then_reported() -> None:
    handler, attempts = _always(httpx.ReadTimeout)
    with pytest.raises(ServerError, match=r"/metrics: timed out \(ReadTimeout\) after 2 attempts"):
        run(client(handler, retries=1).metrics_text())
    assert len(attempts) == 2


def test_server_info_falls_back_and_is_redacted_and_key_goes_in_header() -> None:
    seen: list[tuple[str, str | None]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((req.url.path, req.headers.get("authorization")))
        if req.url.path == "/server_info":
            return httpx.Response(404)
        return httpx.Response(200, content=GOOD["/server_info"])

    c = client(handler, api_key=KEY)
    info = run(c.server_info())
    assert [p for p, _ in seen] == ["/server_info", "/get_server_info"]
    assert all(h == f"Bearer {KEY}" for _, h in seen)
    assert c.server_info_endpoint == "/get_server_info"
    assert KEY not in json.dumps(info) and KEY not in repr(c)


def test_no_key_no_header() -> None:
    seen: list[str | None] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.headers.get("authorization"))
        return httpx.Response(200)

    assert run(client(handler).health()) == 200 and seen == [None]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([GOOD_GEN], "expected an object, got list"),
        ({"text": "x"}, "missing field meta_info"),
        ({"text": 3, "meta_info": {}}, "text: expected a string, got number"),
        ({"text": "x", "meta_info": {"completion_tokens": -1}}, "meta_info.completion_tokens"),
        (
            {"text": "x", "meta_info": {"completion_tokens": 2, "spec_verify_ct": "3"}},
            "meta_info.spec_verify_ct",
        ),
        ({"error": {"message": "bad request"}}, "server reported an error: bad request"),
    ],
)
def test_generate_shapes(body: Any, reason: str) -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)

    with pytest.raises(ServerError) as err:
        run(client(handler).generate({"text": "q"}))
    assert str(err.value).startswith(f"{URL}/generate: ") and reason in str(err.value)


def test_invalid_json_names_byte() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b'{"a": 1,}')

    with pytest.raises(ServerError, match=r"/server_info: invalid JSON at byte 8"):
        run(client(handler).server_info())


def test_weights_checker_merges_ranks() -> None:
    body = {"success": True, "ranks": [{"checksums": {"lm_head.weight": "aa"}}, {"checksums": {"x": "bb"}}]}

    def handler(req: httpx.Request) -> httpx.Response:
        assert json.loads(req.content) == {"action": "checksum", "selector": "all"}
        return httpx.Response(200, json=body)

    assert run(client(handler).weights_checker()) == {"lm_head.weight": "aa", "x": "bb"}


def test_load_api_key(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text(f"  {KEY}\n")
    assert load_api_key(f, {API_KEY_ENV: "other"}) == KEY
    assert load_api_key(None, {API_KEY_ENV: f" {KEY} "}) == KEY
    assert load_api_key(None, {}) is None
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InputError, match="empty"):
        load_api_key(tmp_path / "empty", {})
    with pytest.raises(InputError) as err:
        load_api_key(tmp_path / "missing", {})
    assert str(tmp_path / "missing") in str(err.value) and err.value.exit_code == 65


def test_bad_url_is_input_error() -> None:
    with pytest.raises(InputError):
        SGLangClient("localhost:30000")


# ---- real sockets ----------------------------------------------------------------------------------


def _stream_app(frames: list[bytes]) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        if not body.get("stream"):
            return JSONResponse(GOOD_GEN)

        async def gen() -> Any:
            for f in frames:
                await asyncio.sleep(0.01)
                yield f

        return StreamingResponse(gen(), media_type="text/event-stream")

    return Starlette(routes=[Route("/generate", generate, methods=["POST"])])


def _frame(text: str, meta: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps({"text": text, "meta_info": meta}).encode() + b"\n\n"


def test_streaming_over_real_socket_measures_ttft() -> None:
    meta = {"completion_tokens": 3, "spec_verify_ct": 1, "spec_num_correct_drafts": 1}
    frames = [_frame("Pa", {"completion_tokens": 1}), _frame("Paris.", meta), b"data: [DONE]\n\n"]
    with serve(_stream_app(frames)) as url:

        async def go() -> Any:
            async with SGLangClient(url) as c:
                return await c.generate_stream({"text": "q"}), await c.generate({"text": "q"})

        streamed, plain = run(go())
    assert streamed.text == "Paris." and streamed.meta_info["spec_verify_ct"] == 1
    assert (
        streamed.ttft_s is not None and streamed.wall_s is not None and 0 < streamed.ttft_s <= streamed.wall_s
    )
    assert plain.text == "Paris." and plain.ttft_s is None


def test_stream_without_done_is_an_error() -> None:
    app = _stream_app([_frame("x", {"completion_tokens": 1})])
    with (
        serve(app) as url,
        pytest.raises(ServerError, match=r"/generate: stream ended without data: \[DONE\]"),
    ):
        run(SGLangClient(url).generate_stream({"text": "q"}))


def test_connection_refused_is_transient_server_error() -> None:
    c = SGLangClient(f"http://127.0.0.1:{free_port()}", retries=1, backoff=0.01, connect_timeout=1)
    with pytest.raises(ServerError) as err:
        run(c.server_info())
    assert err.value.transient and "connection failed (ConnectError" in str(err.value)
    assert "after 2 attempts" in str(err.value)


# ---- fuzz: random and truncated bodies for every endpoint ---------------------------------------------

CALLS: dict[str, Callable[[SGLangClient], Coroutine[Any, Any, Any]]] = {
    "/server_info": lambda c: c.server_info(),
    "/model_info": lambda c: c.model_info(),
    "/generate": lambda c: c.generate({"text": "q"}),
    "/generate#stream": lambda c: c.generate_stream({"text": "q"}),
    "/metrics": lambda c: c.metrics_text(),
    "/weights_checker": lambda c: c.weights_checker(),
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
    max_leaves=12,
)


def _shaped(endpoint: str) -> st.SearchStrategy[Any]:
    """Near-miss documents: the right top-level keys with random values."""
    keys = {
        "/server_info": ["internal_states", "api_key", "version"],
        "/model_info": ["architectures", "model_path"],
        "/generate": ["text", "meta_info", "output_ids", "error"],
        "/generate#stream": ["text", "meta_info", "output_ids"],
        "/metrics": ["x"],
        "/weights_checker": ["success", "ranks", "message"],
    }[endpoint]
    return st.dictionaries(st.sampled_from(keys), json_values, max_size=4)


def _bodies(endpoint: str) -> st.SearchStrategy[bytes]:
    good = GOOD[endpoint.split("#")[0]]
    good_b = good.encode() if isinstance(good, str) else good
    truncated = st.integers(0, max(0, len(good_b) - 1)).map(lambda n: good_b[:n])
    encoded = st.one_of(json_values, _shaped(endpoint)).map(lambda v: json.dumps(v).encode())
    return st.one_of(st.binary(max_size=64), truncated, encoded, st.just(b"[" * 5000))


@pytest.mark.parametrize("endpoint", list(CALLS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_bodies_only_raise_server_error(endpoint: str, data: st.DataObject) -> None:
    body = data.draw(_bodies(endpoint))
    stream = endpoint.endswith("#stream")
    if stream and data.draw(st.booleans()):
        body = b"data: " + body + b"\n\ndata: [DONE]\n\n"
    ctype = "text/event-stream" if stream and body.startswith(b"data:") else "application/json"

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": ctype})

    path = endpoint.split("#")[0]
    try:
        run(CALLS[endpoint](client(handler, retries=0)))
    except ServerError as exc:
        assert str(exc).startswith(f"{URL}{path}"), str(exc)
        assert "\n" not in str(exc)
