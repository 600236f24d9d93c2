"""Every scenario, in-process: each surface (server_info, log, attestation, replies) shows one state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import web
from validator.errors import UsageError
from validator.sim.decode import chain_probability
from validator.sim.runner import SimServer
from validator.sim.scenarios import SCENARIOS, resolve


def _run(tmp: Path, scenario: str, **kw: object) -> tuple[dict[str, object], str, dict[str, object] | None]:
    log, att = tmp / "server.log", tmp / "att.json"
    with SimServer(
        scenario, speed=1000, startup_seconds=0.05, log_path=log, attestation_path=att, **kw
    ) as sim:
        assert sim.wait_ready(10)
        headers = {"Authorization": f"Bearer {kw['api_key']}"} if "api_key" in kw else {}
        info = web.get(f"{sim.url}/server_info", headers=headers).json()
    doc = json.loads(att.read_text()) if att.exists() else None
    return info, log.read_text(), doc


def test_backend_auto_everywhere(tmp_path: Path) -> None:
    info, log, doc = _run(tmp_path, "backend-auto")
    assert info["moe_runner_backend"] == "flashinfer_mxfp4" == info["speculative_moe_runner_backend"]
    assert "--moe-runner-backend auto" in str(info["launch_command"])
    assert "moe_runner_backend=flashinfer_mxfp4 for BailingMoeV3ForCausalLM." in log
    assert "Humming backend" not in log and "FlashInfer SM120 CUTLASS" in log
    assert doc is not None and doc["target"]["moe"]["runner_backends"] == {"flashinfer_mxfp4": 41}


@pytest.mark.parametrize(
    ("scenario", "fp8_lines", "fp32", "dtype"),
    [("healthy", 1, False, "float8_e4m3fn"), ("fp32-head", 0, True, "bfloat16"),
     ("fp8-and-fp32", 1, True, "float8_e4m3fn"), ("fp8-ignored", 0, False, "bfloat16")],
)  # fmt: skip
def test_lm_head_scenarios(tmp_path: Path, scenario: str, fp8_lines: int, fp32: bool, dtype: str) -> None:
    info, log, doc = _run(tmp_path, scenario)
    assert log.count("Online FP8 quantization enabled for lm_head.") == fp8_lines
    assert (
        info["enable_fp32_lm_head"] is fp32
        and ("--enable-fp32-lm-head" in str(info["launch_command"])) is fp32
    )
    assert f"'enable_fp32_lm_head': {fp32}" in log
    assert doc is not None and doc["target"]["lm_head"]["weight_dtype"] == dtype
    if scenario == "fp8-ignored":
        assert (
            doc["env"]["SGLANG_ENABLE_FP8_LM_HEAD"] == "1" and doc["sglang"]["declares_fp8_lm_head"] is False
        )


def test_startup_log_order_and_attestation_schema(tmp_path: Path) -> None:
    _, log, doc = _run(tmp_path, "healthy")
    order = ["server_args=", "Load weight begin", "Online FP8 quantization enabled for lm_head.",
             "Preparing DeepSeekV4 MXFP4 experts for Humming backend", "type=BailingMoeV3ForCausalLM",
             "type=BailingMoeForCausalLMNextN", "Capture draft decode CUDA graph begin",
             "Capture draft extend CUDA graph begin. backend=full, num_tokens_per_req=4",
             "The server is fired up and ready to roll!"]  # fmt: skip
    positions = [log.index(s) for s in order]
    assert positions == sorted(positions)
    assert log.count("Preparing DeepSeekV4 MXFP4 experts for Humming backend") == 42  # 41 target + 1 draft
    assert doc is not None
    assert set(doc) == {"schema", "written_at", "writer", "process", "server", "sglang", "env", "target",
                        "draft", "lm_head", "hooks", "errors"}  # fmt: skip
    assert doc["schema"] == "spark-validate.attestation/v2"
    assert doc["lm_head"] == {"shared_module": True, "shared_weight": True, "remedy_applied": False,
                              "worker": "EagleDraftWorker", "own_vocab_modules": None,
                              "shared_embed": None, "hot_token_count": None}  # fmt: skip
    assert doc["draft"]["model_class"] == "BailingMoeForCausalLMNextN"
    assert doc["target"]["lm_head"]["weight_shape"] == [157184, 2560]


def test_degenerate_flaky_malformed(tmp_path: Path) -> None:
    body = {"text": "q", "sampling_params": {"max_new_tokens": 32}}
    with SimServer(
        "degenerate-output", speed=1000, startup_seconds=0.01, attestation_path=tmp_path / "a"
    ) as sim:
        sim.wait_ready(10)
        out = web.post(f"{sim.url}/generate", json=body).json()
    assert out["output_ids"] == [0] * 32 and out["text"] == "!" * 32
    patterns = []
    for _ in range(2):
        with SimServer(
            "flaky-5xx", seed=3, speed=1000, startup_seconds=0.01, attestation_path=tmp_path / "a"
        ) as sim:
            sim.wait_ready(10)
            patterns.append([web.get(f"{sim.url}/model_info").status_code for _ in range(30)])
            assert web.get(f"{sim.url}/health").status_code == 200
    assert patterns[0] == patterns[1] and {200, 503} == set(patterns[0])
    with SimServer(
        "malformed-json", speed=1000, startup_seconds=0.01, attestation_path=tmp_path / "a"
    ) as sim:
        sim.wait_ready(10)
        r = web.get(f"{sim.url}/server_info")
        assert r.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.text)


def test_scenario_names_and_combinations() -> None:
    assert set(SCENARIOS) >= {
        "healthy", "draft-head-weight-only", "backend-auto", "fp32-head", "fp8-and-fp32", "fp8-ignored",
        "no-spec", "slow-start", "crash-after-ready", "flaky-5xx", "malformed-json", "degenerate-output",
        "metrics-disabled", "auth-required", "no-plugin",
    }  # fmt: skip
    combo = resolve(["backend-auto,no-plugin", "draft-head-weight-only"])
    assert combo.moe_backend == "flashinfer_mxfp4" and not combo.plugin and combo.draft_broken
    with pytest.raises(UsageError):
        resolve("fp32-head,fp8-and-fp32")  # fp8_env False vs True
    with pytest.raises(UsageError):
        resolve("no-such-scenario")
    with pytest.raises(UsageError):
        SimServer("auth-required")  # a key is required


@pytest.mark.parametrize("mean", [3.90, 2.68, 1.5])
def test_chain_probability_matches_mean(mean: float) -> None:
    p = chain_probability(mean)
    assert 1 + p + p**2 + p**3 == pytest.approx(mean, abs=1e-9)
