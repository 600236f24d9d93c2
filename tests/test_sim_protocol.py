"""The simulator's wire behaviour held to SGLang 0.5.23's source: start-up phases, auth, error replies,
``/flush_cache``, ``/v1/models/{model}``, logprobs, ``json_schema``, metrics, ``/server_info`` keys.

Expected texts and key lists are written here from the wheel's source files named beside them, or read
from those files by the test (the contract messages come from SGLang's own ``api_types`` module).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support import web
from tests.support.check_helpers import evidence_files, run_check
from tests.support.sglang_wheel import memory_usage_keys
from tests.support.sim_process import SimProcess, sim_process, wait_healthy

KEY = "sim-protocol-key-7"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    tmp = tmp_path_factory.mktemp("keyed")
    (tmp / "key").write_text(KEY)
    with sim_process(
        tmp, "--scenario", "auth-required", "--api-key-file", str(tmp / "key"), "--enable-metrics"
    ) as sim:
        wait_healthy(sim.url)
        yield sim


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with sim_process(tmp_path_factory.mktemp("plain"), "--enable-metrics") as sim:
        wait_healthy(sim.url)
        yield sim


# ---- start-up: refused while loading, 503 while warming up, then a generation per /health ----


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def test_refuse_until_ready_then_503_during_warm_up_then_200(tmp_path: Path) -> None:
    # speed 1: the warm-up (1 s poll + an 8-token generation) and each /health (1 s) take real time
    with sim_process(tmp_path, "--refuse-until-ready", speed=1.0, startup=1.5, wait_listen=False) as sim:
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not seen or seen[-1] != "200"):
            if not _connects(sim.port):
                state = "refused"
            else:
                state = str(web.get(f"{sim.url}/health", timeout=5).status_code)
            if not seen or seen[-1] != state:
                seen.append(state)
            time.sleep(0.05)
        log = sim.log.read_text()
    assert seen == ["refused", "503", "200"], seen
    assert log.index("Engine startup timings (s): load_weight=") < log.index("The server is fired up")


def test_check_waits_through_a_refusing_load_phase(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--refuse-until-ready", startup=4.0, wait_listen=False) as sim:
        assert not _connects(sim.port)
        short = run_check(sim.url, "--wait", "1", *evidence_files(sim))
        assert not _connects(sim.port)  # still loading: the short run really met a closed port
        long = run_check(sim.url, "--wait", "40", *evidence_files(sim))
    short.not_ready()
    assert long.rc == 0, long.explain()
    assert long.report is not None and long.report["verdict"] == "pass"


# ---- auth: srt/utils/auth.py ----


@pytest.mark.parametrize(
    ("method", "path", "header", "status"),
    [
        ("GET", "/health", None, 200),
        ("GET", "/health_generate", None, 200),
        ("GET", "/healthz", None, 404),  # prefix match: allowed through, then no such route
        ("GET", "/ready", None, 200),
        ("GET", "/ready_check", None, 404),
        ("GET", "/readiness", None, 401),  # "/readi..." is not "/ready"
        ("GET", "/metrics", None, 200),
        ("GET", "/server_info", None, 401),
        ("GET", "/no-such-route", None, 401),  # the middleware runs before routing
        ("GET", "/no-such-route", f"Bearer {KEY}", 404),
        ("GET", "/server_info", f"bearer {KEY}", 200),  # the scheme is case-insensitive
        ("GET", "/server_info", f"BEARER {KEY}", 200),
        ("GET", "/server_info", f"Bearer  {KEY}", 401),  # split(" ", 1): the token keeps the 2nd space
        ("GET", "/server_info", f"Token {KEY}", 401),
        ("GET", "/server_info", f"Bearer {KEY}x", 401),
        ("POST", "/flush_cache", None, 401),  # ADMIN_OPTIONAL with only --api-key: the key is needed
        ("POST", "/flush_cache", f"Bearer {KEY}", 200),
        ("OPTIONS", "/server_info", None, 405),  # OPTIONS passes auth; the route has no OPTIONS
    ],
)
def test_auth_as_sglang(keyed: SimProcess, method: str, path: str, header: str | None, status: int) -> None:
    headers = {"Authorization": header} if header else {}
    r = httpx.request(method, f"{keyed.url}{path}", headers=headers, timeout=10)
    assert r.status_code == status, r.text
    if status == 401:
        assert r.json() == {"error": "Unauthorized"}


# ---- /generate errors: http_server.py, api_contract.py, io_struct.py ----

BAD_BODIES: list[Any] = [
    {"text": "x", "sampling_params": {"max_new_tokens": "x"}},
    {"text": "x", "sampling_params": {"temperature": "hot"}},
    {"text": "x", "sampling_params": {"no_such_param": 1}},
    {"text": "x", "sampling_params": [{"top_k": 1.5}]},
    {"text": "x", "sampling_params": "greedy"},
    {"text": "x", "sampling_params": {"stop": [1]}},
    {"text": "x", "sampling_params": {"json_schema": {"type": "object"}}},
    {"text": 5},
    {"text": ["a", 3]},
    {"input_ids": "abc"},
    {"input_ids": [[1, "b"]]},
    {"text": "x", "stream": "yes"},
    {"text": "x", "return_logprob": "y"},
    {"text": "x", "top_logprobs_num": [1, 2.5]},
    {"text": "x", "max_thinking_tokens": -1},
    {"text": "x", "return_prompt_token_ids": None},
    {"text": "x", "routed_experts_start_len": "0"},
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=[json.dumps(b)[:40] for b in BAD_BODIES])
def test_contract_violation_is_sglangs_400(plain: SimProcess, api_types: ModuleType, body: Any) -> None:
    with pytest.raises(api_types.JsonContractError) as expected:
        api_types.GenerateRequest.from_json_value(body)
    r = web.post(f"{plain.url}/generate", json=body, timeout=10)
    assert r.status_code == 400
    assert r.json() == {"error": str(expected.value)}


VALID_BODIES: list[Any] = [
    # what sglang.bench_serving's sglang backend sends (benchmark/serving.py:700-720)
    {"text": "x", "sampling_params": {"temperature": 0.0, "max_new_tokens": 4, "ignore_eos": True},
     "stream": False, "lora_path": None, "return_logprob": False, "return_routed_experts": False,
     "logprob_start_len": -1},
    {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 3, "stop": ["\n"], "top_k": 5}},
    {"input_ids": [[1, 2], [3]], "sampling_params": [{"max_new_tokens": 2}, {"max_new_tokens": 3}]},
    {"text": ["a", "b"], "rid": ["r1", "r2"], "sampling_params": {"max_new_tokens": 2, "n": 1}},
    {"text": "x", "unknown_top_level_key": 1, "sampling_params": None},
]  # fmt: skip


@pytest.mark.parametrize("body", VALID_BODIES, ids=[json.dumps(b)[:40] for b in VALID_BODIES])
def test_what_sglangs_contract_accepts_is_served(plain: SimProcess, api_types: ModuleType, body: Any) -> None:
    api_types.GenerateRequest.from_json_value(body)
    r = web.post(f"{plain.url}/generate", json=body, timeout=30)
    assert r.status_code == 200, r.text


def test_bad_json_is_fastapis_validation_400(plain: SimProcess) -> None:
    r = web.post(
        f"{plain.url}/generate",
        content=b'{"text": ',
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 400
    body = r.json()
    # ErrorResponse (openai/protocol.py:106-111) from validation_exception_handler (http_server.py:635-692)
    assert set(body) == {"object", "message", "type", "param", "code"}
    assert (body["object"], body["type"], body["param"], body["code"]) == ("error", "Bad Request", None, 400)
    assert body["message"].startswith("1 validation error:\n  {'type': 'json_invalid', 'loc': ('body', 9)")
    assert "'msg': 'JSON decode error'" in body["message"] and "POST /generate" in body["message"]


@pytest.mark.parametrize(
    ("raw", "error_type"), [(b"[1, 2]", "dataclass_type"), (b"", "missing"), (b'"text"', "dataclass_type")]
)
def test_a_body_that_is_no_object_fails_fastapis_validation(
    plain: SimProcess, raw: bytes, error_type: str
) -> None:
    r = web.post(
        f"{plain.url}/generate", content=raw, headers={"content-type": "application/json"}, timeout=10
    )
    assert r.status_code == 400
    body = r.json()
    assert (body["object"], body["type"], body["code"]) == ("error", "Bad Request", 400)
    assert f"'type': '{error_type}', 'loc': ('body',)" in body["message"]


def test_deprecated_info_routes_answer_and_log_a_warning(plain: SimProcess) -> None:
    for old, new in (("/get_server_info", "/server_info"), ("/get_model_info", "/model_info")):
        assert web.get(f"{plain.url}{old}", timeout=10).status_code == 200
        # http_server.py:805-811 and 852-858
        line = f"Endpoint '{old}' is deprecated and will be removed in a future version. "
        assert line + f"Please use '{new}' instead." in plain.log.read_text()


def test_no_input_is_a_value_error(plain: SimProcess, stock_sglang_root: Path) -> None:
    message = "Either text, input_ids or input_embeds should be provided."
    assert f'"{message}"' in (stock_sglang_root / "srt" / "managers" / "io_struct.py").read_text()
    r = web.post(f"{plain.url}/generate", json={"sampling_params": {"max_new_tokens": 4}}, timeout=10)
    assert r.status_code == 400 and r.json() == {"error": {"message": message}}
    with httpx.stream("POST", f"{plain.url}/generate", json={"stream": True}, timeout=10) as s:
        assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
        frames = [ln[6:] for ln in s.iter_lines() if ln.startswith("data: ")]
    assert frames[-1] == "[DONE]" and len(frames) == 2
    assert json.loads(frames[0]) == {
        "error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}
    }


# ---- other routes ----


def test_flush_cache_and_retrieve_model(plain: SimProcess) -> None:
    r = web.post(f"{plain.url}/flush_cache", timeout=10)
    assert r.status_code == 200 and r.text.startswith("Cache flushed.\nPlease check backend logs")
    assert web.get(f"{plain.url}/flush_cache", timeout=10).status_code == 200
    name = "/models/Ling-3.0-flash-fp4"
    card = web.get(f"{plain.url}/v1/models/{name}", timeout=10).json()
    assert set(card) == {"id", "object", "created", "owned_by", "root", "parent", "max_model_len"}
    assert card["id"] == name == card["root"] and card["owned_by"] == "sglang"
    missing = web.get(f"{plain.url}/v1/models/gpt-4", timeout=10)
    assert missing.status_code == 404
    error = {"message": "The model 'gpt-4' does not exist", "type": "invalid_request_error", "param": "model",
             "code": "model_not_found"}  # fmt: skip
    assert missing.json() == {"error": error}


def test_return_logprob_and_json_schema(plain: SimProcess, api_types: ModuleType) -> None:
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 12, "temperature": 0}, "return_logprob": True,
            "top_logprobs_num": 2, "return_text_in_logprobs": True}  # fmt: skip
    out = web.post(f"{plain.url}/generate", json=body, timeout=10).json()
    api_types.GenerateResponse.from_json_value(out)
    meta = out["meta_info"]
    lps = meta["output_token_logprobs"]
    assert len(lps) == meta["completion_tokens"] == meta["output_token_logprobs_length"] == 12
    assert [e[1] for e in lps] == out["output_ids"]
    assert all(isinstance(e[0], float) and e[0] <= 0 and isinstance(e[2], str) for e in lps)
    assert len(meta["output_top_logprobs"]) == 12 and all(len(t) == 2 for t in meta["output_top_logprobs"])
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}, "unit": {"enum": ["cm", "m"]}}}
    body = {"text": "q", "sampling_params": {"max_new_tokens": 64, "json_schema": json.dumps(schema)}}
    out = web.post(f"{plain.url}/generate", json=body, timeout=10).json()
    doc = json.loads(out["text"])
    assert isinstance(doc["answer"], int) and doc["unit"] in ("cm", "m")
    assert out["meta_info"]["finish_reason"]["type"] == "stop"


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.parametrize(
    ("scenario", "steps", "draft_tokens"), [("no-spec", 0, 0), ("healthy", 3, 4), ("dspark", 1, 9)]
)
def test_spec_gauges_always_exported_no_created_series(
    tmp_path: Path, scenario: str, steps: int, draft_tokens: int
) -> None:
    with sim_process(tmp_path, "--scenario", scenario, "--enable-metrics") as sim:
        wait_healthy(sim.url)
        web.post(
            f"{sim.url}/generate", json={"text": "m", "sampling_params": {"max_new_tokens": 8}}, timeout=10
        )
        text = web.get(f"{sim.url}/metrics", timeout=10).text
    # metrics_collector.py:511-546, pushed by log_stats at every prefill (metrics_reporter.py:897)
    for gauge in ("spec_accept_length", "spec_accept_rate", "spec_cap_length", "spec_block_accept_length"):
        assert _metric(text, f"sglang:{gauge}") is not None, gauge
    assert _metric(text, "sglang:spec_num_steps") == steps
    assert _metric(text, "sglang:spec_num_draft_tokens") == draft_tokens
    if scenario == "no-spec":
        assert _metric(text, "sglang:spec_accept_length") == 0.0
    assert "_created" not in text  # the multiprocess collector SGLang uses writes none
    assert _metric(text, "sglang:num_requests_total") == 1.0  # ours; the warm-up is kept out (engine.py)


def test_server_info_keys_from_sglangs_builders(plain: SimProcess, stock_sglang_root: Path) -> None:
    info = web.get(f"{plain.url}/server_info", timeout=10).json()
    assert info["launch_command"].startswith("--model-path ")  # " ".join(sys.argv[1:])
    # build_engine_startup_time / build_scheduler_startup_time (srt/observability/startup_time.py)
    graph_keys = {"prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend"}
    st = info["startup_time"]
    assert set(st) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph", "tokenizer_e2e"}
    assert set(st["cuda_graph"]) == graph_keys  # GRAPH_MEMORY_USAGE_KEYS (graph_memory_usage.py:5-12)
    state = info["internal_states"][0]
    assert set(state["startup_time"]) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph"}
    mem = state["memory_usage"]
    assert set(mem) == memory_usage_keys(stock_sglang_root)
    assert (
        set(mem["graph"]) == graph_keys and mem["graph"]["target_verify"] > 0 and mem["graph"]["decode"] == 0
    )
    assert state["decode_cuda_graph_memory_gb"] == round(
        sum(mem["graph"][k] for k in ("decode", "target_verify", "draft_decode", "draft_extend")), 3
    )
