"""``check --rules auto`` from the user's side: it waits once, and reaches the verdict of the pack it picks.

``--wait N`` bounds the whole wait whatever the pack choice: auto reads the server (or its log) once,
picks the pack, and judges those same facts; only a server that answered is read again, for the probe.
A start that died is judged by the recipe its own logged ``server_args`` show, exactly as the pack
named on the command line would judge it.

Against the simulator, the real ``check`` front door runs in this process (tests/support/in_process.py,
held to real processes by tests/test_live_in_process.py), and so does it against the document server on
loopback and against nothing listening.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.check_helpers import CheckRun
from tests.support.document_server import document_server, sim_documents
from tests.support.in_process import check_in_process, sim_in_process
from tests.support.loopback import free_port

DSPARK = "ling-3.0-flash-dgx-spark-dspark"


@pytest.mark.timeout(60)
def test_wait_bounds_the_whole_wait_with_nothing_listening() -> None:
    """Nothing listens: --wait 6 takes 6 s (it took twice --wait when auto waited once to pick the pack and
    again to check with it: 8.4 s for --wait 4). The check runs in this process, so no interpreter's
    start is in the time (it took 14.4 s as a process on a loaded 2-core box); the bound leaves 4.5 s for
    a loaded machine and is still below 2 x 6 s."""
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    run = check_in_process(url, "--rules", "auto", "--wait", "6")
    took = time.monotonic() - started
    run.not_ready()
    assert took < 10.5, f"--wait 6 took {took:.1f} s"
    auto = run.check("rules.auto")  # no model read: no pack is chosen, unknown stays unknown
    assert auto["status"] == "error" and "could not be read" in auto["message"], auto
    assert run.report is not None and run.report["rule_pack"] == "none"


@pytest.mark.timeout(300)  # the bound the two check processes had (150 s each)
def test_auto_on_a_dead_dspark_start_reaches_the_dspark_packs_verdict(tmp_path: Path) -> None:
    """sim dspark-ring-16 dies at pool allocation: with the DSpark pack named, check fails spec.dspark from
    the dead start's logged server_args (78); auto must pick that pack from the same log line and reach
    the same verdict in about the same time (it gave INCONCLUSIVE against the default pack after waiting
    twice)."""
    timings: dict[str, float] = {}
    runs: dict[str, CheckRun] = {}
    for rules in (DSPARK, "auto"):
        # it dies while loading, before it binds its port (as a real launcher): nothing to wait for there
        with sim_in_process(tmp_path, "--scenario", "dspark-ring-16", startup=1.0, wait_listen=False) as sim:
            started = time.monotonic()
            runs[rules] = check_in_process(sim, "--rules", rules, "--wait", "60", "--log", str(sim.log))
            timings[rules] = time.monotonic() - started
    named, auto = runs[DSPARK], runs["auto"]
    assert named.rc == 78 and auto.rc == 78, auto.explain()
    assert named.report is not None and auto.report is not None
    assert auto.report["rule_pack"] == DSPARK
    assert auto.check("spec.dspark")["status"] == "fail"
    picked = auto.check("rules.auto")
    assert picked["status"] == "pass" and "log" in picked["message"], picked
    same = {c["id"]: c["status"] for c in named.report["checks"]}
    got = {c["id"]: c["status"] for c in auto.report["checks"] if c["id"] != "rules.auto"}
    assert got == same
    assert timings["auto"] < timings[DSPARK] + 10.0, timings


# ---- the model decides first: a server answering as SGLang 0.5.23 does, for another model ----

QWEN_MODEL_INFO = {  # /model_info of SGLang 0.5.23 (its keys) serving Qwen2-0.5B
    "model_path": "Qwen/Qwen2-0.5B",
    "served_model_name": "Qwen/Qwen2-0.5B",
    "tokenizer_path": "Qwen/Qwen2-0.5B",
    "is_generation": True,
    "preferred_sampling_params": None,
    "weight_version": "default",
    "load_format": "auto",
    "reasoning_parser": None,
    "tool_call_parser": None,
    "disaggregation_mode": "null",
    "has_image_understanding": False,
    "has_audio_understanding": False,
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
}


def _model_info(base: dict[str, Any], path: str, arch: str, model_type: str) -> dict[str, Any]:
    return {
        **base,
        "model_path": path,
        "served_model_name": path,
        "tokenizer_path": path,
        "architectures": [arch],
        "model_type": model_type,
    }


def test_a_qwen_server_matches_no_shipped_pack() -> None:
    """A plain Qwen2-0.5B server (no speculation, auto MoE): it "followed ling-3.0-flash-baseline" when
    only the flags decided. No pack is written for it: nothing is checked, the report says so, and the
    verdict is inconclusive (69), with --allow-partial too (nothing unjudged is a pass)."""
    info, _ = sim_documents("healthy")
    for key in [k for k in info if k.startswith("speculative_")]:
        info[key] = None
    info.update(model_path="Qwen/Qwen2-0.5B", moe_runner_backend="auto", enable_fp32_lm_head=True)
    info.pop("launch_command", None)
    with document_server(info, QWEN_MODEL_INFO) as url:
        for extra in ((), ("--allow-partial",)):
            run = check_in_process(url, "--rules", "auto", "--no-probe", "--wait", "5", *extra)
            run.inconclusive()
            assert run.report is not None and run.report["rule_pack"] == "none", run.explain()
            assert [c["id"] for c in run.report["checks"]] == ["rules.auto"]
            auto = run.check("rules.auto")
            assert auto["status"] == "error" and auto["severity"] == "critical"
            assert "Qwen2ForCausalLM (model_type qwen2)" in auto["message"]
            assert "/model_info" in auto["message"] and "no shipped pack is written for it" in auto["message"]
            assert "--rules PATH" in str(auto["remedy"])


def test_a_deepseek_dspark_server_is_not_the_cookbook_recipe() -> None:
    """DSPARK + flashinfer_mxfp4 + BF16 head is the cookbook cell's triple, but the model is DeepSeek's."""
    info, model = sim_documents("cookbook")
    info["model_path"] = "deepseek-ai/DeepSeek-V3"
    model = _model_info(model, "deepseek-ai/DeepSeek-V3", "DeepseekV3ForCausalLM", "deepseek_v3")
    with document_server(info, model) as url:
        run = check_in_process(url, "--rules", "auto", "--no-probe", "--wait", "5")
    run.inconclusive()
    assert run.report is not None and run.report["rule_pack"] == "none", run.explain()
    assert "DeepseekV3ForCausalLM" in run.check("rules.auto")["message"]


def test_the_same_cookbook_server_with_ling_is_the_cookbook_pack() -> None:
    """Control for the test above: the same documents with Ling's model_info pick the cookbook pack."""
    info, model = sim_documents("cookbook")
    with document_server(info, model) as url:
        run = check_in_process(url, "--rules", "auto", "--no-probe", "--wait", "5")
    assert run.report is not None and run.report["rule_pack"] == "sglang-cookbook-dgx-spark", run.explain()
    auto = run.check("rules.auto")
    assert auto["status"] == "pass" and "BailingMoeV3ForCausalLM" in auto["message"]


def test_resolved_eagle_with_the_models_own_checkpoint_is_nextn_without_launch_command() -> None:
    """Builds whose /server_info has no launch_command: SGLang reports NEXTN as EAGLE, and a draft that is
    the model's own checkpoint (its MTP layer) is what NEXTN is, so the NEXTN pack is picked exactly."""
    info, model = sim_documents("healthy")
    info.pop("launch_command", None)
    assert info["speculative_algorithm"] == "EAGLE"
    assert info["speculative_draft_model_path"] == info["model_path"]
    with document_server(info, model) as url:
        run = check_in_process(url, "--rules", "auto", "--no-probe", "--wait", "5")
    assert run.report is not None and run.report["rule_pack"] == "ling-3.0-flash-dgx-spark", run.explain()
    auto = run.check("rules.auto")
    assert auto["status"] == "pass" and "NEXTN speculation" in auto["message"], auto
    # a separate EAGLE draft is not NEXTN: no shipped recipe, the default pack with a warning
    info["speculative_draft_model_path"] = "/models/some-eagle-draft"
    with document_server(info, model) as url:
        run = check_in_process(url, "--rules", "auto", "--no-probe", "--wait", "5")
    assert (
        run.check("rules.auto")["status"] == "warn"
        and "EAGLE speculation" in run.check("rules.auto")["message"]
    )


def test_a_dspark_server_whose_build_ignored_the_fp8_head(tmp_path: Path) -> None:
    """sim dspark,fp8-ignored: DSPARK + humming, the FP8 variable set on a stock build, so the head runs in
    BF16. With the attestation (its environment shows the variable asked for) auto picks the DSpark pack
    exactly; with only the log (the head is BF16, the request invisible) it picks the DSpark pack too and
    says the FP8 head is not in effect. Either way lm_head.fp8 fails, and nothing sends the operator to
    NEXTN (spec.config passes)."""
    from tests.support.check_helpers import evidence_files

    for evidence, exact in (("attestation", True), ("log", False)):
        with sim_in_process(tmp_path, "--scenario", "dspark,fp8-ignored") as sim:
            files = evidence_files(sim) if evidence == "attestation" else ("--log", str(sim.log))
            run = check_in_process(sim, "--rules", "auto", "--wait", "20", *files)
        assert run.rc == 78 and run.report is not None, run.explain()
        assert run.report["rule_pack"] == DSPARK, run.explain()
        assert run.check("rules.auto")["status"] == ("pass" if exact else "warn")
        assert run.with_status("fail") == {"lm_head.fp8"}, run.explain()
        assert run.check("spec.config")["status"] == "pass"
