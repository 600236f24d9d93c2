"""LM-head checks: is the head really in the pack's dtype (the online FP8 head), and is the FP32 head not
requested alongside it?

The FP8 head exists only in SGLang builds that declare the pack's ``fp8_lm_head_env``; a build without it
ignores the variable without a word, and a quantized head ignores ``--enable-fp32-lm-head`` without a
warning. Before start we check the request and the build; after start, the attestation's real dtype and
the log line ``FP8_HEAD_LINE`` (exactly once).
"""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.checks.sources_agree import Observations
from validator.facts import ATTESTATION, FP8_HEAD_LINE, LAUNCH, LOG, SERVER, SGLANG, Facts


def fp8_requested(facts: Facts, env_name: str) -> tuple[bool | None, str | None]:
    """(requested?, raw value) from the launch environment, else from the attestation's env."""
    raw: str | None = None
    if facts.launch is not None:
        raw = facts.launch.env.get(env_name)
    elif facts.attestation is not None:
        raw = facts.attestation.env.get(env_name)
    elif facts.log is not None and facts.log.fp8_lm_head_lines > 0:
        return True, None
    else:
        return None, None
    return check.env_bool(raw), raw


def _require_attestation(facts: Facts, ctx: check.CheckContext) -> check.Outcome | None:
    if facts.attestation is None and (ctx.expect.require_attestation or ctx.strict):
        why = facts.errors.get(ATTESTATION, "no attestation given (--attestation)")
        return check.errored(f"the rule pack requires the in-process attestation: {why}", [ATTESTATION])
    if facts.attestation is None and ATTESTATION in facts.errors:
        return check.errored(f"attestation unusable: {facts.errors[ATTESTATION]}", [ATTESTATION])
    return None


@check.builtin("lm_head.fp8", "preflight", needs=("fp8_lm_head_env",), remedies=("set_env", "build"))
def lm_head_fp8_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    env_name = check.need(ctx.expect.fp8_lm_head_env, "fp8_lm_head_env")
    launch = facts.launch
    if launch is None:
        return check.no_launch(facts)
    requested, raw = fp8_requested(facts, env_name)
    ev: dict[str, Any] = {env_name: raw, "set_in": launch.env_origin.get(env_name)}
    if requested is None:
        return check.failed(
            f"{env_name}={raw!r} is not a boolean SGLang accepts (true/1/yes/y): "
            "it warns and keeps the BF16 head",
            [LAUNCH],
            "set_env",
            **ev,
        )
    if not requested:
        if raw is None and env_name in launch.shell_only:
            why = f"the script sets {env_name} but does not export it: the server never sees it; export it"
        else:
            why = f"{env_name} is not set" if raw is None else f"{env_name}={raw!r}"
        return check.failed(f"the FP8 LM head is not requested ({why})", [LAUNCH], "set_env", **ev)
    sg = facts.sglang
    if sg is None or sg.root is None:
        note = check.sglang_note(facts)
        return check.errored(
            f"FP8 head requested, but support cannot be checked: {note}", [SGLANG, LAUNCH], **ev
        )
    ev["sglang_version"] = sg.version
    ev["sglang_root"] = str(sg.root)
    declared = sg.declares(env_name)
    if declared is None:
        return check.errored(f"cannot read srt/environ.py of {sg.root}: {sg.note}", [SGLANG], **ev)
    if not declared:
        return check.failed(
            f"SGLang {sg.version} at {sg.root} does not declare {env_name}: "
            "the variable is silently ignored and the head stays BF16",
            [LAUNCH, SGLANG],
            "build",
            **ev,
        )
    return check.passed(f"FP8 LM head requested and supported by SGLang {sg.version}", [LAUNCH, SGLANG], **ev)


@check.builtin(
    "lm_head.fp8",
    "check",
    needs=("fp8_lm_head_env", "lm_head_dtype"),
    remedies=("set_env", "running_build", "prove"),
)
def lm_head_fp8_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    want = check.need(ctx.expect.lm_head_dtype, "lm_head_dtype")
    demanded = _require_attestation(facts, ctx)
    if demanded is not None:
        return demanded
    obs = Observations("LM-head dtype")
    att = facts.attestation
    # When the running build does not declare the variable, 'set it' is the wrong advice.
    remedy = "running_build" if att is not None and att.sglang.declares_fp8_lm_head is False else "set_env"
    ev: dict[str, Any] = {}
    if att is not None:
        head = att.target.lm_head if att.target is not None else None
        dtype = head.weight_dtype if head is not None else None
        ev.update(
            attestation_quant_method=head.quant_method if head is not None else None,
            attestation_has_weight_scale=head.has_weight_scale if head is not None else None,
        )
        if dtype == want and not (head is not None and head.has_weight_scale):
            dtype = f"{dtype} without scales"
        obs.add(ATTESTATION, "target", dtype)
    log = facts.log
    if log is not None and log.head_dtype_known:
        count = log.fp8_lm_head_lines
        ev["log_fp8_lm_head_lines"] = count
        if count > 1:
            return check.failed(
                f"'{FP8_HEAD_LINE}' appears {count} times in one server run (expected exactly once)",
                [LOG],
                remedy,
                **ev,
            )
        # Same vocabulary as the attestation, so a BF16 head seen by both is agreement, not a dispute;
        # the missing line itself is in the evidence (log_fp8_lm_head_lines: 0).
        obs.add(LOG, "target", want if count == 1 else "bfloat16")
    if obs.empty() and facts.server is None:
        # Nothing was observed at all: say the server is missing, not that HTTP cannot prove the dtype.
        return check.no_server(facts)
    if obs.empty():
        return check.errored(
            "the LM head's dtype cannot be proven over HTTP alone (SGLang reports no field for it)",
            [ATTESTATION, LOG],
            **ev,
        )
    ev.update(obs.evidence())
    disagreement = obs.disagreement()
    if disagreement:
        return check.failed(disagreement, obs.sources(), remedy, **ev)
    (dtype,) = obs.values()
    if dtype != want:
        return check.failed(f"the LM head in effect is {dtype}, not {want}", obs.sources(), remedy, **ev)
    return check.passed(f"the LM head in effect is {dtype}", obs.sources(), **ev)


def _exclusive(facts: Facts, ctx: check.CheckContext, fp32: bool, sources: list[str]) -> check.Outcome:
    """Both modes judge the same request (the launch environment, else the attestation's or the log's) against
    the FP32 flag in effect where the mode reads it (the launch command, the server's /server_info)."""
    env_name = check.need(ctx.expect.fp8_lm_head_env, "fp8_lm_head_env")
    fp8, raw = fp8_requested(facts, env_name)
    ev: dict[str, Any] = {"enable_fp32_lm_head": fp32, env_name: raw}
    if fp32 and fp8:
        return check.failed("both the FP8 LM head and --enable-fp32-lm-head are requested", sources, **ev)
    if fp32 and fp8 is None:
        return check.warned(
            f"--enable-fp32-lm-head is set; if {env_name} is also set, the FP32 flag is silently ignored",
            sources,
            **ev,
        )
    return check.passed("FP8 and FP32 LM heads are not both requested", sources, **ev)


@check.builtin("lm_head.exclusive", "preflight", needs=("fp8_lm_head_env",))
def lm_head_exclusive_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.launch is None:
        return check.no_launch(facts)
    return _exclusive(facts, ctx, facts.launch.settings.enable_fp32_lm_head, [LAUNCH])


@check.builtin("lm_head.exclusive", "check", needs=("fp8_lm_head_env",))
def lm_head_exclusive_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.server is None:
        return check.no_server(facts)
    sources = [SERVER] + ([ATTESTATION] if facts.attestation is not None else [])
    return _exclusive(facts, ctx, facts.server.settings.enable_fp32_lm_head, sources)


_UNQUANTIZED = {"float32": "FP32 logits", "bfloat16": "the BF16 head"}


def _dtype_verdict(want: str, fp8: bool, fp32: bool, sources: list[str], ev: dict[str, Any]) -> check.Outcome:
    label = _UNQUANTIZED[want]
    problems = []
    if fp8:
        problems.append("the FP8 LM head is on")
    if want == "float32" and not fp32:
        problems.append("--enable-fp32-lm-head is not given (logits in BF16)")
    if want == "bfloat16" and fp32:
        problems.append("--enable-fp32-lm-head is given (FP32 logits)")
    if problems:
        return check.failed(f"the recipe computes {label}, but " + " and ".join(problems), sources, **ev)
    return check.passed(f"{label}, no FP8 head", sources, **ev)


@check.builtin("lm_head.dtype", "preflight", needs=("lm_head_dtype", "fp8_lm_head_env"))
def lm_head_dtype_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The unquantized recipes (the baseline's FP32 logits, the cookbook's BF16 head): no FP8 head, and the
    FP32 flag exactly when the recipe wants it. An FP8 variable a build does not declare is ignored by it,
    so it does not make the head FP8 (env.undeclared reports it)."""
    want = check.need(ctx.expect.lm_head_dtype, "lm_head_dtype")
    env_name = check.need(ctx.expect.fp8_lm_head_env, "fp8_lm_head_env")
    if want not in _UNQUANTIZED:
        return check.errored(
            f"lm_head.dtype judges unquantized heads, not {want} (see lm_head.fp8)", [LAUNCH]
        )
    if facts.launch is None:
        return check.no_launch(facts)
    fp8, _ = fp8_requested(facts, env_name)
    fp32 = facts.launch.settings.enable_fp32_lm_head
    ev: dict[str, Any] = {env_name: facts.launch.env.get(env_name), "enable_fp32_lm_head": fp32}
    sources = [LAUNCH]
    sg = facts.sglang
    if fp8 and sg is not None and sg.declares(env_name) is False:
        ev["declared_by_build"] = False
        sources.append(SGLANG)
        fp8 = False  # SGLang ignores a variable it does not declare
    return _dtype_verdict(want, bool(fp8), fp32, sources, ev)


@check.builtin("lm_head.dtype", "check", needs=("lm_head_dtype",), remedies=("prove",))
def lm_head_dtype_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """Live: the FP32 flag from /server_info; "no FP8 head" needs in-process or log evidence, because a
    quantized head ignores the FP32 flag without a word."""
    want = check.need(ctx.expect.lm_head_dtype, "lm_head_dtype")
    if want not in _UNQUANTIZED:
        return check.errored(
            f"lm_head.dtype judges unquantized heads, not {want} (see lm_head.fp8)", [SERVER]
        )
    if facts.server is None:
        return check.errored(facts.errors.get(SERVER, "server state unavailable"), [SERVER])
    fp32 = facts.server.settings.enable_fp32_lm_head
    ev: dict[str, Any] = {"enable_fp32_lm_head": fp32}
    att, log = facts.attestation, facts.log
    if att is not None and att.target is not None and att.target.lm_head is not None:
        dtype = att.target.lm_head.weight_dtype
        ev["head_weight_dtype"] = dtype
        return _dtype_verdict(want, bool(dtype and "float8" in dtype), fp32, [SERVER, ATTESTATION], ev)
    if log is not None and log.head_dtype_known:
        ev["log_fp8_lm_head_lines"] = log.fp8_lm_head_lines
        return _dtype_verdict(want, bool(log.fp8_lm_head_lines), fp32, [SERVER, LOG], ev)
    return check.errored(
        "the head's dtype in effect needs the attestation or the server's log "
        "(a quantized head ignores --enable-fp32-lm-head silently)",
        [SERVER],
        remedy="prove",
        **ev,
    )
