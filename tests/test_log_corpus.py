"""Real SGLang logs (``tests/corpus/logs/``, sources in its README) read as a careful SGLang reader would:
the start found where SGLang logged one and its arguments read from either repr, no fact taken from lines
that are not SGLang's evidence, and "no evidence" only where the log truly holds none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.loopback import free_port
from validator.server_settings import logged_settings
from validator.sources.server.log import read_server_log
from validator.sources.server.log_grammar import Start, read_line

CORPUS = Path(__file__).parent / "corpus" / "logs"


def test_every_corpus_log_is_cited_and_small() -> None:
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    logs = sorted(CORPUS.glob("*.log"))
    assert len(logs) >= 6
    for log in logs:
        assert f"`{log.name}`" in readme, log.name
        assert log.stat().st_size < 60_000, log.name


def test_rocm_tp8_dataclass_start_is_read_fully() -> None:
    facts = read_server_log(CORPUS / "rocm-mi355x-tp8-2026-02.log")
    assert facts.unusable() is None and facts.runs == 1
    args = facts.server_args
    assert args is not None
    assert args["model_path"] == "zai-org/GLM-5-FP8" and args["tp_size"] == 8
    assert args["kv_cache_dtype"] == "fp8_e4m3" and args["attention_backend"] == "triton"
    assert args["nsa_prefill_backend"] == "flashmla_auto" and args["cuda_graph_max_bs"] == 512
    assert args["speculative_algorithm"] is None and args["api_key"] is None
    assert args["cuda_graph_bs"][-1] == 512 and args["mm_process_config"] == {}  # type: ignore[index]
    settings = logged_settings(facts)
    assert settings is not None and (settings.tp_size, settings.moe_runner_backend) == (8, "auto")
    # the start died in CUDA-graph capture on every rank; the first rank's exception is the reason
    assert facts.start_failure == "TypeError: cannot unpack non-iterable ForwardMetadata object"
    assert facts.decode_sample_count == 0 and not facts.ready and facts.crash is None
    assert facts.loaded_models == []  # the weight-load lines were cut: nothing is claimed of the head
    assert not facts.head_dtype_known


def test_a_newer_rocm_build_logs_more_fields_and_they_are_read() -> None:
    older = read_server_log(CORPUS / "rocm-mi355x-tp8-2026-02.log").server_args
    facts = read_server_log(CORPUS / "rocm-mi355x-tp8-2026-02-newer.log")
    assert facts.unusable() is None and facts.runs == 1 and facts.start_failure is None
    args = facts.server_args
    assert args is not None and older is not None
    assert args["random_seed"] == 929547586 and args["tp_size"] == 8 and args["mamba_backend"] == "triton"
    assert set(args) - set(older) == {
        "enable_aiter_allreduce_fusion", "enable_mm_global_cache", "linear_attn_backend",
        "linear_attn_decode_backend", "linear_attn_prefill_backend", "mamba_backend",
    }  # fmt: skip
    assert len(args) == 333


def test_the_lmsys_image_start_is_read_past_a_foreign_logger() -> None:
    """vLLM, installed in the same image, logs in its own format (``INFO 02-26 06:24:38 [...]``): those
    lines are no SGLang record, and the start around them is read whole."""
    facts = read_server_log(CORPUS / "rocm-mi355x-tp8-lmsys-v0.5.8.log")
    assert facts.unusable() is None and facts.runs == 1
    args = facts.server_args
    assert args is not None and len(args) == 325
    assert (args["attention_backend"], args["mem_fraction_static"], args["tp_size"]) == ("aiter", 0.7718, 8)
    assert args["nsa_decode_backend"] == "fa3" and args["mamba_ssm_dtype"] == "float32"


def test_docs_ci_offline_engine_start_with_level_and_location() -> None:
    log = CORPUS / "docs-ci-2026-03-offline-engine.log"
    start = [ln for ln in log.read_text(encoding="utf-8").splitlines() if "server_args=" in ln]
    assert len(start) == 1 and start[0].startswith("[2026-03-03 23:20:59] INFO engine.py:158: ")
    assert isinstance(read_line(start[0]), Start)
    facts = read_server_log(log)
    assert facts.unusable() is None and facts.runs == 1
    settings = logged_settings(facts)
    assert settings is not None
    assert settings.model_path == "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B" and settings.tp_size == 1
    assert settings.speculative_algorithm is None and not settings.enable_fp32_lm_head
    assert facts.server_args is not None and facts.server_args["mem_fraction_static"] == 0.83
    assert facts.server_args["log_level"] == "error"
    # the offline engine serves no HTTP: no ready line, and no decode interval was logged
    assert not facts.ready and facts.decode_sample_count == 0


def test_a_later_docs_build_logs_other_fields_and_they_are_read() -> None:
    facts = read_server_log(CORPUS / "docs-ci-2026-03-21-offline-engine.log")
    earlier = read_server_log(CORPUS / "docs-ci-2026-03-offline-engine.log").server_args
    assert facts.unusable() is None and facts.runs == 1
    args = facts.server_args
    assert args is not None and earlier is not None and len(args) == 345
    assert (args["reasoning_parser"], args["disable_cuda_graph"], args["use_ray"]) == (
        "deepseek-r1",
        True,
        False,
    )
    assert "stream_output" in earlier and "stream_output" not in args
    assert {"ssl_keyfile", "pre_warm_nccl", "modelexpress_config"} <= set(args) - set(earlier)


def test_a_warning_level_log_holds_no_start_and_says_so() -> None:
    """``--log-level warning`` hides the launcher's ``server_args=`` line: the log is truly no evidence
    of the running server, and that is all a reader may say (no start, no sample, no failure)."""
    facts = read_server_log(CORPUS / "docs-ci-2025-09-eagle-warning.log")
    assert facts.runs == 0 and facts.server_args is None and facts.decode_sample_count == 0
    assert facts.start_failure is None and facts.crash is None
    assert "holds no server start" in str(facts.unusable())


def _check_json(log: Path) -> dict[str, Any]:
    url = f"http://127.0.0.1:{free_port()}"
    run = run_cli("check", "--url", url, "--wait", "1", "--log", str(log), "--format", "json")
    assert run.returncode == 69, run.stderr[-2000:]  # nothing listening: inconclusive, never a fail
    assert "Traceback" not in run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    assert "fail" not in {c["status"] for c in report["checks"]}, report["checks"]
    return report


def _check_of(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == check_id)


def test_check_reads_a_real_start_without_a_false_fail() -> None:
    """``check --log`` with nothing listening: the real start is read, but with no server to match it
    ``server.log`` is not proven (never a pass on a log alone), and nothing fails on a log that never
    reached the weight load (no FP8-head line is no BF16 head)."""
    report = _check_json(CORPUS / "docs-ci-2026-03-offline-engine.log")
    log = _check_of(report, "server.log")
    assert log["status"] == "error" and log["evidence"]["starts_read"] == 1, log
    assert "no server answered" in log["message"], log
    assert _check_of(report, "lm_head.fp8")["status"] != "fail"


def test_check_does_not_judge_a_start_that_had_died_before_it_began() -> None:
    """A dead start already in the log may be an earlier attempt than the server being waited for: it is
    named, not judged (server.log error, exit 69)."""
    report = _check_json(CORPUS / "rocm-mi355x-tp8-2026-02.log")
    log = _check_of(report, "server.log")
    assert log["status"] == "error" and "already died" in log["message"], log
    assert "TypeError: cannot unpack non-iterable ForwardMetadata object" in log["message"]
