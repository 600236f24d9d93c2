"""The simulator's other recipes: DSpark healthy and broken, the ReplaySSM ring start-up failure,
the SGLang cookbook cell and the baseline, each as SGLang 0.5.23 would show it.

Expected values are written from SGLang's source (the wheel's ``speculative_hook.py`` ``_handle_dspark``,
``dspark_worker_v2.py``, ``memory_pool.py``, ``cuda_graph_setup.py``) and the shipped packs' recipes, not
read back from the simulator.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import web
from tests.support.loopback import free_port, stop
from tests.support.sim_process import REPO, sim_command
from validator.sim.runner import SimServer
from validator.sim.scenarios import SCENARIOS, resolve

# the built-in packs (README, "Rule packs")
SHIPPED_PACKS = {
    "ling-3.0-flash-dgx-spark",
    "ling-3.0-flash-dgx-spark-dspark",
    "sglang-cookbook-dgx-spark",
    "ling-3.0-flash-baseline",
}
# the check IDs a scenario may name as failing: the core IDs and those the recipe packs added
CHECK_IDS = {
    "server.ready", "moe.backend", "moe.humming_runtime", "lm_head.fp8", "lm_head.exclusive", "spec.config",
    "spec.lm_head_shared", "spec.accept_length", "checkpoint.layout", "launch.program", "server.log",
    "attestation.trust", "host.memory_available", "host.cuda_memory_cap", "moe.flashinfer_kernels",
    "spec.dspark", "probe.output", "server.progress",
}  # fmt: skip


def _run(tmp: Path, scenario: str, requests: int = 0, max_new_tokens: int = 256) -> dict[str, Any]:
    log, att = tmp / "server.log", tmp / "att.json"
    with SimServer(
        scenario, speed=1000, startup_seconds=0.05, log_path=log, attestation_path=att, enable_metrics=True
    ) as sim:
        assert sim.wait_ready(10)
        metas = []
        for i in range(requests):
            body = {"text": f"q{i}", "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}}
            metas.append(web.post(f"{sim.url}/generate", json=body, timeout=30).json()["meta_info"])
        info = web.get(f"{sim.url}/server_info").json()
        metrics = web.get(f"{sim.url}/metrics").text
    return {"info": info, "metas": metas, "log": log.read_text(), "metrics": metrics}


def test_table_is_data_every_row_resolves_and_names_known_packs_and_checks() -> None:
    for name, entry in SCENARIOS.items():
        sc = resolve(name)
        assert entry.pack in SHIPPED_PACKS, name
        assert entry.fails <= CHECK_IDS, name
        assert entry.verdict in ("pass", "fail", "inconclusive", None), name
        assert (entry.verdict == "fail") == bool(entry.fails), name
        assert sc.name == name
    # each shipped pack has a healthy simulator
    assert {e.pack for e in SCENARIOS.values() if e.verdict == "pass"} == SHIPPED_PACKS


def test_dspark_resolves_as_speculative_hook_does(tmp_path: Path) -> None:
    out = _run(tmp_path, "dspark", requests=20)
    info, log = out["info"], out["log"]
    # _handle_dspark: steps and topk forced to 1, draft tokens = gamma + 1 with gamma the draft's block size 8
    assert info["speculative_algorithm"] == "DSPARK"
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"]) == (1, 1)
    assert info["speculative_num_draft_tokens"] == 9
    assert info["speculative_draft_model_path"] == "/models/Ling-3.0-flash-dspark"
    assert info["enable_linear_replayssm_spec"] is True and info["linear_replayssm_cache_len"] == 32
    assert info["max_running_requests"] == 48 and info["moe_runner_backend"] == "humming"
    cmd = info["launch_command"]
    assert cmd.startswith("--") and "--speculative-algorithm DSPARK" in cmd  # " ".join(sys.argv[1:])
    assert "--linear-replayssm-cache-len 32" in cmd and "--enable-linear-replayssm-spec" in cmd
    # dspark_worker_v2.py:279-292, model_runner.py:1373 (draft type), cuda_graph_setup.py:757-795
    assert "Initialized DSpark draft runner. " in log and "gamma=8, verify_num_draft_tokens=9" in log
    assert "type=LingDSparkModel" in log
    assert re.search(r"Capture target verify CUDA graph begin\. backend=\w+, num_tokens_per_req=9, ", log)
    assert re.search(r"Capture target verify CUDA graph end\. bs=\[.*\], elapsed=[\d.]+ s, mem usage=", log)
    assert "Online FP8 quantization enabled for lm_head." in log
    assert " TP0]" not in log  # a single-GPU scheduler has no rank prefix (scheduler.py:6279-6291)
    metas = out["metas"]
    completion = sum(m["completion_tokens"] for m in metas)
    verify = sum(m["spec_verify_ct"] for m in metas)
    assert completion / verify == pytest.approx(5.29, rel=0.06)
    for m in metas:
        assert m["spec_num_proposed_drafts"] == 8 * m["spec_verify_ct"]  # K = 9 - 1
        assert (
            len(m["spec_correct_drafts_histogram"]) <= 9
            and sum(m["spec_correct_drafts_histogram"]) == (m["spec_verify_ct"])
        )
    assert max(len(m["spec_correct_drafts_histogram"]) for m in metas) > 4  # grows past NEXTN's 4 bins
    state = info["internal_states"][0]
    assert state["avg_spec_accept_length"] == pytest.approx(5.29, rel=0.06)
    assert state["memory_usage"]["graph"]["target_verify"] > 0


def test_dspark_broken_drafter_accepts_nothing(tmp_path: Path) -> None:
    out = _run(tmp_path, "dspark-broken-drafter", requests=3, max_new_tokens=64)
    for m in out["metas"]:
        assert m["spec_num_correct_drafts"] == 0 and m["spec_accept_rate"] == 0
        assert m["spec_verify_ct"] == m["completion_tokens"] - 1
        assert m["spec_correct_drafts_histogram"] == [m["spec_verify_ct"]]
        assert m["spec_num_proposed_drafts"] == 8 * m["spec_verify_ct"]
    assert "sglang:spec_accept_length{" in out["metrics"]


def test_cookbook_and_baseline(tmp_path: Path) -> None:
    cook = _run(tmp_path / "c", "cookbook", requests=2)
    info, log = cook["info"], cook["log"]
    assert info["moe_runner_backend"] == "flashinfer_mxfp4" and info["speculative_algorithm"] == "DSPARK"
    assert "Online FP8 quantization enabled for lm_head." not in log and "Humming backend" not in log
    assert "moe_runner_backend=flashinfer_mxfp4 for" not in log  # asked for explicitly: no auto override
    base = _run(tmp_path / "b", "baseline", requests=2)
    info, log = base["info"], base["log"]
    assert info["speculative_algorithm"] is None and info["enable_fp32_lm_head"] is True
    assert (
        info["moe_runner_backend"] == "flashinfer_mxfp4" and "--enable-fp32-lm-head" in info["launch_command"]
    )
    assert "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1" in log
    assert "Capture draft" not in log and "accept len" not in log
    assert not any("spec_verify_ct" in m for m in base["metas"])


def _ring_error_templates(root: Path) -> tuple[str, str]:
    """The two messages memory_pool.py raises, as f-string templates read from the wheel."""
    src = (root / "srt" / "mem_cache" / "memory_pool.py").read_text()
    assert 'f"spec-verify ring length must be a power of two, got {L}"' in src
    assert 'f"spec-verify ring too small: {L} < "' in src
    assert 'f"2 * {speculative_num_draft_tokens} (early-flush margin)"' in src
    return (
        "spec-verify ring length must be a power of two, got {L}",
        "spec-verify ring too small: {L} < 2 * {N} (early-flush margin)",
    )


def test_ring_16_logs_sglangs_error_after_weight_load_and_exits_never_listening(
    tmp_path: Path, stock_sglang_root: Path
) -> None:
    expected = "ValueError: " + _ring_error_templates(stock_sglang_root)[1].format(L=16, N=9)
    port = free_port()
    log = tmp_path / "server.log"
    extra = ["--scenario", "dspark-ring-16", "--refuse-until-ready", "--log", str(log)]
    extra += ["--attestation", str(tmp_path / "att.json")]
    cmd = sim_command(port, speed=1000.0, startup=1.0, extra=extra)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        refused = 0
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    pytest.fail("the port opened although the server died while loading")
            except ConnectionRefusedError:
                refused += 1
            time.sleep(0.05)
        assert proc.wait(timeout=10) == -9  # kill_process_tree ends in SIGKILL (utils/common.py:2548-2552)
    finally:
        stop(proc)
    assert refused > 0
    text = log.read_text()
    assert expected in text
    assert text.index("Load weight end.") < text.index("Scheduler hit an exception")
    assert "Received sigquit from a child process. It usually means the child failed." in text
    assert "The server is fired up" not in text and not (tmp_path / "att.json").exists()


@pytest.mark.parametrize(("length", "which"), [(24, 0), (20, 0), (16, 1), (8, 1), (32, None), (64, None)])
def test_ring_rule_is_memory_pools(stock_sglang_root: Path, length: int, which: int | None) -> None:
    sc = dataclasses.replace(resolve("dspark"), replayssm_cache_len=length)
    if which is None:
        assert sc.ring_error is None
    else:
        template = _ring_error_templates(stock_sglang_root)[which]
        assert sc.ring_error == template.format(L=length, N=9)
    assert dataclasses.replace(sc, replayssm_spec=False).ring_error is None  # only with ReplaySSM spec on


def test_ring_failure_in_process_refuses_then_settles_crashed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    sim = SimServer("dspark-ring-16", speed=1000, startup_seconds=0.5, log_path=log, refuse_until_ready=True,
                    attestation_path=tmp_path / "att.json")  # fmt: skip
    with sim:
        with pytest.raises(httpx.ConnectError):
            web.get(f"{sim.url}/health", timeout=2)
        assert sim.wait_ready(10) is False and sim.engine.crashed
        with pytest.raises(httpx.ConnectError):
            web.get(f"{sim.url}/health", timeout=2)
    assert "spec-verify ring too small: 16 < 2 * 9 (early-flush margin)" in log.read_text()


def test_dspark_weights_checker_shows_the_shared_head_module(tmp_path: Path) -> None:
    with SimServer("dspark", speed=1000, startup_seconds=0.05, attestation_path=tmp_path / "att.json") as sim:
        assert sim.wait_ready(10)
        body = {"action": "checksum", "selector": "all"}
        sums = web.post(f"{sim.url}/weights_checker", json=body, timeout=10).json()["ranks"][0]["checksums"]
    target = {k: v for k, v in sums.items() if k.startswith("lm_head.")}
    draft = {k.removeprefix("draft."): v for k, v in sums.items() if k.startswith("draft.lm_head.")}
    assert target == draft and "lm_head.weight_scale" in target  # the module, FP8 scales included
    assert not any(k.startswith("draft.model.eh_proj") for k in sums)  # no NEXTN layer in a DSpark draft
