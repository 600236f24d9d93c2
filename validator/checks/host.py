"""Host checks: whether this is a DGX Spark at all (the pack's figures are GB10's), and the GB10 hazards a
start-up check can catch: a second resident model (MemAvailable) and a supervisor that kills a healthy
server during its long cold start (systemd's start budget).

Both read the pack's ``expect.host`` figures; off a DGX Spark the memory figure does not apply (skip).
"""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.facts import DEPLOY, HOST, LAUNCH, Facts

_GIB = 1024**3


def _gib(n: float | None) -> float | None:
    return None if n is None else round(n / _GIB, 1)


@check.builtin("host.memory_available", "preflight", needs=("startup",), params=("need_gib",))
def memory_available(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """Loading ~60 GB of weights while another server still holds memory ends in a driver lock-up on GB10,
    not an OOM. The need is the larger of the pack's floor and the static pool SGLang will claim
    (--mem-fraction-static x MemTotal; SGLang's own default fraction when the flag is absent is not
    known before resolution, so only an explicit fraction counts)."""
    floor_gib = check.need(ctx.expect.startup, "startup").min_mem_available_gib
    h = facts.host
    if h is None:
        return check.errored("the host was not inspected", [HOST])
    if h.is_dgx_spark is False:
        return check.skipped("not a DGX Spark: the memory figure is GB10's unified memory", [HOST])
    if h.mem_available_bytes is None:
        return check.errored("MemAvailable could not be read from /proc/meminfo", [HOST])
    ev: dict[str, Any] = {
        "mem_available_gib": _gib(h.mem_available_bytes),
        "mem_total_gib": _gib(h.mem_total_bytes),
        "floor_gib": floor_gib,
    }
    need_gib = floor_gib
    sources = [HOST]
    fraction = facts.launch.args.get("mem_fraction_static") if facts.launch is not None else None
    if isinstance(fraction, (int, float)) and h.mem_total_bytes:
        pool = round(float(fraction) * h.mem_total_bytes / _GIB, 1)
        ev["static_pool_gib"] = pool
        sources.append(LAUNCH)
        need_gib = max(need_gib, pool)
    ev["need_gib"] = need_gib
    have = h.mem_available_bytes / _GIB
    if have < need_gib:
        return check.failed(
            f"MemAvailable is {have:.1f} GiB, below the {need_gib:g} GiB this start needs: another process "
            "(a second model server?) holds the unified memory, and loading now can wedge the driver",
            sources,
            params={"need_gib": need_gib},
            **ev,
        )
    return check.passed(
        f"MemAvailable {have:.1f} GiB covers the {need_gib:g} GiB this start needs", sources, **ev
    )


@check.builtin(
    "host.start_budget",
    "preflight",
    needs=("startup",),
    params=("cold_start_s", "budget_s"),
    remedies=("kubernetes",),
)
def start_budget(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    cold = check.need(ctx.expect.startup, "startup").cold_start_s
    b = facts.start_budget
    if b is None and "start_budget" in facts.errors:  # a supervisor given whose budget is not known
        return check.errored(facts.errors["start_budget"], [DEPLOY])
    if b is None:
        return check.skipped("no supervisor configuration given (--unit)", [DEPLOY])
    ev: dict[str, Any] = {"budget_s": b.budget_s, "load_timed": b.counts_load, "cold_start_s": cold}
    if not b.counts_load:
        return check.passed(
            f"{b.detail}: the start job ends at exec, the model load is not timed", [DEPLOY], **ev
        )
    if b.budget_s is None:
        return check.passed(f"{b.detail}: no start timeout", [DEPLOY], **ev)
    if b.budget_s < cold:
        return check.warned(
            f"{b.detail}: {b.budget_s:g} s is shorter than a cold start ({cold:g} s): the supervisor "
            "would kill a healthy server while it loads",
            [DEPLOY],
            # the remedy in the supervisor's own terms: a startupProbe under Kubernetes, else the unit's
            remedy="kubernetes" if b.origin.startswith("kubernetes:") else None,
            params={"cold_start_s": cold, "budget_s": b.budget_s},
            **ev,
        )
    return check.passed(f"{b.detail} covers a cold start ({cold:g} s)", [DEPLOY], **ev)


@check.builtin("host.platform", "preflight")
def host_platform(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The pack's figures (bandwidth floor, memory-fraction limit) are GB10's; elsewhere they mislead."""
    h = facts.host
    if h is None:
        return check.errored("host not inspected", [HOST])
    ev: dict[str, Any] = {"machine": h.machine, "gpu": h.gpu_name, "mem_total_gib": _gib(h.mem_total_bytes)}
    if h.is_dgx_spark is None:  # a finding (info), not a failure: the pack's figures may not apply
        return check.warned(
            f"cannot tell whether this {h.machine} host is a DGX Spark without CUDA", [HOST], **ev
        )
    if not h.is_dgx_spark:
        what = h.gpu_name or f"a {h.machine} host without an NVIDIA driver"
        return check.warned(
            f"not a DGX Spark ({what}): the pack's bandwidth and memory limits are GB10's", [HOST], **ev
        )
    return check.passed(f"DGX Spark ({h.gpu_name}, {ev['mem_total_gib']} GiB unified memory)", [HOST], **ev)
