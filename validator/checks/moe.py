"""MoE checks: is the pack's MoE runner backend really the one in effect, and can Humming run?

With ``--moe-runner-backend auto`` SGLang may silently pick another backend for a checkpoint (the pack's
``moe_auto_backend`` says which), so only an explicit choice counts before start; after start the
resolved value, the attestation's per-layer methods and the log must all agree.
"""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.checks.sources_agree import Observations
from validator.facts import (
    ATTESTATION,
    CHECKPOINT,
    FLASHINFER,
    HOST,
    HUMMING,
    LAUNCH,
    LOG,
    SERVER,
    SGLANG,
    Facts,
    LogFacts,
)
from validator.server_settings import logged_settings

_AUTO = "auto"


@check.builtin(
    "moe.backend",
    "preflight",
    needs=("moe_runner_backend",),
    remedies=("explicit", "missing_backend"),
)
def moe_backend_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    want = check.need(ctx.expect.moe_runner_backend, "moe_runner_backend")
    launch = facts.launch
    if launch is None:
        return check.no_launch(facts)
    backend = launch.settings.moe_runner_backend
    draft = launch.settings.speculative_moe_runner_backend
    sources = [LAUNCH]
    evidence: dict[str, Any] = {"moe_runner_backend": backend, "speculative_moe_runner_backend": draft}
    if facts.sglang is not None and facts.sglang.moe_runner_backends is not None:
        sources.append(SGLANG)
        if want not in facts.sglang.moe_runner_backends:
            return check.failed(
                f"the installed SGLang ({facts.sglang.version}) has no '{want}' MoE runner backend",
                sources,
                "missing_backend",
                **evidence,
                available=facts.sglang.moe_runner_backends,
            )
    if backend == _AUTO:
        picks, how = auto_backend(facts, ctx.expect.moe_auto_backend)
        evidence.update(auto_resolves_to=picks, auto_decided_by=how)
        if picks is not None:
            sources.append(CHECKPOINT)
        if picks == want and draft in (None, want, _AUTO):
            return check.passed(f"MoE runner backend 'auto' resolves to {want} ({how})", sources, **evidence)
        said = f"SGLang picks {picks} ({how})" if picks else f"what SGLang picks is unknown ({how})"
        return check.failed(
            f"MoE runner backend is 'auto': {said}; the recipe needs {want}",
            sources,
            "explicit",
            **evidence,
        )
    if backend != want:
        return check.failed(f"MoE runner backend is {backend}, not {want}", sources, "explicit", **evidence)
    if draft not in (None, want):
        return check.failed(
            f"the draft model's MoE backend is overridden to {draft} (--speculative-moe-runner-backend)",
            sources,
            "explicit",
            **evidence,
        )
    return check.passed(f"MoE runner backend is {want} (target and draft)", sources, **evidence)


@check.builtin("moe.backend", "check", needs=("moe_runner_backend",), remedies=("explicit",))
def moe_backend_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    want = check.need(ctx.expect.moe_runner_backend, "moe_runner_backend")
    obs = Observations("MoE runner backend")
    if facts.server is not None:
        info = facts.server.settings
        backend = info.moe_runner_backend
        obs.add(SERVER, "target", backend)
        if info.speculative:
            obs.add(SERVER, "draft", info.speculative_moe_runner_backend or backend)
    att = facts.attestation
    if att is not None:
        for role, section in (("target", att.target), ("draft", att.draft)):
            backends = section.moe.runner_backends if section is not None and section.moe is not None else {}
            if backends:
                value = next(iter(backends)) if len(backends) == 1 else "mixed:" + ",".join(sorted(backends))
                obs.add(ATTESTATION, role, value)
    if facts.log is not None:
        obs.add(LOG, "target", log_backend(facts.log))
    if obs.empty():
        if facts.server is None:
            return check.no_server(facts)
        err = facts.errors.get(ATTESTATION)
        return check.errored(err or "no evidence of the MoE backend (server, attestation or log)", [SERVER])
    disagreement = obs.disagreement()
    if disagreement:
        return check.failed(disagreement, obs.sources(), "explicit", **obs.evidence())
    values = obs.values()
    if values != {want}:
        bad = ", ".join(sorted(str(v) for v in values if v != want))
        return check.failed(
            f"MoE runner backend in effect is {bad}, not {want}", obs.sources(), "explicit", **obs.evidence()
        )
    return check.passed(f"MoE runner backend in effect is {want}", obs.sources(), **obs.evidence())


_INT4_METHODS = frozenset({"gptq", "awq", "gptq_marlin", "awq_marlin", "moe_wna16"})


def auto_backend(facts: Facts, mxfp4_pick: str | None) -> tuple[str | None, str]:
    """What ``--moe-runner-backend auto`` resolves to for the checkpoint's ``quantization_config``, and why;
    (None, why) when unknown here. MXFP4 experts in FP8: ``mxfp4_pick`` (0.5.23's
    ``_bailing_moe_v3_overrides``); INT4 weights: Marlin (sglang#36204); anything else: never a guess."""
    ckpt = facts.checkpoint
    if ckpt is None:
        why = facts.errors.get(CHECKPOINT) or "the checkpoint is not readable here"
        return None, f"it depends on the checkpoint's quantization_config: {why}"
    quant = ckpt.config.get("quantization_config")
    method = (ckpt.quant_method or "").lower()
    if ckpt.routed_experts_mxfp4 and method == "fp8" and mxfp4_pick:
        return mxfp4_pick, "the checkpoint's quantization_config: FP8 with MXFP4 routed experts"
    if method in _INT4_METHODS or (method == "compressed-tensors" and _int4_groups(quant)):
        return "marlin", f"the checkpoint's quantization_config: {method} INT4 weights run Marlin MoE kernels"
    shown = method or "none"
    return None, f"the checkpoint's quant_method {shown}: SGLang decides its MoE backend only at start"


def _int4_groups(quant: object) -> bool:
    """compressed-tensors ``config_groups`` whose weights are 4-bit integers (W4A16)."""
    groups = quant.get("config_groups") if isinstance(quant, dict) else None
    for group in groups.values() if isinstance(groups, dict) else []:
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and weights.get("num_bits") == 4 and weights.get("type") == "int":
            return True
    return False


def log_backend(log: LogFacts) -> str | None:
    """The backend the log shows really preparing the experts: Humming's per-layer preparation lines
    against FlashInfer / TRT-LLM / Marlin ones, the silent auto override, and the backend a MoE layer names
    for itself (FlashInfer's deferred-finalize line). The resolved
    ``server_args=`` value alone is not enough: it is what was asked, not what ran."""
    counts = {
        "humming": log.humming_prepare_lines + log.humming_indexed_gemm_lines,
        "flashinfer_mxfp4": log.flashinfer_expert_lines + log.trtllm_expert_lines + log.flashinfer_override,
        "marlin": log.marlin_expert_lines,
    }
    for backend, n in log.layer_backend_lines.items():  # what a layer reports of its own backend
        counts[backend] = counts.get(backend, 0) + n
    seen = [name for name, n in counts.items() if n]
    if len(seen) > 1:
        return "mixed:" + ",".join(seen)
    if seen:
        return seen[0]
    settings = logged_settings(log)
    logged = settings.moe_runner_backend if settings is not None else None
    # 'auto' in the start's arguments is the request, not a backend: builds that log the arguments before
    # resolving them (the dataclass repr) leave it for the weight load to decide, so it says nothing of
    # what ran
    return None if logged == _AUTO else logged


def _env_not_read(facts: Facts, source: str, sources: list[str]) -> check.Outcome:
    """A package of the server's environment (humming-kernels, FlashInfer) that was not inspected: the
    source's own error when it ran and failed, else why the environment itself was not found."""
    if source in facts.errors:
        return check.errored(facts.errors[source], [source])
    note = facts.sglang.note if facts.sglang is not None else None
    return check.errored(
        f"the server's environment was not found: {note or 'no SGLang installation'}", sources
    )


@check.builtin(
    "moe.humming_runtime",
    "preflight",
    needs=("moe_runner_backend",),
    remedies=("not_installed", "cache_dir", "tmp_dir", "cold_cache"),
    params=("cache_dir", "tmp_dir"),
)
def humming_runtime(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    launch = facts.launch
    if launch is not None and launch.settings.moe_runner_backend != ctx.expect.moe_runner_backend:
        return check.skipped(
            "the launch command does not select the humming backend (see moe.backend)", [LAUNCH]
        )
    h = facts.humming
    if h is None:
        return _env_not_read(facts, HUMMING, [SGLANG, HUMMING])
    ev: dict[str, Any] = {
        "installed": h.installed,
        "version": h.version,
        "cache_dir": str(h.cache_dir),
        "cache_writable": h.cache_writable,
        "tmp_dir": str(h.tmp_dir),
        "tmp_writable": h.tmp_writable,
        "cached_kernels": h.cached_kernels,
    }
    if h.service_user:
        ev["service_user"] = h.service_user
    params: dict[str, object] = {"cache_dir": h.cache_dir, "tmp_dir": h.tmp_dir}
    if not h.installed:
        return check.failed(
            "humming-kernels is not installed in the server's environment: the humming backend cannot load",
            [HUMMING],
            "not_installed",
            **ev,
        )
    who = f" by {h.service_user}" if h.service_user else ""
    # The two directories Humming writes at start, in the order it needs them; each has its remedy variant.
    for writable, what, path, remedy in (
        (h.cache_writable, "kernel cache", h.cache_dir, "cache_dir"),
        (h.tmp_writable, "tmp directory", h.tmp_dir, "tmp_dir"),
    ):
        if not writable:
            return check.failed(
                f"Humming's {what} {path} is not writable{who}", [HUMMING], remedy, params=params, **ev
            )
    if h.cached_kernels == 0:
        return check.warned(
            f"Humming's kernel cache {h.cache_dir} is empty: the first requests will JIT-compile kernels",
            [HUMMING],
            "cold_cache",
            **ev,
        )
    return check.passed(
        f"humming-kernels {h.version} ready, {h.cached_kernels} cached kernels", [HUMMING], **ev
    )


_FLASHINFER_BACKENDS = ("flashinfer_mxfp4", "auto")


def _mismatch(package: str, version: str, why: str, ev: dict[str, Any]) -> check.Outcome:
    """A FlashInfer companion package of another version than flashinfer-python, and what that does."""
    return check.failed(
        f"{package} does not match flashinfer-python {version}: {why}",
        [FLASHINFER],
        "versions",
        params={"version": version},
        **ev,
    )


@check.builtin(
    "moe.flashinfer_kernels",
    "preflight",
    needs=("moe_runner_backend",),
    remedies=("install", "versions", "precompile", "copy", "cubins"),
    params=("cache_dir", "version", "found", "cubin_version"),
)
def flashinfer_kernels(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The CUTLASS MoE kernels of the flashinfer_mxfp4 path, precompiled for the installed FlashInfer where
    the server will look (sources/host/flashinfer.py); JIT-compiling them (97 targets) while weights load has
    OOM-killed and hard-locked GB10 hosts. flashinfer-cubin must carry flashinfer-python's version."""
    launch = facts.launch
    if launch is None:
        return check.no_launch(facts)
    backend = launch.settings.moe_runner_backend
    if backend not in _FLASHINFER_BACKENDS:
        return check.skipped(
            f"the launch command selects {backend}, not flashinfer_mxfp4 (see moe.backend)", [LAUNCH]
        )
    if facts.host is not None and facts.host.is_dgx_spark is False:
        return check.skipped(
            "fused_moe_120 is the sm_12x (GB10) module; this host is not a DGX Spark", [HOST]
        )
    fi = facts.flashinfer
    if fi is None:
        return _env_not_read(facts, FLASHINFER, [FLASHINFER])
    ev: dict[str, Any] = {
        "flashinfer_python": fi.python_version,
        "flashinfer_cubin": fi.cubin_version,
        "flashinfer_jit_cache": fi.jit_cache_version,
        "cache_dir": str(fi.cache_dir),
        "cache_dir_rule": fi.cache_dir_rule,
        "kernels": [str(p) for p in fi.kernels],
        "elsewhere": [str(p) for p in fi.elsewhere],
        "version_check_disabled": fi.version_check_disabled,
    }
    if fi.python_version is None:
        return check.failed(
            f"flashinfer-python is not installed in the server's environment: {fi.note}",
            [FLASHINFER],
            "install",
            **ev,
        )
    version = fi.python_version
    ev["cubin_mismatch"] = fi.cubin_mismatch
    cubins = ""  # a mismatched flashinfer-cubin the installed release ignores: what that costs, said below
    if fi.cubin_version is not None and fi.cubin_version != version:
        if fi.cubin_mismatch != "ignored" or fi.version_check_disabled:
            # 0.6.x raises at import; with the check disabled either release uses the other version's cubins
            why = (
                "FLASHINFER_DISABLE_VERSION_CHECK makes FlashInfer use that version's cubins as they are"
                if fi.version_check_disabled
                else "start-up aborts in flashinfer/jit/env.py"
                if fi.cubin_mismatch == "raises"
                else "what the installed flashinfer/jit/env.py does with it could not be read"
            )
            return _mismatch(f"flashinfer-cubin {fi.cubin_version}", version, why, ev)
        cubins = (
            f"flashinfer-cubin {fi.cubin_version} does not match flashinfer-python {version}, which ignores "
            f"it (flashinfer/jit/env.py) and downloads the cubins it needs into {fi.cache_dir / 'cubins'} at "
            "first use: on a host without network that download fails while serving"
        )
    ev["jit_cache_mismatch"] = fi.jit_cache_mismatch
    if fi.jit_cache_mismatch in ("raises", "unknown") and not fi.version_check_disabled:
        why = (
            "start-up aborts in flashinfer/jit/env.py"
            if fi.jit_cache_mismatch == "raises"
            else "what the installed flashinfer/jit/env.py does with it could not be read"
        )
        return _mismatch(f"flashinfer-jit-cache {fi.jit_cache_version}", version, why, ev)
    ignored = (
        f" (flashinfer-jit-cache {fi.jit_cache_version} is not for FlashInfer {version}, which ignores it)"
        if fi.jit_cache_mismatch == "ignored"
        else ""
    )
    if not fi.kernels:
        found = ", ".join(str(p) for p in fi.elsewhere[:3])
        where = f"; built at {found}, where this server does not look" if found else ""
        return check.failed(
            f"fused_moe_120 is not precompiled for FlashInfer {version} in {fi.cache_dir} "
            f"({fi.cache_dir_rule}){where}{ignored}: the server would JIT-compile 97 CUTLASS targets while "
            "the weights load" + (f"; and {cubins}" if cubins else ""),
            [FLASHINFER],
            "copy" if found else "precompile",
            params={"cache_dir": str(fi.cache_dir), "version": version, "found": found},
            **ev,
        )
    if cubins:
        return check.warned(
            f"fused_moe_120 precompiled for FlashInfer {version} ({fi.kernels[0]}), but {cubins}",
            [FLASHINFER],
            "cubins",
            params={"version": version, "cubin_version": fi.cubin_version, "cache_dir": str(fi.cache_dir)},
            **ev,
        )
    return check.passed(
        f"fused_moe_120 precompiled for FlashInfer {version}: {fi.kernels[0]}{ignored}", [FLASHINFER], **ev
    )


@check.builtin("moe.humming_gb10", "preflight", needs=("moe_runner_backend",))
def humming_gb10(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """humming-kernels releases that query NVML's memory clock unguarded crash the engine at start on GB10,
    which has none (inclusionAI/humming#48); read from the installed code (sources/host/humming.py)."""
    launch = facts.launch
    if launch is not None and launch.settings.moe_runner_backend != ctx.expect.moe_runner_backend:
        return check.skipped(
            "the launch command does not select the humming backend (see moe.backend)", [LAUNCH]
        )
    if facts.host is not None and facts.host.is_dgx_spark is False:
        return check.skipped("NVML reports a memory clock off GB10; this host is not a DGX Spark", [HOST])
    h = facts.humming
    if h is None:  # could not be gathered: error (skip means "does not apply")
        why = facts.errors.get(HUMMING) or check.sglang_note(facts)
        return check.errored(
            f"humming-kernels is not inspected here ({why}; see moe.humming_runtime)", [HUMMING]
        )
    if not h.installed:  # nothing installed that could crash: moe.humming_runtime fails it
        return check.skipped(
            f"humming-kernels is not installed ({h.note}; see moe.humming_runtime)", [HUMMING]
        )
    detail = h.gb10_bandwidth_detail
    ev: dict[str, Any] = {
        "version": h.version,
        "gb10_bandwidth_safe": h.gb10_bandwidth_safe,
        "detail": detail,
    }
    if h.gb10_bandwidth_safe is None:
        return check.errored(
            f"humming-kernels {h.version}: its NVML use could not be read ({detail})", [HUMMING], **ev
        )
    if not h.gb10_bandwidth_safe:
        return check.failed(
            f"humming-kernels {h.version}: {detail}; on GB10 NVML raises NotSupported for the memory clock "
            "and the engine dies at start (inclusionAI/humming#48)",
            [HUMMING],
            **ev,
        )
    return check.passed(
        f"humming-kernels {h.version} survives GB10's missing memory clock: {detail}", [HUMMING], **ev
    )
