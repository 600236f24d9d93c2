"""The simulated server's launch command and resolved arguments, as ``/server_info`` and the log show them.

Starts from SGLang 0.5.23's real defaults (every ``ServerArgs`` field) and applies what the scenario's
launch command asks for plus the resolutions a real server makes: ``NEXTN`` becomes ``EAGLE``, ``auto``
becomes ``flashinfer_mxfp4`` for this checkpoint, the draft inherits the MoE backend and quantization,
``max_running_requests`` is forced to 48 under speculation, the draft revision becomes ``main``; DSPARK
gets steps 1, topk 1 and ``block_size + 1`` draft tokens from the draft checkpoint's config.
"""

from __future__ import annotations

from typing import Any

from validator.sim.scenarios import MODEL_PATH, TOKEN_MAP_PATH, Scenario
from validator.sources.sglang.cli import parse_server_args
from validator.sources.sglang.cli_table import load_table

SGLANG_VERSION = load_table().sglang_version


def _parse(argv: list[str]) -> dict[str, Any]:
    """``argv`` as SGLang's parser fills ``ServerArgs``, without the CLI-only ``config`` option."""
    args, _ = parse_server_args(argv, origin="sim")
    args.pop("config", None)
    return args


def launch_argv(
    scenario: Scenario, *, host: str, port: int, api_key: str | None, extra: tuple[str, ...] = ()
) -> list[str]:
    """What the operator typed (after ``python -m sglang.launch_server``); the key is shown as a file read.
    ``extra``: the simulator's arguments after ``--`` (``--nnodes 2 --node-rank 1 ...``), typed last."""
    argv = ["--model-path", MODEL_PATH, "--host", host, "--port", str(port)]
    argv += ["--moe-runner-backend", scenario.moe_backend_flag]
    argv += ["--mem-fraction-static", f"{scenario.mem_fraction:g}"]
    if scenario.dspark:
        argv += ["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", scenario.draft_path]
    elif scenario.spec:
        argv += ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"]
        argv += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
        argv += ["--speculative-draft-model-path", MODEL_PATH]
        if scenario.token_map:
            argv += ["--speculative-token-map", TOKEN_MAP_PATH]
    if scenario.replayssm_spec:
        argv.append("--enable-linear-replayssm-spec")
    if scenario.replayssm_cache_len is not None:
        argv += ["--linear-replayssm-cache-len", str(scenario.replayssm_cache_len)]
    if scenario.fp32_head_flag:
        argv.append("--enable-fp32-lm-head")
    if scenario.metrics:
        argv.append("--enable-metrics")
    if api_key is not None:
        argv += ["--api-key", api_key]
    return argv + list(extra)


def resolved(
    scenario: Scenario, *, host: str, port: int, api_key: str | None, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``server_args.resolved_dict()``: flat, one key per field, resolved values. The launch command is
    parsed by the same table as the defaults (what the operator typed is not restated here); then come
    the resolutions a real server makes after parsing."""
    args = _parse(launch_argv(scenario, host=host, port=port, api_key=api_key, extra=extra))
    args.update(
        tokenizer_path=MODEL_PATH,  # both default to the model path
        served_model_name=MODEL_PATH,
        quantization="fp8",  # the checkpoint's quantization_config
        moe_runner_backend=scenario.moe_backend,  # auto: flashinfer_mxfp4 for this checkpoint
    )
    if scenario.spec:
        # NEXTN is EAGLE; DSPARK forces steps 1 and topk 1 and takes its width from the draft's block
        # size; the draft inherits the target's quantization and MoE backend; speculation caps requests
        args.update(
            speculative_algorithm=scenario.resolved_algorithm,
            speculative_num_steps=scenario.num_steps,
            speculative_eagle_topk=1,
            speculative_num_draft_tokens=scenario.num_draft_tokens,
            speculative_draft_model_revision="main",
            speculative_draft_model_quantization="fp8",
            speculative_moe_runner_backend=scenario.moe_backend,
            max_running_requests=48,
        )
    return args
