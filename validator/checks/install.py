"""Installation checks: the SGLang version the pack was written for, SGLANG_* variables that the
installed build does not declare (SGLang ignores those silently, so a typo or a missing patch looks
exactly like a working setting), what SGLang accepts but does not do as written, and the host platform."""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.facts import HOST, LAUNCH, SERVER, SGLANG, Facts


def _version(version: str | None, src: str, ctx: check.CheckContext) -> check.Outcome:
    want = check.need(ctx.expect.sglang_version, "sglang_version")
    if version is None:
        return check.errored("the SGLang version could not be read", [src])
    if version != want:
        return check.warned(
            f"SGLang {version}; this rule pack was written for {want}",
            [src],
            params={"version": version},
            version=version,
        )
    return check.passed(f"SGLang {version}", [src], version=version)


@check.builtin("sglang.version", "preflight", needs=("sglang_version",), params=("version",))
def sglang_version_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    sg = facts.sglang
    if sg is None or sg.root is None:
        note = check.sglang_note(facts)
        return check.errored(f"the installed SGLang could not be read: {note}", [SGLANG])
    return _version(sg.version, SGLANG, ctx)


@check.builtin("sglang.version", "check", needs=("sglang_version",), params=("version",))
def sglang_version_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.server is None:
        return check.no_server(facts)
    return _version(facts.server.settings.version, SERVER, ctx)


@check.builtin("env.undeclared", "preflight")
def env_undeclared(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.launch is None:
        return check.no_launch(facts)
    sg = facts.sglang
    if sg is None or sg.root is None or not sg.declared_env:
        return check.errored("no SGLang installation to compare the environment with", [SGLANG])
    # a variable the command line was built from (the shipped unit's $SGLANG_ARGS) did its job
    consumed = facts.launch.consumed_env
    set_vars = sorted(k for k in facts.launch.env if k.startswith("SGLANG_") and k not in consumed)
    referenced = sg.referenced_env or set()
    unknown = [k for k in set_vars if k not in sg.declared_env and k not in referenced]
    if unknown:
        return check.warned(
            f"SGLang {sg.version} does not declare {', '.join(unknown)}: silently ignored",
            [LAUNCH, SGLANG],
            undeclared=unknown,
        )
    return check.passed(
        f"all {len(set_vars)} SGLANG_* variables are declared by the installed build",
        [LAUNCH, SGLANG],
        checked=set_vars,
        command_line=sorted(consumed),
    )


@check.builtin("launch.warnings", "preflight")
def launch_warnings(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """What SGLang would accept but not do as written: deprecated flags, a ``--config=FILE`` it ignores."""
    if facts.launch is None:
        return check.no_launch(facts)
    if facts.launch.warnings:
        return check.warned("; ".join(facts.launch.warnings), [LAUNCH], warnings=facts.launch.warnings)
    config = str(facts.launch.config_file) if facts.launch.config_file else None
    return check.passed("SGLang accepts the command line as written", [LAUNCH], config_file=config)


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


def _gib(n: int | None) -> float | None:
    return None if n is None else round(n / 2**30, 1)
