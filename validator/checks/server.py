"""Live-server checks: the server is up and serving its state, its replies are not garbage, and its
decode speed is plausible for the hardware.

The output check exists because a server with broken kernels (seen on SM121) answers 200 with runs of
``!!!!``; the TPOT check compares the probe against the bandwidth floor of a decode step, which catches a
GB10 stuck in a low-power state or a wrong backend that the other checks cannot see.
"""

from __future__ import annotations

from typing import Any

from validator.checks.base import (
    CheckContext,
    Outcome,
    builtin,
    errored,
    failed,
    need,
    passed,
    probe_not_run,
    skipped,
    warned,
)
from validator.facts import PROBE, SERVER, Facts


@builtin("server.ready", "check")
def server_ready(facts: Facts, ctx: CheckContext) -> Outcome:
    s = facts.server
    if s is None:
        return errored(facts.errors.get(SERVER, "the server could not be reached"), [SERVER])
    ev: dict[str, Any] = {
        "url": s.url,
        "version": s.settings.version,
        "server_info_endpoint": s.server_info_endpoint,
    }
    if not s.healthy:
        return failed("the server does not answer /health with 200", [SERVER], **ev)
    return passed(f"server ready (SGLang {ev['version']})", [SERVER], **ev)


@builtin("probe.output", "check", needs=("probe",))
def probe_output(facts: Facts, ctx: CheckContext) -> Outcome:
    probe = facts.probe
    if probe is None:
        if PROBE in facts.errors:
            return errored(f"probe failed: {facts.errors[PROBE]}", [PROBE])
        return skipped(probe_not_run(facts), [PROBE])
    if probe.problems:
        return failed(
            "the server returns degenerate output: " + "; ".join(probe.problems),
            [PROBE],
            problems=probe.problems,
            requests=probe.requests,
        )
    return passed(f"{probe.requests} probe replies look like text", [PROBE], requests=probe.requests)


def tpot_floor_ms(facts: Facts, ctx: CheckContext, accept_length: float | None) -> float:
    """Lower bound of the time per output token: a decode step must read the active weights and the LM
    head at the host's memory bandwidth; with speculation, one verify (the pack's ``verify_cost_steps``
    plain steps) yields ``accept_length`` tokens."""
    mb = need(ctx.expect.model_bytes, "model_bytes")
    host = need(ctx.expect.host, "host")
    head_bytes_per_param = 1.0 if _head_is_fp8(facts, ctx) else 2.0
    step_bytes = mb.active_params * mb.bytes_per_active_param + mb.lm_head_params * head_bytes_per_param
    step_ms = step_bytes / (host.memory_bandwidth_gbps * 1e9) * 1e3
    if accept_length and accept_length > 0:
        return step_ms * mb.verify_cost_steps / accept_length
    return step_ms


def _head_is_fp8(facts: Facts, ctx: CheckContext) -> bool:
    att = facts.attestation
    if att is not None:
        head = att.target.lm_head if att.target is not None else None
        return head is not None and head.weight_dtype == ctx.expect.lm_head_dtype
    return bool(facts.log is not None and facts.log.fp8_lm_head_lines)


@builtin("perf.tpot", "check", needs=("model_bytes", "host", "lm_head_dtype", "probe"))
def perf_tpot(facts: Facts, ctx: CheckContext) -> Outcome:
    probe = facts.probe
    if probe is None or probe.tpot_ms is None:
        return skipped("no TPOT measured (probe not run, or the server does not report timings)", [PROBE])
    floor = tpot_floor_ms(facts, ctx, probe.accept_length)
    slack = need(ctx.expect.model_bytes, "model_bytes").tpot_slack
    ev: dict[str, Any] = {
        "tpot_ms": round(probe.tpot_ms, 3),
        "floor_ms": round(floor, 3),
        "slack": slack,
        "bandwidth_gbps": need(ctx.expect.host, "host").memory_bandwidth_gbps,
    }
    if probe.tpot_ms > floor * slack:
        return warned(
            f"TPOT {probe.tpot_ms:.1f} ms is over {slack:g}x the bandwidth floor of {floor:.1f} ms",
            [PROBE],
            **ev,
        )
    return passed(f"TPOT {probe.tpot_ms:.1f} ms within {slack:g}x of the floor {floor:.1f} ms", [PROBE], **ev)
