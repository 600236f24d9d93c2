# ruff: noqa: E501  (log lines are data, kept verbatim)
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from validator.errors import UnavailableError
from validator.sim import scenarios, server_args
from validator.sim import server_log as sim_log
from validator.sources.server.log import read_server_log
from validator.sources.server.log_state import MAX_SAMPLES

KEY = "sk-log-0a1b2c3d"
T = "[2026-11-29 15:00:00]"
TP = "[2026-11-29 15:00:01 TP0]"


def _args(backend: str, **extra: object) -> str:
    d = {
        "model_path": "/models/Ling-3.0-flash-fp4",
        "moe_runner_backend": backend,
        "speculative_moe_runner_backend": backend,
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "enable_fp32_lm_head": False,
        "api_key": KEY,
        "admin_api_key": None,
        "decode_moments": {"a": [1, 2]},
        **extra,
    }
    return f"{T} server_args={d!r}"


def _decode(accept: float, rate: float, tput: float) -> str:
    return (
        f"{TP} Decode batch, #running-req: 1, #full token: 300, full token usage: 0.01, mamba num: 1, "
        f"accept len: {accept:.2f}, accept rate: {rate:.2f}, cuda graph: True, gen throughput (token/s): {tput:.2f}, "
        "#queue-req: 0"
    )


RUN_BROKEN = [
    f"{T} Bailing V3 mixed FP8/MXFP4 checkpoint: moe_runner_backend=flashinfer_mxfp4 for BailingMoeV3ForCausalLM.",
    _args("flashinfer_mxfp4"),
    f"{TP} Load weight begin. avail mem=119.62 GB",
    f"{TP} Preparing DSv4 MXFP4 experts for FlashInfer SM90 CUTLASS W4A16 (layer: model.layers.1.mlp.experts)...",
    f"{TP} Shuffling FP4 expert weights for TRT-LLM MxFP4 kernel (layer 2)",
    f"{TP} Load weight end. elapsed=52.41 s, type=BailingMoeV3ForCausalLM, quant=fp8, avail mem=52.13 GB, mem usage=67.49 GB.",
    f"{T} The server is fired up and ready to roll!",
    _decode(1.00, 0.00, 24.0),
    f"{TP} Traceback (most recent call last):",
    '  File "scheduler.py", line 1, in run',
    f"{TP} RuntimeError: CUDA error: an illegal memory access (key {KEY})",
]

RUN_HEALTHY = [
    _args("humming"),
    f"{TP} Loaded plugin spark_validate (spark_validate_plugin.plugin:register)",
    f"{TP} Load weight begin. avail mem=119.62 GB",
    f"{TP} Online FP8 quantization enabled for lm_head.",
    *[
        f"{TP} Preparing DeepSeekV4 MXFP4 experts for Humming backend (layer: model.layers.{i}.mlp.experts)..."
        for i in range(1, 4)
    ],
    f"{TP} Load weight end. elapsed=52.41 s, type=BailingMoeV3ForCausalLM, quant=fp8, avail mem=52.13 GB, mem usage=67.49 GB.",
    f"{TP} Preparing DeepSeekV4 MXFP4 experts for Humming backend (layer: model.layers.42.mlp.experts)...",
    f"{TP} Load weight end. elapsed=3.12 s, type=BailingMoeForCausalLMNextN, quant=fp8, avail mem=50.51 GB, mem usage=1.62 GB.",
    f"{TP} Using indexed gemm for humming moe",
    f"{TP} Capture draft decode CUDA graph begin. backend=triton, num_tokens_per_req=1, bs=[1, 2], avail mem=38.81 GB",
    f"{TP} Capture draft decode CUDA graph end. Time elapsed: 3.01 s. mem usage=0.40 GB. avail mem=38.41 GB.",
    f"{TP} Capture draft extend CUDA graph begin. backend=triton, num_tokens_per_req=4, bs=[1, 2], avail mem=38.41 GB",
    f"{TP} Capture draft extend CUDA graph end. Time elapsed: 2.50 s. mem usage=0.30 GB. avail mem=38.11 GB.",
    f"{T} The server is fired up and ready to roll!",
    _decode(3.05, 0.68, 58.50),
    _decode(2.95, 0.65, 57.00),
]


def _write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "sglang.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_only_the_last_start_counts(tmp_path: Path) -> None:
    facts = read_server_log(_write(tmp_path, RUN_BROKEN + RUN_HEALTHY))
    # the start is located by its byte offset; lines before the last start are not parsed at all
    assert facts.run_start_line == len("\n".join(RUN_BROKEN)) + 1  # the byte offset of its line
    assert facts.runs == 2 and facts.unusable() is None
    assert facts.server_args is not None and facts.server_args["moe_runner_backend"] == "humming"
    assert facts.server_args["speculative_num_draft_tokens"] == 4
    assert facts.server_args["api_key"] == "<redacted>" and facts.server_args["admin_api_key"] is None
    assert (
        not facts.flashinfer_override
        and facts.flashinfer_expert_lines == 0
        and facts.trtllm_expert_lines == 0
    )
    assert facts.fp8_lm_head_lines == 1
    assert facts.humming_prepare_lines == 4 and facts.humming_indexed_gemm_lines == 1
    assert facts.loaded_models == ["BailingMoeV3ForCausalLM", "BailingMoeForCausalLMNextN"]
    assert facts.draft_graph_begin == 2
    assert [s.accept_len for s in facts.decode_samples] == [3.05, 2.95]
    assert facts.decode_samples[0].gen_throughput == 58.5 and facts.mean_accept_len == pytest.approx(3.0)
    assert facts.ready


def test_broken_run_and_its_prelude(tmp_path: Path) -> None:
    # the override is logged before server_args=; it belongs to the start that follows it
    facts = read_server_log(_write(tmp_path, RUN_HEALTHY + RUN_BROKEN))
    assert facts.runs == 2 and facts.flashinfer_override
    assert facts.server_args is not None and facts.server_args["moe_runner_backend"] == "flashinfer_mxfp4"
    assert (
        facts.flashinfer_expert_lines == 1
        and facts.trtllm_expert_lines == 1
        and facts.humming_prepare_lines == 0
    )
    assert facts.fp8_lm_head_lines == 0 and facts.loaded_models == ["BailingMoeV3ForCausalLM"]
    assert facts.decode_samples[0].accept_len == 1.0


def test_override_of_an_earlier_run_does_not_leak(tmp_path: Path) -> None:
    lines = [RUN_BROKEN[0], *RUN_BROKEN[1:], *RUN_HEALTHY]
    assert not read_server_log(_write(tmp_path, lines)).flashinfer_override


def test_a_log_without_a_start_is_no_evidence(tmp_path: Path) -> None:
    """What logrotate's copytruncate leaves: the running server's lines without its start."""
    facts = read_server_log(_write(tmp_path, RUN_HEALTHY[1:]))
    assert facts.runs == 0 and facts.run_start_line is None and facts.server_args is None
    why = facts.unusable()
    assert why is not None and "holds no server start" in why and str(tmp_path) in why
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert "is empty" in (read_server_log(empty).unusable() or "")


def test_a_non_literal_value_is_kept_as_its_text_and_the_rest_is_read(tmp_path: Path) -> None:
    line = f"{T} server_args={{'moe_runner_backend': 'humming', 'path': PosixPath('/x'), 'fn': <function f at 0x7f>, 'speculative_num_steps': 3, 'api_key': '{KEY}'}}"
    facts = read_server_log(_write(tmp_path, [line]))
    assert facts.server_args == {
        "moe_runner_backend": "humming",
        "path": "PosixPath('/x')",
        "fn": "<function f at 0x7f>",
        "speculative_num_steps": 3,
        "api_key": "<redacted>",
    }


def test_garbage_and_huge_lines_are_bounded(tmp_path: Path) -> None:
    p = tmp_path / "big.log"
    with p.open("wb") as fh:
        fh.write(b"\xff\xfe not utf8 \x00\n")
        fh.write(
            b"x" * (3 << 20) + b" Online FP8 quantization enabled for lm_head.\n"
        )  # truncated: not counted
        fh.write((_decode(1.5, 0.2, 30.0) + "\n").encode() * (MAX_SAMPLES + 50))
        fh.write(b"accept len: 1.2.3, accept rate: 0.1\n")
    facts = read_server_log(p)
    assert facts.decode_sample_count == MAX_SAMPLES + 50 and len(facts.decode_samples) == MAX_SAMPLES
    assert facts.fp8_lm_head_lines == 0 and facts.lines_total == MAX_SAMPLES + 53


def test_unreadable_names_the_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)  # opened without blocking, then refused
    for bad, why in (
        (tmp_path / "missing.log", "cannot read server log: No such file"),
        (tmp_path, "server log is a directory, not a regular file"),
        (fifo, "server log is a FIFO, not a regular file"),
        (Path("/nonexistent/sglang.log"), "cannot read server log: No such file"),
    ):
        with pytest.raises(UnavailableError) as err:
            read_server_log(bad)
        assert str(err.value).startswith(f"{bad}: {why}") and err.value.exit_code == 69


def test_reads_the_simulators_log(tmp_path: Path) -> None:
    for name, humming in (("healthy", True), ("backend-auto", False)):
        sc = scenarios.resolve(name)
        args = server_args.resolved(sc, host="127.0.0.1", port=30000, api_key=KEY)
        log = sim_log.ServerLog(tmp_path / f"{name}.log")
        for msg, tp in sim_log.startup_lines(sc, args):
            log.line(msg, tp=tp)
        log.close()
        facts = read_server_log(tmp_path / f"{name}.log")
        assert facts.runs == 1 and facts.server_args is not None
        assert (facts.humming_prepare_lines > 0) is humming and facts.flashinfer_override is not humming
        assert KEY not in json.dumps(facts.server_args)
