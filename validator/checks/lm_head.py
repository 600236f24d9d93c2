"""LM-head checks: is the head really FP8, and is the FP32 head not requested alongside it?

The FP8 head exists only in SGLang builds carrying the Ling-3.0 patch; stock 0.5.23 ignores
``SGLANG_ENABLE_FP8_LM_HEAD`` without a word, and a quantized head ignores ``--enable-fp32-lm-head``
without a warning. Before start we check the request and the build; after start, the attestation's
real dtype and the log line ``Online FP8 quantization enabled for lm_head.`` (exactly once).
"""

from __future__ import annotations

from typing import Any

from validator.checks.base import (
    CheckContext,
    Outcome,
    builtin,
    env_bool,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from validator.checks.sources_agree import Observations
from validator.facts import ATTESTATION, LAUNCH, LOG, SERVER, SGLANG, Facts

FP8_LOG_LINE = "Online FP8 quantization enabled for lm_head."


def fp8_requested(facts: Facts, env_name: str) -> tuple[bool | None, str | None]:
    """(requested?, raw value) from the launch environment, else from the attestation's env."""
    raw: str | None = None
    if facts.launch is not None:
        raw = facts.launch.env.get(env_name)
    elif facts.attestation is not None:
        raw = (facts.attestation.get("env") or {}).get(env_name)
    elif facts.log is not None and int(getattr(facts.log, "fp8_lm_head_lines", 0)) > 0:
        return True, None
    else:
        return None, None
    return env_bool(raw), raw


def _require_attestation(facts: Facts, ctx: CheckContext) -> Outcome | None:
    if facts.attestation is None and (ctx.expect.require_attestation or ctx.strict):
        why = facts.errors.get(ATTESTATION, "no attestation given (--attestation)")
        return errored(f"the rule pack requires the in-process attestation: {why}", [ATTESTATION])
    if facts.attestation is None and ATTESTATION in facts.errors:
        return errored(f"attestation unusable: {facts.errors[ATTESTATION]}", [ATTESTATION])
    return None


@builtin("lm_head.fp8")
def lm_head_fp8(facts: Facts, ctx: CheckContext) -> Outcome:
    env_name = ctx.expect.fp8_lm_head_env
    remedy = f"Set {env_name}=1 in the server's environment (systemd Environment= or its EnvironmentFile)."
    if ctx.mode == "preflight":
        launch = facts.launch
        if launch is None:
            return errored(facts.errors.get(LAUNCH, "no launch command given"), [LAUNCH])
        requested, raw = fp8_requested(facts, env_name)
        ev: dict[str, Any] = {env_name: raw, "set_in": launch.env_origin.get(env_name)}
        if requested is None:
            return failed(
                f"{env_name}={raw!r} is not a boolean SGLang accepts (true/1/yes/y): "
                "it warns and keeps the BF16 head",
                [LAUNCH],
                remedy,
                **ev,
            )
        if not requested:
            return failed(f"the FP8 LM head is not requested ({env_name} is not set)", [LAUNCH], remedy, **ev)
        sg = facts.sglang
        if sg is None or sg.root is None:
            note = (sg.note if sg is not None else None) or facts.errors.get(
                SGLANG, "no SGLang installation found"
            )
            return skipped(
                f"FP8 head requested, but support cannot be checked: {note}", [LAUNCH, SGLANG], **ev
            )
        ev["sglang_version"] = sg.version
        ev["sglang_root"] = str(sg.root)
        if sg.declares_fp8_lm_head is None:
            return errored(f"cannot read srt/environ.py of {sg.root}: {sg.note}", [SGLANG], **ev)
        if not sg.declares_fp8_lm_head:
            return failed(
                f"SGLang {sg.version} at {sg.root} does not declare {env_name}: "
                "the variable is silently ignored "
                "and the head stays BF16",
                [LAUNCH, SGLANG],
                "Install an SGLang build carrying the Ling-3.0 patch "
                "(upstream PR #33561, branch ling3-flash-dspark).",
                **ev,
            )
        return passed(f"FP8 LM head requested and supported by SGLang {sg.version}", [LAUNCH, SGLANG], **ev)

    demanded = _require_attestation(facts, ctx)
    if demanded is not None:
        return demanded
    obs = Observations("LM-head dtype")
    att = facts.attestation
    remedy = _live_remedy(facts, env_name, remedy)
    ev = {}
    if att is not None:
        head = (att.get("target") or {}).get("lm_head") or {}
        dtype = head.get("weight_dtype")
        ev.update(
            attestation_quant_method=head.get("quant_method"),
            attestation_has_weight_scale=head.get("has_weight_scale"),
        )
        if dtype == ctx.expect.lm_head_dtype and not head.get("has_weight_scale"):
            dtype = f"{dtype} without scales"
        obs.add(ATTESTATION, "target", dtype)
    log = facts.log
    if log is not None:
        count = int(getattr(log, "fp8_lm_head_lines", 0))
        ev["log_fp8_lm_head_lines"] = count
        if count > 1:
            return failed(
                f"'{FP8_LOG_LINE}' appears {count} times in one server run (expected exactly once)",
                [LOG],
                remedy,
                **ev,
            )
        # Same vocabulary as the attestation, so a BF16 head seen by both is agreement, not a dispute;
        # the missing line itself is in the evidence (log_fp8_lm_head_lines: 0).
        obs.add(LOG, "target", ctx.expect.lm_head_dtype if count == 1 else "bfloat16")
    if obs.empty() and facts.server is None:
        # Nothing was observed at all: say the server is missing, not that HTTP cannot prove the dtype.
        return errored(facts.errors.get(SERVER, "server state unavailable"), [SERVER])
    if obs.empty():
        return warned(
            "the LM head's dtype cannot be proven over HTTP alone (SGLang reports no field for it)",
            [SERVER],
            "Give --attestation (the spark-validate SGLang plugin) or --log (the server's log) to prove it.",
            **ev,
        )
    ev.update(obs.evidence())
    disagreement = obs.disagreement()
    if disagreement:
        return failed(disagreement, obs.sources(), remedy, **ev)
    (dtype,) = obs.values()
    if dtype != ctx.expect.lm_head_dtype:
        return failed(
            f"the LM head in effect is {dtype}, not {ctx.expect.lm_head_dtype}", obs.sources(), remedy, **ev
        )
    return passed(f"the LM head in effect is {dtype}", obs.sources(), **ev)


def _live_remedy(facts: Facts, env_name: str, default: str) -> str:
    """When the running build does not declare the variable, 'set it' is the wrong advice."""
    declares = ((facts.attestation or {}).get("sglang") or {}).get("declares_fp8_lm_head")
    if declares is False:
        return (
            f"The running SGLang does not declare {env_name} and ignores it silently: install a build "
            "carrying the Ling-3.0 patch (upstream PR #33561, branch ling3-flash-dspark); "
            "spark-validate preflight checks the build before start."
        )
    return default


@builtin("lm_head.exclusive")
def lm_head_exclusive(facts: Facts, ctx: CheckContext) -> Outcome:
    env_name = ctx.expect.fp8_lm_head_env
    remedy = "Drop --enable-fp32-lm-head: a quantized FP8 head ignores it without any warning."
    if ctx.mode == "preflight":
        launch = facts.launch
        if launch is None:
            return errored(facts.errors.get(LAUNCH, "no launch command given"), [LAUNCH])
        fp32 = bool(launch.args.get("enable_fp32_lm_head"))
        fp8, raw = fp8_requested(facts, env_name)
        sources = [LAUNCH]
    else:
        if facts.server is None:
            return errored(facts.errors.get(SERVER, "server state unavailable"), [SERVER])
        fp32 = bool(facts.server.server_info.get("enable_fp32_lm_head"))
        fp8, raw = fp8_requested(facts, env_name)
        sources = [SERVER] + ([ATTESTATION] if facts.attestation is not None else [])
    ev = {"enable_fp32_lm_head": fp32, env_name: raw}
    if fp32 and fp8:
        return failed("both the FP8 LM head and --enable-fp32-lm-head are requested", sources, remedy, **ev)
    if fp32 and fp8 is None:
        return warned(
            f"--enable-fp32-lm-head is set; if {env_name} is also set, the FP32 flag is silently ignored",
            sources,
            remedy,
            **ev,
        )
    return passed("FP8 and FP32 LM heads are not both requested", sources, **ev)
