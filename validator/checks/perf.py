"""``perf.tpot``: the probe's decode time per token against the bandwidth floor of a decode step on this
hardware, which catches a GB10 stuck in a low-power state or a wrong backend that the other checks cannot
see."""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.facts import PROBE, Facts


def step_floor_ms(facts: Facts, ctx: check.CheckContext) -> tuple[float, float]:
    """(bytes one decode step must read, the least time that takes at the pack's bandwidth in ms): the
    active weights plus the whole LM head, at batch 1 a memory-bandwidth-bound read. The head counts as
    FP8 unless the evidence says it is not, so that "faster than the hardware" is never claimed for a
    head that may be the smaller one."""
    mb = check.need(ctx.expect.model_bytes, "model_bytes")
    host = check.need(ctx.expect.host, "host")
    step_bytes = mb.active_params * mb.bytes_per_active_param + mb.lm_head_params * _head_bytes(facts, ctx)
    return step_bytes, step_bytes / (host.memory_bandwidth_gbps * 1e9) * 1e3


def _head_bytes(facts: Facts, ctx: check.CheckContext) -> float:
    att = facts.attestation
    if att is not None and att.target is not None and att.target.lm_head is not None:
        return 1.0 if att.target.lm_head.weight_dtype == ctx.expect.lm_head_dtype else 2.0
    if facts.log is not None and facts.log.head_dtype_known and not facts.log.fp8_lm_head_lines:
        return 2.0  # the log holds the start and no FP8-head line: a BF16 head
    return 1.0


@check.builtin(
    "perf.tpot", "check", needs=("model_bytes", "host", "lm_head_dtype", "probe"), remedies=("timing",)
)
def perf_tpot(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The time per verify round (TPOT x tokens per round) against a floor that does not move with the
    acceptance length: the pack's verify cost in decode steps, each step the bytes it must read at the
    pack's bandwidth. The old floor was divided by the acceptance length, so a broken draft (1.00) got a
    floor four times higher, and a TPOT below the floor passed."""
    probe = facts.probe
    if probe is None:
        return check.no_probe(facts)
    if probe.tpot_ms is None:
        return check.errored(
            "the server reports no timings (meta_info e2e_latency / first_token_latency)", [PROBE]
        )
    mb = check.need(ctx.expect.model_bytes, "model_bytes")
    bandwidth = check.need(ctx.expect.host, "host").memory_bandwidth_gbps
    step_bytes, step_ms = step_floor_ms(facts, ctx)
    speculative = probe.verify_ct > 0 and probe.accept_length is not None
    per_round = probe.accept_length if speculative and probe.accept_length else 1.0
    round_ms = probe.tpot_ms * per_round
    floor_ms = step_ms * (mb.verify_cost_steps if speculative else 1.0)
    what = "per verify round" if speculative else "per decode step"
    measured = (
        f"{round_ms:.1f} ms {what} (TPOT {probe.tpot_ms:.1f} ms x {per_round:.2f} tokens per round)"
        if speculative
        else f"{round_ms:.1f} ms {what}"
    )
    ev: dict[str, Any] = {
        "tpot_ms": round(probe.tpot_ms, 3),
        "tokens_per_round": round(per_round, 3),
        "round_ms": round(round_ms, 3),
        "floor_round_ms": round(floor_ms, 3),
        "step_floor_ms": round(step_ms, 3),
        "step_gb": round(step_bytes / 1e9, 3),
        "slack": mb.tpot_slack,
        "bandwidth_gbps": bandwidth,
    }
    if round_ms < step_ms:
        return check.failed(
            f"{measured} is faster than the hardware can go: one step reads {step_bytes / 1e9:.2f} GB, at "
            f"least {step_ms:.1f} ms at {bandwidth:g} GB/s; the timing is wrong (the server's reported "
            "latencies, or a clock), so no speed claim can rest on it",
            [PROBE],
            "timing",
            **ev,
        )
    if round_ms > floor_ms * mb.tpot_slack:
        return check.warned(
            f"{measured} is over {mb.tpot_slack:g}x the floor of {floor_ms:.1f} ms", [PROBE], **ev
        )
    return check.passed(f"{measured} within {mb.tpot_slack:g}x of the floor {floor_ms:.1f} ms", [PROBE], **ev)
