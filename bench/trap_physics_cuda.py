"""The FP8-LM-head + MTP trap on a GPU, with the real FP8 GEMM (``torch._scaled_mm``).

Same tiny target and NEXTN-shaped draft as ``bench/trap_physics.py`` (``tests/support/plugin_trap.py``), but
every LM-head product runs on CUDA: the FP8 head through ``torch._scaled_mm`` (FP8 e4m3 codes, per-token
activation scales, per-channel weight scales, BF16 out, as SGLang's online FP8 head does), the broken
draft through a BF16 GEMM over the FP8 codes without their scales (the draft's unquantized method).
Then, at the real head shape (157184 x 2560), the time of one decode step's head GEMM in FP8 against BF16
measured in the same run: the read that the FP8 head halves.

Needs a CUDA GPU with FP8 support (sm_89+); run ``python -m bench.trap_physics_cuda`` from the checkout.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import torch

from tests.support import plugin_trap as trap
from validator.plugin import inspect as insp
from validator.plugin import remedy

DEV = torch.device("cuda")
FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
ROWS = 16  # _scaled_mm wants M divisible by 16: one token padded to 16 rows


def _cached(layer: Any, name: str, make: Any) -> torch.Tensor:
    t = layer.__dict__.get(name)
    if t is None:
        t = make()
        layer.__dict__[name] = t
    return t


def _rows(x: torch.Tensor) -> torch.Tensor:
    x = x.float().reshape(1, -1).to(DEV)
    return x.expand(ROWS, -1).contiguous()


class CudaFp8LinearMethod:
    """Online FP8 head on the GPU: ``_scaled_mm(fp8 x, fp8 W^T, per-token scale, per-channel scale)``."""

    def apply(self, layer: Any, x: torch.Tensor) -> torch.Tensor:
        w = _cached(layer, "_w_dev", lambda: layer.weight.data.to(DEV))
        ws = _cached(layer, "_ws_dev", lambda: layer.weight_scale.data.float().reshape(1, -1).to(DEV))
        xr = _rows(x)
        x_scale = xr.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
        xq = (xr / x_scale).to(FP8)
        out = torch._scaled_mm(xq, w.t(), scale_a=x_scale, scale_b=ws, out_dtype=torch.bfloat16)
        return out[0].float().cpu()


class CudaUnquantizedMethod:
    """The stock draft's head on the GPU: a BF16 GEMM over the FP8 codes, no scales."""

    def apply(self, layer: Any, x: torch.Tensor) -> torch.Tensor:
        w = _cached(layer, "_wb_dev", lambda: layer.weight.data.to(DEV).to(torch.bfloat16))
        return (_rows(x).to(torch.bfloat16) @ w.t())[0].float().cpu()


def _on_gpu(model: Any) -> None:
    head = model.lm_head
    kind = type(head.quant_method).__name__
    head.quant_method = CudaFp8LinearMethod() if kind == "Fp8LinearMethod" else CudaUnquantizedMethod()


def run(setup: str, seed: int, tokens: int) -> tuple[float, bool]:
    target, draft = trap.build(seed=seed, with_share_method=setup == "patched")
    if setup == "remedy":
        remedy.apply_share_method(draft)
    trap.eagle_init_lm_head(target, draft)
    _on_gpu(target)
    if draft.lm_head is not target.lm_head:
        _on_gpu(draft)
    shared = insp.sharing(target, [draft])["shared_module"]
    result = trap.speculative_generate(target, draft, list(range(1, 17)), tokens)
    return result.accept_length, bool(shared)


def head_gemm_times(iters: int = 200) -> tuple[float, float]:
    """Milliseconds per decode-step head GEMM at the real shape, FP8 vs BF16 (CUDA events)."""
    vocab, hidden = 157184, 2560
    w_bf16 = torch.randn(vocab, hidden, device=DEV, dtype=torch.bfloat16) * 0.02
    ws = (w_bf16.float().abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp(min=1e-12)
    w_fp8 = (w_bf16.float() / ws).to(FP8)
    ws_row = ws.reshape(1, -1).contiguous()
    x = torch.randn(ROWS, hidden, device=DEV, dtype=torch.bfloat16)
    xs = (x.float().abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp(min=1e-12)
    xq = (x.float() / xs).to(FP8)

    def fp8() -> torch.Tensor:
        return torch._scaled_mm(xq, w_fp8.t(), scale_a=xs, scale_b=ws_row, out_dtype=torch.bfloat16)

    def bf16() -> torch.Tensor:
        return x @ w_bf16.t()

    out = []
    for fn in (fp8, bf16):
        for _ in range(20):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / iters)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows: dict[str, list[float]] = {}
    shared: dict[str, bool] = {}
    for setup in ("stock", "patched", "remedy"):
        rows[setup] = []
        for seed in range(args.seeds):
            al, sh = run(setup, seed, args.tokens)
            rows[setup].append(al)
            shared[setup] = sh
    base = statistics.mean(rows["stock"])
    print(
        f"{'set-up (real FP8 GEMM on CUDA)':<34} {'shared_module':>13} {'accept length':>13} {'min':>6} "
        f"{'max':>6} {'vs stock':>8}"
    )
    for setup, vals in rows.items():
        mean = statistics.mean(vals)
        print(
            f"{setup:<34} {shared[setup]!s:>13} {mean:13.2f} {min(vals):6.2f} {max(vals):6.2f} "
            f"{mean / base:7.2f}x"
        )
    fp8_ms, bf16_ms = head_gemm_times()
    print()
    print(f"{'head GEMM, 157184 x 2560, 1 token':<34} {'ms':>8} {'vs BF16':>8}")
    print(f"{'BF16 (torch.matmul)':<34} {bf16_ms:8.4f} {1.0:7.2f}x")
    print(f"{'FP8 (torch._scaled_mm)':<34} {fp8_ms:8.4f} {fp8_ms / bf16_ms:7.2f}x")


if __name__ == "__main__":
    main()
