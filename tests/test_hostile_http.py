"""A hostile or wedged server never holds ``check`` past its deadline, never grows it
past the memory bound, never makes it exit 1.

Each attack is reproduced the way it was found: a real ``check`` process (under ``RLIMIT_AS``) against a
raw-socket server on loopback (``tests.support.hostile_server``) that sends an endless body, a gzip bomb,
bad gzip, a status line dripped a byte a second, nothing at all, lists nested 500 deep, or an endless
event-stream line. Every mode must end with exit 69 within ``--wait`` + 10 s, under 200 MB, without a
traceback.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from typing import Any

import httpx
import pytest

from tests.support.bounded_run import run_bounded
from tests.support.byte_stream import ChunkedBody
from tests.support.hostile_server import LEAK_MODES, MODES, PARSE_MODES, hostile_process
from validator.sources.server.client import BODY_CAPS, ServerError, SGLangClient

WAIT_S = 3.0


@pytest.mark.parametrize("mode", sorted(set(MODES) - LEAK_MODES - PARSE_MODES))
def test_check_against_hostile_server_exits_69_within_bounds(mode: str) -> None:
    with hostile_process(mode) as url:
        res = run_bounded(["check", "--url", url, "--wait", str(WAIT_S), "--format", "json"], timeout=60)
    assert not res.timed_out and res.wall_s < WAIT_S + 10, f"{mode}: {res.wall_s:.1f} s"
    assert res.peak_rss_mb < 200, f"{mode}: {res.peak_rss_mb:.0f} MB"
    assert res.rc == 69, f"{mode}: rc={res.rc} {res.stderr[-800:]}"
    assert "Traceback" not in res.stderr
    report = json.loads(res.stdout)
    assert report["verdict"] == "inconclusive"
    errors = {c["id"]: c["message"] for c in report["checks"] if c["status"] == "error"}
    failed = [c["id"] for c in report["checks"] if c["status"] == "fail"]
    assert not failed, f"{mode}: a hostile server is missing evidence, not a misconfiguration: {failed}"
    expected = "spec.accept_length" if mode == "endless_sse" else "server.ready"
    assert expected in errors, f"{mode}: {errors}"


@pytest.mark.parametrize(
    "mode,bound",
    [
        ("metrics_labels", "over 32 labels"),
        ("metrics_series", "over 256 series"),
        ("metrics_escapes", "over 65536 characters"),  # each line within the bounds above
    ],
)
def test_hostile_metrics_text_is_refused_at_its_bound_not_parsed(mode: str, bound: str) -> None:
    """A /metrics body far under the 16 MiB cap whose shape makes the reference parser slow (250,000
    labels on one series took ``check --no-probe --wait 5`` 72 s): the reading is refused at the bound and
    the evidence says which, so the run ends at the other checks' pace (the subprocess bound is 60 s)."""
    with hostile_process(mode) as url:
        res = run_bounded(
            ["check", "--url", url, "--no-probe", "--wait", str(WAIT_S), "--format", "json"], timeout=60
        )
    assert not res.timed_out, f"{mode}: killed at 60 s"
    assert res.rc == 69 and "Traceback" not in res.stderr, res.stderr[-800:]
    checks = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    note = checks["spec.accept_length"]["evidence"]["server_metrics_note"]
    assert note.startswith("/metrics passes a bound, not read") and bound in note, note


def test_a_reply_of_millions_of_small_values_is_refused_at_its_bound() -> None:
    """8 MiB of two million one-element lists in /server_info: every byte under the cap, but each reader
    walks it whole (the redactor: 35 s of one check). Refused at 500,000 values, naming the endpoint."""
    with hostile_process("wide_json") as url:
        res = run_bounded(
            ["check", "--url", url, "--no-probe", "--wait", str(WAIT_S), "--format", "json"], timeout=60
        )
    assert not res.timed_out and res.rc == 69 and "Traceback" not in res.stderr, res.stderr[-800:]
    ready = {c["id"]: c for c in json.loads(res.stdout)["checks"]}["server.ready"]
    assert ready["status"] == "error" and "/server_info" in ready["message"], ready
    assert "more than 500,000 values" in ready["message"], ready


# ---- the client's reply handling, in process ----------------------------------------------------------


def _client(handler: Any, **kw: Any) -> SGLangClient:
    return SGLangClient("http://sglang.test", transport=httpx.MockTransport(handler), retries=0, **kw)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _raw(status: int, parts: list[bytes], **headers: str) -> Any:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, stream=ChunkedBody(parts))

    return handler


def test_gzip_and_deflate_bodies_are_decoded() -> None:
    doc = {"internal_states": [{}], "moe_runner_backend": "humming"}
    body = json.dumps(doc).encode()
    gz = _client(_raw(200, [gzip.compress(body)], **{"content-encoding": "gzip"}))
    assert _run(gz.server_info())["moe_runner_backend"] == "humming"
    de = _client(_raw(200, [zlib.compress(body)], **{"content-encoding": "deflate"}))
    assert _run(de.server_info())["moe_runner_backend"] == "humming"


@pytest.mark.parametrize(
    "parts,headers,needle",
    [
        ([b"not gzip at all"], {"content-encoding": "gzip"}, "not valid gzip"),
        ([gzip.compress(b"{}")[:-6]], {"content-encoding": "gzip"}, "truncated"),
        ([gzip.compress(b"{}") + b"junk"], {"content-encoding": "gzip"}, "after the end"),
        ([b"{}"], {"content-encoding": "br"}, "unsupported Content-Encoding"),
        ([b"{}"], {"content-encoding": "gzip, gzip"}, "unsupported Content-Encoding"),
        ([gzip.compress(bytes(64 << 20))], {"content-encoding": "gzip"}, "over the"),
        ([b" " * (1 << 20)] * 9 + [b"{}"], {}, "over the 8388608-byte cap"),
        ([b"{}"], {"content-length": str(10**12)}, "over the"),
        ([b'{"a": ' + b"[" * 500 + b"]" * 500 + b"}"], {}, "nested more than 100"),
        ([b'{"a": ' + b"9" * 5000 + b"}"], {}, "invalid JSON"),
    ],
)
def test_bad_bodies_are_server_errors(parts: list[bytes], headers: dict[str, str], needle: str) -> None:
    with pytest.raises(ServerError, match=needle) as err:
        _run(_client(_raw(200, parts, **headers)).server_info())
    assert err.value.endpoint.endswith("/server_info")


def test_event_stream_line_cap_and_bad_gzip_stream() -> None:
    sse = {"content-type": "text/event-stream"}
    endless = [b"data: "] + [b"a" * 65536] * 40
    with pytest.raises(ServerError, match="event-stream line over"):
        _run(_client(_raw(200, endless, **sse)).generate_stream({"text": "q"}))
    bad = {**sse, "content-encoding": "gzip"}
    with pytest.raises(ServerError, match="not valid gzip"):
        _run(_client(_raw(200, [b"data: {}\n\n"], **bad)).generate_stream({"text": "q"}))
    frame = b'data: {"text": "x", "meta_info": {"completion_tokens": 1}}\n\ndata: [DONE]\n\n'
    ok = _run(_client(_raw(200, [gzip.compress(frame)], **bad)).generate_stream({"text": "q"}))
    assert ok.text == "x"


def test_health_never_reads_the_body() -> None:
    def endless() -> Any:
        while True:
            yield b" " * 65536

    class Endless(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            for chunk in endless():
                yield chunk

    c = _client(lambda req: httpx.Response(200, stream=Endless()))
    assert _run(c.health(timeout=2)) == 200


def test_url_credentials_never_shown() -> None:
    c = SGLangClient("http://admin:hunter2-pw@127.0.0.1:1", retries=0, connect_timeout=0.5)
    assert "hunter2" not in c.url and "hunter2" not in repr(c)
    with pytest.raises(ServerError) as err:
        _run(c.server_info())
    assert "hunter2" not in str(err.value) and "admin" not in str(err.value)


def test_caps_cover_every_endpoint_the_client_calls() -> None:
    called = {"/health", "/server_info", "/get_server_info", "/model_info", "/get_model_info", "/generate"}
    assert called | {"/metrics", "/weights_checker"} <= set(BODY_CAPS)


def test_a_whole_check_has_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backstop over every request's own deadline: past ``check_deadline_s`` what was not gathered is
    an error naming the deadline (never a pass), however the server stalls."""
    import time

    from validator import live
    from validator.facts import SERVER
    from validator.rulepack import load_pack

    monkeypatch.setattr(live, "CHECK_OVERHEAD_S", 0.5)  # below the 3 s of one readiness poll
    loaded = load_pack(None)
    with hostile_process("silent") as url:
        t0 = time.monotonic()
        facts = asyncio.run(live.gather_live(live.LiveInputs(url=url, wait_s=0.0), loaded, probe=False))
    assert time.monotonic() - t0 < 2.5
    assert "did not finish within its 0.5 s deadline" in facts.errors[SERVER]
