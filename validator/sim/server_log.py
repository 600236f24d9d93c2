"""A server log in SGLang's format, so log-reading checks and operators' grep rules can be tried.

Format ``[%(asctime)s{prefix}] %(message)s`` with ``TP0`` as the scheduler prefix, lines flushed one by
one (a tailing reader sees them as they happen). The ``server_args=`` line is the resolved dict's repr,
with any API key masked: unlike the real server, the simulator never writes a secret to disk.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import IO, Any

from validator.sim.scenarios import DRAFT_CLASS, MOE_LAYERS, NUM_LAYERS, TARGET_CLASS, Scenario

_BS = [1, 2, 4, 8, 16, 24, 32, 40, 48]


class ServerLog:
    """Append-only log file (or nothing when no path is given); safe to call from any thread."""

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")

    def line(self, message: str, *, tp: bool = False) -> None:
        if self._fh is None:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        prefix = " TP0" if tp else ""
        with self._lock:
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


def startup_lines(scenario: Scenario, args: dict[str, Any]) -> list[tuple[str, bool]]:
    """(message, scheduler?) in the order a real start-up prints them, up to the end of graph capture."""
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
        lines.append(("Loaded plugin spark_validate (validator.plugin:register)", True))
        lines.append(("Executed general plugin: spark_validate", True))
        lines.append(
            (
                "Applied 1 hook(s) to sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker.init_lm_head "
                "(from: plugin=spark_validate, dist=spark-validate)",
                True,
            )
        )
    lines.append(("Detected fp8 checkpoint.", True))
    lines.append(("Detected mixed checkpoint layout: routed experts are MXFP4.", True))
    lines.append(("Load weight begin. avail mem=119.62 GB", True))
    if scenario.fp8_head:
        lines.append(("Online FP8 quantization enabled for lm_head.", True))
    lines += [(_moe_line(scenario, f"model.layers.{i}.mlp.experts"), True) for i in range(1, MOE_LAYERS + 1)]
    quant = "fp8"
    lines.append(
        (
            f"Load weight end. elapsed=52.41 s, type={TARGET_CLASS}, quant={quant}, avail mem=52.13 GB, "
            "mem usage=67.49 GB.",
            True,
        )
    )
    if scenario.spec:
        lines.append(("Load weight begin. avail mem=52.13 GB", True))
        lines.append((_moe_line(scenario, f"model.layers.{NUM_LAYERS}.mlp.experts"), True))
        lines.append(
            (
                f"Load weight end. elapsed=3.12 s, type={DRAFT_CLASS}, quant={quant}, avail mem=50.51 GB, "
                "mem usage=1.62 GB.",
                True,
            )
        )
    lines.append(("Capture cuda graph begin. This can take up to several minutes. avail mem=40.02 GB", True))
    if scenario.moe_backend == "humming":
        lines.append(("Using indexed gemm for humming moe", True))
    lines.append(
        ("Capture cuda graph end. Time elapsed: 21.37 s. mem usage=1.21 GB. avail mem=38.81 GB.", True)
    )
    if scenario.spec:
        lines.append(
            (
                "Capture draft decode CUDA graph begin. backend=triton, num_tokens_per_req=1, "
                f"bs={_BS}, avail mem=38.81 GB",
                True,
            )
        )
        lines.append(
            (
                "Capture draft decode CUDA graph end. Time elapsed: 6.02 s. mem usage=0.31 GB. "
                "avail mem=38.50 GB.",
                True,
            )
        )
        lines.append(
            (
                "Capture draft extend CUDA graph begin. backend=triton, num_tokens_per_req=4, "
                f"bs={_BS}, avail mem=38.50 GB",
                True,
            )
        )
        lines.append(
            (
                "Capture draft extend CUDA graph end. Time elapsed: 4.87 s. mem usage=0.22 GB. "
                "avail mem=38.28 GB.",
                True,
            )
        )
    lines.append(
        (
            "max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests={args.get('max_running_requests') or 128}, context_len=262144",
            True,
        )
    )
    return lines


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
