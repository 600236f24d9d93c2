"""A server log in SGLang's format, so log-reading checks and operators' grep rules can be tried.

Format ``[%(asctime)s{prefix}] %(message)s``, lines flushed one by one (a tailing reader sees them as they
happen). The scheduler's prefix names only the parallel ranks that exist (``configure_scheduler_process``,
srt/managers/scheduler.py:6279-6291): ``" TP0"`` only when ``tp_size > 1``, so the single-GPU Spark server
writes none. The ``server_args=`` line is the resolved dict's repr, with any API key masked: unlike the
real server, the simulator never writes a secret to disk.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import IO, Any

from validator.sim.scenarios import MOE_LAYERS, NUM_LAYERS, TARGET_CLASS, Scenario

_BS = [1, 2, 4, 8, 16, 24, 32, 40, 48]


class ServerLog:
    """Append-only log file (or nothing when no path is given); safe to call from any thread.

    ``tp`` marks a scheduler line; it gets the ``TP<rank>`` prefix only under tensor parallelism."""

    def __init__(self, path: Path | None, *, tp_size: int = 1) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self._prefix = " TP0" if tp_size > 1 else ""
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")

    def line(self, message: str, *, tp: bool = False) -> None:
        if self._fh is None:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        prefix = self._prefix if tp else ""
        with self._lock:
            if self._fh is None:
                return
            self._fh.write(f"[{stamp}{prefix}] {message}\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def _masked(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for key in ("api_key", "admin_api_key"):
        if out.get(key) is not None:
            out[key] = "***"
    return out


def _graph_lines(role: str, phase: str, tokens: int, elapsed: float, usage: float, avail: float) -> list[str]:
    """``capture_decode_graph`` (srt/model_executor/model_runner_components/cuda_graph_setup.py:737-795):
    ``Capture {role} {verify|decode} CUDA graph begin/end``, the end line with bs, elapsed, mem usage and
    avail mem."""
    return [
        f"Capture {role} {phase} CUDA graph begin. backend=full, num_tokens_per_req={tokens}, "
        f"avail mem={avail:.2f} GB",
        f"Capture {role} {phase} CUDA graph end. bs={_BS}, elapsed={elapsed:.2f} s, "
        f"mem usage={usage:.2f} GB, avail mem={avail - usage:.2f} GB.",
    ]


def _eagle_draft_graph_lines(scenario: Scenario, avail: float) -> list[str]:
    """``EagleDraftWorker.init_cuda_graphs`` (srt/speculative/eagle_worker_v2.py:512-545 and 631-660):
    decode (only when steps > 1) then extend, end lines with ``elapsed=, mem usage=, avail mem=``."""
    out: list[str] = []
    for name, tokens, elapsed, usage in (("decode", 1, 6.02, 0.31), ("extend", scenario.num_draft_tokens,
                                                                    4.87, 0.22)):  # fmt: skip
        out.append(
            f"Capture draft {name} CUDA graph begin. backend=full, num_tokens_per_req={tokens}, "
            f"bs={_BS}, avail mem={avail:.2f} GB"
        )
        out.append(
            f"Capture draft {name} CUDA graph end. elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, "
            f"avail mem={avail - usage:.2f} GB."
        )
        avail -= usage
    return out


def startup_lines(scenario: Scenario, args: dict[str, Any]) -> list[tuple[str, bool]]:
    """(message, scheduler?) in the order a real start-up prints them, up to the end of graph capture.

    With a ReplaySSM ring the pool rejects (``Scenario.ring_error``), the lines stop after the weights
    have loaded, where ``memory_pool.py`` raises: :func:`ring_failure_lines` follows."""
    lines: list[tuple[str, bool]] = []
    if scenario.moe_backend_flag == "auto":
        lines.append(
            (
                "Bailing V3 mixed FP8/MXFP4 checkpoint: moe_runner_backend=flashinfer_mxfp4 for "
                f"{TARGET_CLASS}.",
                False,
            )
        )
    if scenario.spec:
        lines.append(
            (
                "Max running requests is reset to 48 for speculative decoding. You can override this by "
                "explicitly setting --max-running-requests.",
                False,
            )
        )
    lines.append((f"server_args={_masked(args)!r}", False))
    if scenario.plugin:
        lines += [(m, True) for m in plugin_lines()]
    lines.append(("Detected fp8 checkpoint.", True))
    lines.append(("Detected mixed checkpoint layout: routed experts are MXFP4.", True))
    lines.append(("Load weight begin. avail mem=119.62 GB", True))
    if scenario.fp8_head:
        lines.append(("Online FP8 quantization enabled for lm_head.", True))
    lines += [(_moe_line(scenario, f"model.layers.{i}.mlp.experts"), True) for i in range(1, MOE_LAYERS + 1)]
    lines.append(
        (
            f"Load weight end. elapsed=52.41 s, type={TARGET_CLASS}, quant=fp8, avail mem=52.13 GB, "
            "mem usage=67.49 GB.",
            True,
        )
    )
    if scenario.dspark:
        lines.append(("Load weight begin. avail mem=52.13 GB", True))
        lines.append(
            (
                # a BF16 checkpoint has no quantization config: no ``quant=`` (model_runner.py:1373-1379)
                f"Load weight end. elapsed=4.06 s, type={scenario.draft_class}, avail mem=49.41 GB, "
                "mem usage=2.72 GB.",
                True,
            )
        )
        # srt/speculative/dspark_components/dspark_worker_v2.py:279-292
        gamma = scenario.dspark_block_size
        lines.append(
            (
                "Initialized DSpark draft runner. attention_backend=triton, "
                f"model={scenario.draft_class}, gamma={gamma}, verify_num_draft_tokens={gamma + 1}, "
                f"query_token_num={gamma + 1}, sample_from_anchor=False, mask_token_id=156895, "
                "markov_head=VanillaMarkov",
                True,
            )
        )
    elif scenario.spec:
        lines.append(("Load weight begin. avail mem=52.13 GB", True))
        lines.append((_moe_line(scenario, f"model.layers.{NUM_LAYERS}.mlp.experts"), True))
        lines.append(
            (
                f"Load weight end. elapsed=3.12 s, type={scenario.draft_class}, quant=fp8, "
                "avail mem=50.51 GB, mem usage=1.62 GB.",
                True,
            )
        )
    if scenario.ring_error is not None:
        return lines
    # srt/mem_cache/memory_pool.py:1004-1009 (the ring error above is raised just before it)
    mamba = "max_mamba_cache_size: 48, conv_state size: 0.12GB, ssm_state size: 0.84GB "
    lines.append((f"Mamba Cache is allocated. {mamba}", True))
    if scenario.moe_backend == "humming":
        lines.append(("Using indexed gemm for humming moe", True))
    phase = "verify" if scenario.spec else "decode"
    tokens = scenario.num_draft_tokens if scenario.spec else 1
    lines += [(m, True) for m in _graph_lines("target", phase, tokens, 21.37, 1.21, 40.02)]
    if scenario.dspark:
        lines += [(m, True) for m in _graph_lines("draft", "verify", tokens, 3.91, 0.44, 38.81)]
    elif scenario.spec:
        lines += [(m, True) for m in _eagle_draft_graph_lines(scenario, 38.81)]
    lines.append(
        (
            "max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests={args.get('max_running_requests') or 128}, context_len=262144",
            True,
        )
    )
    return lines


# The targets the real plugin hooks (validator/plugin/hooks.py HOOKS), restated so that the simulator
# never imports the in-server plugin; tests/test_plugin_contract.py holds the two lists equal.
PLUGIN_HOOK_TARGETS = (
    "sglang.srt.model_executor.model_runner.ModelRunner.load_model",
    "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker.init_lm_head",
    "sglang.srt.speculative.multi_layer_eagle_worker_v2.MultiLayerEagleDraftWorker.init_lm_head",
    "sglang.srt.speculative.frozen_kv_mtp_worker_v2.FrozenKVMTPDraftWorker.__init__",
    "sglang.srt.speculative.dspark_components.dspark_worker_v2.DSparkWorkerV2.__init__",
)


def plugin_lines() -> list[str]:
    """``load_plugins`` in the scheduler (srt/plugins/__init__.py:62-82 and l.134), then one line per hooked
    target from ``HookRegistry.apply_hooks`` (srt/plugins/hook_registry.py:305-310) for each of the
    plugin's AFTER hooks."""
    group = "sglang.srt.plugins"
    lines = [
        f"Available plugins for group {group}:",
        "  - spark_validate -> validator.plugin:register",
        f"Loaded plugin spark_validate from group {group}",
        "Executed general plugin: spark_validate",
    ]
    lines += [
        f"Applied 1 hook(s) to {t} (from: plugin=spark_validate, dist=spark-validate)"
        for t in PLUGIN_HOOK_TARGETS
    ]
    return lines


def startup_timings_line(startup: dict[str, Any]) -> str:
    """The launcher's summary once every scheduler is up (srt/entrypoints/engine.py:1115-1128)."""
    graphs = ", ".join(f"{phase}={value:.2f}" for phase, value in startup["cuda_graph"].items())
    return (
        f"Engine startup timings (s): load_weight={startup['load_weight']:.2f}, "
        f"kv_cache_allocation={startup['kv_cache_allocation']:.2f}, "
        f"scheduler_e2e={startup['scheduler_e2e']:.2f}, cuda_graph={{{graphs}}}, "
        f"tokenizer_e2e={startup['tokenizer_e2e']:.2f}"
    )


def ring_failure_lines(error: str) -> list[tuple[str, bool]]:
    """What a scheduler that raised during pool allocation leaves in the log before the process tree dies:
    ``Scheduler hit an exception: <traceback>`` (srt/managers/scheduler.py:6370-6373), then the launcher's
    SIGQUIT handler line (srt/entrypoints/engine.py:1976-1980)."""
    trace = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 6352, '
            "in run_scheduler_process",
            "    scheduler = Scheduler(",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/mem_cache/memory_pool.py", line 821, '
            "in __init__",
            "    raise ValueError(",
            f"ValueError: {error}",
        ]
    )
    return [
        (f"Scheduler hit an exception: {trace}", True),
        ("Received sigquit from a child process. It usually means the child failed.", False),
    ]


def _moe_line(scenario: Scenario, layer: str) -> str:
    if scenario.moe_backend == "humming":
        return f"Preparing DeepSeekV4 MXFP4 experts for Humming backend (layer: {layer})..."
    return f"Preparing DSv4 MXFP4 experts for FlashInfer SM120 CUTLASS W4A8 (layer: {layer})..."


def decode_batch_line(
    *, running: int, used_tokens: int, accept_len: float | None, accept_rate: float | None, throughput: float
) -> str:
    """The scheduler's periodic line; the KDA hybrid model shows the mamba fields."""
    usage = used_tokens / 1048576
    msg = (
        f"Decode batch, #running-req: {running}, #full token: {used_tokens}, full token usage: {usage:.2f}, "
        f"mamba num: {running}, mamba usage: {min(1.0, running / 48):.2f}, "
    )
    if accept_len is not None and accept_rate is not None:
        msg += f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
    return msg + f"cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: 0"
