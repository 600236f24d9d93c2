"""Property tests of the client's reply handling and of every input parser, with time and memory bounds
per example. Not collected by the default run on its own (the name does not start with ``test_``):
``tests/test_hostile_fuzz.py`` runs this file in a child pytest under ``RLIMIT_AS``, so an unbounded
allocation fails there fast instead of taking the host's memory, and asserts the child's peak RSS.

Each example is timed and traced (``tracemalloc``): a reply or a file that costs more than the bounds below
is a failure even when it ends in the right exception.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import io
import json
import os
import tempfile
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.byte_stream import ChunkedBody
from validator.bounded_files import parse_json
from validator.errors import InputError, ValidatorError
from validator.redact import REDACTED, neutralize_controls, redact, redact_text, register_secret
from validator.sources.host.safetensors_header import parse_header
from validator.sources.launch.command import launch_from_string
from validator.sources.launch.env_file import parse_env_text
from validator.sources.launch.systemd_unit import load_unit
from validator.sources.server.client import ServerError, SGLangClient

EXAMPLE_S = 5.0  # wall time of one example (a loaded 2-core CI box; real cost is milliseconds)
EXAMPLE_MB = 96.0  # traced peak of one example: the client stops at a cap (64 MiB at most) plus a chunk
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@contextmanager
def bounded() -> Iterator[None]:
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        yield
    finally:
        wall = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert wall < EXAMPLE_S, f"example took {wall:.1f} s"
        assert peak / 2**20 < EXAMPLE_MB, f"example allocated {peak / 2**20:.0f} MB"


# ---- the client's reply handling ----------------------------------------------------------------------

ENDPOINTS: dict[str, Callable[[SGLangClient], Any]] = {
    "health": lambda c: c.health(timeout=5),
    "server_info": lambda c: c.server_info(timeout=5),
    "model_info": lambda c: c.model_info(),
    "generate": lambda c: c.generate({"text": "q"}),
    "generate_stream": lambda c: c.generate_stream({"text": "q"}),
    "metrics": lambda c: c.metrics_text(),
    "weights_checker": lambda c: c.weights_checker(),
}
GOOD_DOCS: list[Any] = [
    {"internal_states": [{}], "moe_runner_backend": "humming", "api_key": None},
    {"model_path": "/m", "architectures": ["BailingMoeV3ForCausalLM"]},
    {"text": "Paris.", "meta_info": {"completion_tokens": 2, "spec_verify_ct": 1}},
    {"success": True, "ranks": [{"checksums": {"lm_head.weight": "ab"}}]},
]


def _payloads() -> st.SearchStrategy[bytes]:
    doc = st.sampled_from(GOOD_DOCS).map(lambda d: json.dumps(d).encode())
    sse = doc.map(lambda d: b"data: " + d + b"\n\ndata: [DONE]\n\n")
    hostile = st.sampled_from(
        [
            b"[" * 600 + b"]" * 600,
            b'{"a": ' + b"9" * 5000 + b"}",
            b"data: " + b"a" * (2 << 20),
            b" " * (9 << 20),
            b"\xff\xfe\x00",
            b"NaN",
            b"",
        ]
    )
    return st.one_of(doc, sse, hostile, st.binary(max_size=256))


@functools.lru_cache(maxsize=1)
def _gzip_bomb(decoded: int = 256 << 20) -> bytes:
    """256 MiB of zeros gzipped to ~250 KiB, built once from one reused 1 MiB chunk. Larger than every body
    cap (the largest, /weights_checker's, is 64 MiB: a bomb of exactly 64 MiB was a legal reply there, whose
    decoded copy and join peaked at 128 MB), and the test never holds the decoded bytes itself."""
    buf = io.BytesIO()
    chunk = bytes(1 << 20)
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz:
        for _ in range(decoded // len(chunk)):
            gz.write(chunk)
    return buf.getvalue()


def _encode(body: bytes, coding: str, damage: int | None) -> bytes:
    if coding in ("gzip", "x-gzip", "GZIP"):
        out = gzip.compress(body)
    elif coding == "deflate":
        out = zlib.compress(body)
    elif coding == "bomb":
        out = _gzip_bomb()
    else:
        out = body
    if damage is not None and out:
        i = damage % len(out)
        out = out[:i] + bytes([out[i] ^ 0x5A]) + out[i + 1 :]
    return out


@SETTINGS
@given(
    endpoint=st.sampled_from(sorted(ENDPOINTS)),
    status=st.sampled_from([200, 200, 200, 204, 302, 401, 404, 500, 503]),
    coding=st.sampled_from(["", "identity", "gzip", "x-gzip", "GZIP", "deflate", "br", "gzip, gzip", "bomb"]),
    damage=st.none() | st.integers(0, 1 << 16),
    length=st.sampled_from(["none", "right", "wrong", "two", "huge"]),
    sse=st.booleans(),
    cuts=st.lists(st.integers(0, 1 << 16), max_size=6),
    body=_payloads(),
)
def test_client_replies_end_as_values_or_server_errors(
    endpoint: str,
    status: int,
    coding: str,
    damage: int | None,
    length: str,
    sse: bool,
    cuts: list[int],
    body: bytes,
) -> None:
    raw = _encode(body, coding, damage)
    headers = {"content-type": "text/event-stream" if sse else "application/json"}
    if coding:
        headers["content-encoding"] = "gzip" if coding == "bomb" else coding
    marks = sorted({c % (len(raw) + 1) for c in cuts})
    parts = [raw[a:b] for a, b in zip([0, *marks], [*marks, len(raw)], strict=True) if raw[a:b]]
    header_list = list(headers.items())
    if length == "right":
        header_list.append(("content-length", str(len(raw))))
    elif length == "wrong":
        header_list.append(("content-length", str(len(raw) + 7)))
    elif length == "two":
        header_list += [("content-length", str(len(raw))), ("content-length", "3")]
    elif length == "huge":
        header_list.append(("content-length", str(10**15)))

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=header_list, stream=ChunkedBody(parts))

    client = SGLangClient(
        "http://sglang.test", transport=httpx.MockTransport(handler), retries=0, read_timeout=5
    )
    with bounded():
        try:
            asyncio.run(ENDPOINTS[endpoint](client))
        except ServerError as exc:
            assert exc.endpoint.startswith("http://sglang.test/")
            assert "\n" not in str(exc)


# ---- the input parsers --------------------------------------------------------------------------------

hostile_text = st.text(
    alphabet=st.sampled_from([*list("AZaz_=-.'\"\\$%{} \t\n\r#;[]@:/"), "\x00", "\x1b", "é", "\u202e"]),
    max_size=300,
)


@SETTINGS
@given(text=hostile_text)
def test_env_file_text_parses_or_is_an_input_error(text: str) -> None:
    with bounded():
        try:
            env = parse_env_text(text, where="fuzz.env")
        except InputError as exc:
            assert str(exc).startswith("fuzz.env")
        else:
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())


@SETTINGS
@given(text=hostile_text, exec_line=hostile_text)
def test_unit_files_parse_or_are_input_errors(text: str, exec_line: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        unit = Path(d) / "fuzz.service"
        unit.write_text(f"[Service]\n{text}\nExecStart=/usr/bin/python3 {exec_line}\n", encoding="utf-8")
        with bounded():
            try:
                load_unit(unit)
            except ValidatorError as exc:
                assert "\n" not in str(exc)


@SETTINGS
@given(cmd=hostile_text)
def test_launch_strings_parse_or_are_input_errors(cmd: str) -> None:
    with bounded():
        try:
            launch_from_string(
                "python -m sglang.launch_server " + cmd, origin="--launch-cmd", env={}
            ).parsed()
        except ValidatorError as exc:
            assert "\n" not in str(exc)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=20,
)


@SETTINGS
@given(
    doc=json_like,
    depth=st.integers(0, 3000),
    digits=st.integers(1, 6000),
    junk=st.binary(max_size=64),
)
def test_safetensors_headers_and_json_files_parse_or_are_input_errors(
    doc: Any, depth: int, digits: int, junk: bytes
) -> None:
    samples = [
        json.dumps(doc).encode(),
        b"[" * depth + b"]" * depth,
        b'{"t": {"dtype": "U8", "shape": [' + b"7" * digits + b'], "data_offsets": [0, 1]}}',
        junk,
        json.dumps({"t": doc}).encode(),
    ]
    with bounded():
        for raw in samples:
            with suppress(InputError):
                parse_header(raw, where="fuzz.safetensors", path=Path("fuzz.safetensors"), data_bytes=1)
            with suppress(InputError):
                parse_json(raw.decode("utf-8", "replace"), "fuzz.json")


@SETTINGS
@given(doc=json_like, depth=st.integers(0, 5000), text=hostile_text)
def test_redaction_is_bounded_and_never_lets_a_registered_secret_through(
    doc: Any, depth: int, text: str
) -> None:
    secret = "fuzz-secret-9Qw2"
    register_secret(secret)
    nested: Any = secret
    for _ in range(depth):
        nested = [nested]
    with bounded():
        out = redact({"doc": doc, "deep": nested, "s": f"{text}{secret}{text}"})
        assert secret not in json.dumps(out)
        assert secret not in redact_text(f"{text} {secret}")
        shown = neutralize_controls(text)
        assert not any(ch in shown for ch in "\x1b\r\x00\u202e")
    assert REDACTED in json.dumps(out)


if __name__ == "__main__":  # pragma: no cover
    os.execvp("pytest", ["pytest", "-q", __file__])
