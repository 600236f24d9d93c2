"""The simulator as a real process on loopback, checked against SGLang 0.5.23's documented HTTP surface.

Expected field lists are written here from ``sglang-0.5.23.md`` (sections 1 and 2) or read from the real
wheel's source (``tests/support/sglang_wheel.py``), never taken from the simulator's code; replies are also
decoded with SGLang's own contract types from the real wheel.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support import web
from tests.support.sglang_wheel import class_fields, memory_usage_keys
from tests.support.sim_process import SimProcess, sim_process, wait_healthy

MODEL_INFO_KEYS = {
    "model_path",
    "served_model_name",
    "tokenizer_path",
    "is_generation",
    "preferred_sampling_params",
    "weight_version",
    "load_format",
    "reasoning_parser",
    "tool_call_parser",
    "disaggregation_mode",
    "has_image_understanding",
    "has_audio_understanding",
    "model_type",
    "architectures",
}
SERVER_INFO_KEYS = {
    "moe_runner_backend",
    "speculative_moe_runner_backend",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_draft_model_quantization",
    "enable_fp32_lm_head",
    "quantization",
    "enable_metrics",
    "decode_log_interval",
    "model_path",
    "served_model_name",
    "tp_size",
    "disable_overlap_schedule",
    "max_running_requests",
    "launch_command",
    "status",
    "max_total_num_tokens",
    "max_req_input_len",
    "startup_time",
    "internal_states",
    "version",
    "frontend",
    "api_key",
}
INTERNAL_STATE_KEYS = {
    "world_size",
    "startup_time",
    "effective_max_running_requests_per_dp",
    "last_gen_throughput",
    "memory_usage",
    "disaggregation_mode",
    "decode_cuda_graph_bs",
    "decode_cuda_graph_memory_gb",
}
META_ALWAYS = {
    "id",
    "finish_reason",
    "prompt_tokens",
    "weight_version",
    "num_retractions",
    "reasoning_tokens",
    "completion_tokens",
    "cached_tokens",
}
META_METRICS = {
    "request_received_ts",
    "first_token_latency",
    "request_finished_ts",
    "response_sent_to_client_ts",
    "api_server_dispatch_finish_ts",
    "decode_throughput",
    "queue_time",
    "forward_entry_time",
    "prefill_finished_time",
}
META_SPEC = {
    "spec_verify_ct",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_accept_rate",
    "spec_accept_length",
    "spec_correct_drafts_histogram",
}
PARALLELISM_KEYS = {"role", "tp_rank", "tp_size", "dp_rank", "dp_size", "pp_rank", "pp_size", "rank", "size"}


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with sim_process(
        tmp_path_factory.mktemp("healthy"), "--scenario", "healthy", "--seed", "7", "--enable-metrics"
    ) as sim:
        yield sim


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with sim_process(tmp_path_factory.mktemp("broken"), "--scenario", "draft-head-weight-only") as sim:
        wait_healthy(sim.url)
        yield sim


def _gen(url: str, body: dict[str, Any], api_types: ModuleType | None = None) -> Any:
    if api_types is not None:
        api_types.GenerateRequest.from_json_value(body)  # what we send is a valid SGLang request
    r = web.post(f"{url}/generate", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_starting_then_ready_and_avg_accept_length_after_40_steps(healthy: SimProcess) -> None:
    # Order matters in this test: it sees the fresh process before any decode step.
    wait_healthy(healthy.url)
    assert web.get(f"{healthy.url}/ready").status_code == 200
    info = web.get(f"{healthy.url}/server_info").json()
    assert "avg_spec_accept_length" not in info["internal_states"][0]
    out = _gen(healthy.url, {"text": "warm", "sampling_params": {"max_new_tokens": 32, "temperature": 0}})
    assert out["meta_info"]["spec_verify_ct"] < 40
    assert "avg_spec_accept_length" not in web.get(f"{healthy.url}/server_info").json()["internal_states"][0]
    _gen(healthy.url, {"text": "longer", "sampling_params": {"max_new_tokens": 400, "temperature": 0}})
    state = web.get(f"{healthy.url}/server_info").json()["internal_states"][0]
    assert 3.0 < state["avg_spec_accept_length"] <= 4.0
    log = healthy.log.read_text()
    assert "accept len: " in log and "Decode batch, #running-req:" in log


def test_health_before_ready_is_503(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--scenario", "slow-start", speed=1.0, startup=2.0) as sim:
        assert web.get(f"{sim.url}/health").status_code == 503
        assert web.get(f"{sim.url}/ready").status_code == 503
        assert web.get(f"{sim.url}/health").content == b""


def test_endpoint_shapes_and_contract_types(
    healthy: SimProcess, api_types: ModuleType, stock_sglang_root: Path
) -> None:
    wait_healthy(healthy.url)
    h = web.get(f"{healthy.url}/health")
    # The Python server answers health with an empty body (HealthCheckResponse is the Rust gateway's JSON).
    assert h.status_code == 200 and h.content == b""
    mi = web.get(f"{healthy.url}/model_info").json()
    assert set(mi) >= MODEL_INFO_KEYS
    assert mi["architectures"] == ["BailingMoeV3ForCausalLM"]
    api_types.GetModelInfoResponse.from_json_value(mi)
    si = web.get(f"{healthy.url}/server_info").json()
    assert set(si) >= SERVER_INFO_KEYS
    assert len(si) > 500  # flat resolved args: one key per ServerArgs field
    assert si["version"] == "0.5.23" and si["speculative_algorithm"] == "EAGLE"
    assert "NEXTN" in si["launch_command"] and si["moe_runner_backend"] == "humming"
    assert (
        si["speculative_num_steps"],
        si["speculative_eagle_topk"],
        si["speculative_num_draft_tokens"],
    ) == (3, 1, 4)
    assert si["enable_fp32_lm_head"] is False and si["max_running_requests"] == 48
    state = si["internal_states"][0]
    assert set(state) >= INTERNAL_STATE_KEYS
    assert set(state["memory_usage"]) >= memory_usage_keys(stock_sglang_root)
    api_types.GetServerInfoResponse.from_json_value(si)
    models = web.get(f"{healthy.url}/v1/models").json()
    assert models["object"] == "list"
    assert set(models["data"][0]) == {
        "id",
        "object",
        "created",
        "owned_by",
        "root",
        "parent",
        "max_model_len",
    }


def test_generate_meta_info_batch_and_stream(healthy: SimProcess, api_types: ModuleType) -> None:
    wait_healthy(healthy.url)
    body = {"text": "What is 2+2?", "sampling_params": {"max_new_tokens": 50, "temperature": 0}}
    one = _gen(healthy.url, body, api_types)
    assert set(one) >= {"text", "output_ids", "meta_info"}
    meta = one["meta_info"]
    assert META_ALWAYS | META_METRICS | META_SPEC | {"e2e_latency"} <= set(meta)
    assert meta["completion_tokens"] == len(one["output_ids"]) == 50
    assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / meta["spec_verify_ct"])
    assert meta["spec_num_proposed_drafts"] == 3 * meta["spec_verify_ct"]
    assert sum(meta["spec_correct_drafts_histogram"]) == meta["spec_verify_ct"]
    api_types.GenerateResponse.from_json_value(one)
    batch = _gen(healthy.url, {"text": ["a b", "c d"], "sampling_params": {"max_new_tokens": 8}}, api_types)
    assert isinstance(batch, list) and len(batch) == 2
    for item in batch:
        api_types.GenerateResponse.from_json_value(item)
    frames: list[Any] = []
    with httpx.stream("POST", f"{healthy.url}/generate", json={**body, "stream": True}, timeout=30) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                frames.append(line[6:])
    assert frames[-1] == "[DONE]"
    decoded = [json.loads(f) for f in frames[:-1]]
    for f in decoded:
        api_types.GenerateResponse.from_json_value(f)
    assert "spec_verify_ct" not in decoded[0]["meta_info"] and "e2e_latency" not in decoded[0]["meta_info"]
    assert META_SPEC | {"e2e_latency"} <= set(decoded[-1]["meta_info"])
    assert decoded[-1]["output_ids"] == one["output_ids"]  # same request, same seed: same answer


def test_openai_endpoints_return_spec_details(healthy: SimProcess, stock_sglang_root: Path) -> None:
    wait_healthy(healthy.url)
    r = web.post(
        f"{healthy.url}/v1/completions",
        json={"prompt": "hi", "max_tokens": 20, "return_spec_tokens_details": True},
    ).json()
    # SpecTokensDetails (srt/entrypoints/openai/protocol.py), the model SGLang builds sglext's details with
    spec_details = class_fields(stock_sglang_root / "srt/entrypoints/openai/protocol.py", "SpecTokensDetails")
    assert set(r["sglext"]["spec_tokens_details"]) == spec_details
    assert r["usage"]["completion_tokens"] == 20
    c = web.post(
        f"{healthy.url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
    ).json()
    assert c["choices"][0]["message"]["role"] == "assistant" and c["sglext"] is None


def test_healthy_accept_length_within_5_percent(healthy: SimProcess) -> None:
    wait_healthy(healthy.url)
    completion = verify = 0
    for i in range(20):
        meta = _gen(
            healthy.url,
            {"text": f"question {i}", "sampling_params": {"max_new_tokens": 256, "temperature": 0}},
        )["meta_info"]
        completion += meta["completion_tokens"]
        verify += meta["spec_verify_ct"]
    assert completion / verify == pytest.approx(3.90, rel=0.05)


def test_metrics_agree_with_requests(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--enable-metrics") as sim:
        wait_healthy(sim.url)
        metas = [
            _gen(sim.url, {"text": f"m{i}", "sampling_params": {"max_new_tokens": 100, "temperature": 0}})[
                "meta_info"
            ]
            for i in range(3)
        ]
        text = web.get(f"{sim.url}/metrics").text
    samples = _samples(text)
    base = {"engine_type": "unified", "model_name": "/models/Ling-3.0-flash-fp4"}
    verify = ("sglang:spec_verify_calls_total", _key(base))
    assert samples[verify] == sum(m["spec_verify_ct"] for m in metas)
    gen = ("sglang:generation_tokens_total", _key({**base, "is_streaming": "false"}))
    assert samples[gen] == 300  # the start-up's warm-up /generate is kept out (SimEngine.warm_up says why)
    keys = {name for name, _ in samples}
    assert {"sglang:spec_accept_length", "sglang:time_to_first_token_seconds_bucket"} <= keys
    assert "sglang:inter_token_latency_seconds_bucket" in keys


def _key(labels: dict[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text -> {(name, labels): value}; label values here contain no commas or quotes."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        pairs = [p.split("=", 1) for p in rest.rstrip("}").split(",") if p]
        out[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return out


def test_broken_draft_accepts_nothing(broken: SimProcess) -> None:
    meta = _gen(broken.url, {"text": "x", "sampling_params": {"max_new_tokens": 128, "temperature": 0}})[
        "meta_info"
    ]
    assert meta["spec_num_correct_drafts"] == 0 and meta["spec_accept_rate"] == 0
    assert meta["spec_accept_length"] == meta["completion_tokens"] / meta["spec_verify_ct"]
    assert meta["spec_verify_ct"] == meta["completion_tokens"] - 1  # one token per round + the prefill token
    assert meta["spec_correct_drafts_histogram"] == [meta["spec_verify_ct"]]  # grows with the largest k seen
    doc = json.loads(broken.attestation.read_text())
    assert doc["lm_head"]["shared_module"] is False and doc["lm_head"]["shared_weight"] is True
    assert doc["lm_head"]["remedy_applied"] is False
    assert doc["target"]["lm_head"]["quant_method"] == "Fp8LinearMethod"
    assert doc["draft"]["lm_head"]["quant_method"] == "UnquantizedEmbeddingMethod"
    assert doc["draft"]["lm_head"]["weight_dtype"] == "float8_e4m3fn"
    assert doc["draft"]["lm_head"]["has_weight_scale"] is False
    sums = web.post(f"{broken.url}/weights_checker", json={"action": "checksum", "selector": "all"}).json()
    checks = sums["ranks"][0]["checksums"]
    assert "lm_head.weight_scale" in checks and "draft.lm_head.weight_scale" not in checks
    assert checks["draft.lm_head.weight"] == checks["lm_head.weight"]


def test_weights_checker_module_shared(healthy: SimProcess) -> None:
    wait_healthy(healthy.url)
    body = web.post(f"{healthy.url}/weights_checker", json={"action": "checksum", "selector": "all"}).json()
    assert {"success", "message", "ranks", "per_engine_checksum"} <= set(body)
    rank = body["ranks"][0]
    assert {"checksums", "per_gpu_checksum", "parallelism_info"} <= set(rank)
    assert all(set(p) == PARALLELISM_KEYS for p in rank["parallelism_info"])
    sums = rank["checksums"]
    target = {k: v for k, v in sums.items() if k.startswith("lm_head.")}
    draft = {k.removeprefix("draft."): v for k, v in sums.items() if k.startswith("draft.lm_head.")}
    assert target == draft and "lm_head.weight_scale" in target


def test_200_concurrent_health_requests(healthy: SimProcess) -> None:
    wait_healthy(healthy.url)

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
        async with httpx.AsyncClient(limits=limits, timeout=30) as client:
            rs = await asyncio.gather(*(client.get(f"{healthy.url}/health") for _ in range(200)))
        return [r.status_code for r in rs]

    assert asyncio.run(burst()) == [200] * 200


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)


def test_idle_cpu_under_one_percent(healthy: SimProcess) -> None:
    wait_healthy(healthy.url)
    time.sleep(0.3)
    hz = os.sysconf("SC_CLK_TCK")
    before, t0 = _cpu_ticks(healthy.proc.pid), time.monotonic()
    time.sleep(2.0)
    used = (_cpu_ticks(healthy.proc.pid) - before) / hz
    assert used / (time.monotonic() - t0) < 0.01


def test_auth_required(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sim-test-key-123\n")
    with sim_process(
        tmp_path, "--scenario", "auth-required", "--api-key-file", str(key_file), "--enable-metrics"
    ) as sim:
        wait_healthy(sim.url)
        assert web.get(f"{sim.url}/ready").status_code == 200
        assert web.get(f"{sim.url}/metrics").status_code == 200
        r = web.get(f"{sim.url}/server_info")
        assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
        assert web.post(f"{sim.url}/generate", json={"text": "x"}).status_code == 401
        ok = web.get(f"{sim.url}/server_info", headers={"Authorization": "Bearer sim-test-key-123"})
        assert ok.status_code == 200 and ok.json()["api_key"] == "sim-test-key-123"  # as the real server does
        log = sim.log.read_text()
    assert "sim-test-key-123" not in log and "'api_key': '***'" in log


def test_crash_after_ready_stops_answering(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--scenario", "crash-after-ready") as sim:
        wait_healthy(sim.url)
        with pytest.raises(httpx.TransportError):
            web.post(f"{sim.url}/generate", json={"text": "x"}, timeout=10)
        assert sim.proc.wait(timeout=10) == -9  # kill_process_tree ends in SIGKILL, as SGLang does
        with pytest.raises(httpx.ConnectError):
            web.get(f"{sim.url}/health", timeout=2)
        assert "Scheduler hit an exception" in sim.log.read_text()


def test_sigterm_exits_cleanly(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--scenario", "no-spec,no-plugin") as sim:
        wait_healthy(sim.url)
        assert not sim.attestation.exists()
        info = web.get(f"{sim.url}/server_info").json()
        assert info["speculative_algorithm"] is None
        meta = _gen(sim.url, {"text": "x", "sampling_params": {"max_new_tokens": 10}})["meta_info"]
        assert not META_SPEC & set(meta)
        sim.proc.send_signal(signal.SIGTERM)
        assert sim.proc.wait(timeout=10) == 0


def test_same_seed_same_output_other_seed_differs(tmp_path: Path) -> None:
    body = {"text": "determinism", "sampling_params": {"max_new_tokens": 64, "temperature": 0.6}}
    outs = []
    for seed in ("1", "1", "2"):
        with sim_process(tmp_path, "--seed", seed, "--scenario", "metrics-disabled") as sim:
            wait_healthy(sim.url)
            out = _gen(sim.url, body)
            assert web.get(f"{sim.url}/metrics").status_code == 404
            assert not META_METRICS & set(out["meta_info"])
            outs.append((out["output_ids"], out["meta_info"]["spec_correct_drafts_histogram"]))
    assert outs[0] == outs[1] and outs[0] != outs[2]
