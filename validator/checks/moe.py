"""MoE checks: is the pack's MoE runner backend really the one in effect, and can Humming run?

With ``--moe-runner-backend auto`` SGLang may silently pick another backend for a checkpoint (the pack's
``moe_auto_backend`` says which), so only an explicit choice counts before start; after start the
resolved value, the attestation's per-layer methods and the log must all agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from validator.checks.base import (
    CheckContext,
    Outcome,
    builtin,
    errored,
    failed,
    need,
    no_launch,
    passed,
    skipped,
    warned,
)
from validator.checks.sources_agree import Observations

if TYPE_CHECKING:
    from validator.sources.server_log import LogFacts
from validator.facts import ATTESTATION, HUMMING, LAUNCH, LOG, SERVER, SGLANG, Facts, logged_settings

_AUTO = "auto"


@builtin("moe.backend", "preflight", needs=("moe_runner_backend",), remedies=("explicit", "missing_backend"))
def moe_backend_preflight(facts: Facts, ctx: CheckContext) -> Outcome:
    want = need(ctx.expect.moe_runner_backend, "moe_runner_backend")
    launch = facts.launch
    if launch is None:
        return no_launch(facts)
    backend = launch.settings.moe_runner_backend
    draft = launch.settings.speculative_moe_runner_backend
    sources = [LAUNCH]
    evidence: dict[str, Any] = {"moe_runner_backend": backend, "speculative_moe_runner_backend": draft}
    if facts.sglang is not None and facts.sglang.moe_runner_backends is not None:
        sources.append(SGLANG)
        if want not in facts.sglang.moe_runner_backends:
            return failed(
                f"the installed SGLang ({facts.sglang.version}) has no '{want}' MoE runner backend",
                sources,
                "missing_backend",
                **evidence,
                available=facts.sglang.moe_runner_backends,
            )
    if backend == _AUTO:
        picks = ctx.expect.moe_auto_backend
        said = f": SGLang silently picks {picks} for this checkpoint," if picks else ","
        return failed(f"MoE runner backend is 'auto'{said} not {want}", sources, "explicit", **evidence)
    if backend != want:
        return failed(f"MoE runner backend is {backend}, not {want}", sources, "explicit", **evidence)
    if draft not in (None, want):
        return failed(
            f"the draft model's MoE backend is overridden to {draft} (--speculative-moe-runner-backend)",
            sources,
            "explicit",
            **evidence,
        )
    return passed(f"MoE runner backend is {want} (target and draft)", sources, **evidence)


@builtin("moe.backend", "check", needs=("moe_runner_backend",), remedies=("explicit",))
def moe_backend_live(facts: Facts, ctx: CheckContext) -> Outcome:
    want = need(ctx.expect.moe_runner_backend, "moe_runner_backend")
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
        err = facts.errors.get(SERVER) or facts.errors.get(ATTESTATION)
        return errored(err or "no evidence of the MoE backend (server, attestation or log)", [SERVER])
    disagreement = obs.disagreement()
    if disagreement:
        return failed(disagreement, obs.sources(), "explicit", **obs.evidence())
    values = obs.values()
    if values != {want}:
        bad = ", ".join(sorted(str(v) for v in values if v != want))
        return failed(
            f"MoE runner backend in effect is {bad}, not {want}", obs.sources(), "explicit", **obs.evidence()
        )
    return passed(f"MoE runner backend in effect is {want}", obs.sources(), **obs.evidence())


def log_backend(log: LogFacts) -> str | None:
    """The backend the log shows really preparing the experts: Humming's per-layer preparation lines
    against FlashInfer / TRT-LLM / Marlin ones and the silent auto override. The resolved
    ``server_args=`` value alone is not enough: it is what was asked, not what ran."""
    humming = log.humming_prepare_lines + log.humming_indexed_gemm_lines
    flashinfer = log.flashinfer_expert_lines + log.trtllm_expert_lines + (1 if log.flashinfer_override else 0)
    seen = [
        name
        for name, n in (
            ("humming", humming),
            ("flashinfer_mxfp4", flashinfer),
            ("marlin", log.marlin_expert_lines),
        )
        if n
    ]
    if len(seen) > 1:
        return "mixed:" + ",".join(seen)
    if seen:
        return seen[0]
    settings = logged_settings(log)
    return settings.moe_runner_backend if settings is not None else None


@builtin(
    "moe.humming_runtime",
    "preflight",
    needs=("moe_runner_backend",),
    remedies=("not_installed", "cache_dir", "tmp_dir", "cold_cache"),
    params=("cache_dir", "tmp_dir"),
)
def humming_runtime(facts: Facts, ctx: CheckContext) -> Outcome:
    launch = facts.launch
    if launch is not None and launch.settings.moe_runner_backend != ctx.expect.moe_runner_backend:
        return skipped("the launch command does not select the humming backend (see moe.backend)", [LAUNCH])
    h = facts.humming
    if h is None:
        if HUMMING in facts.errors:
            return errored(facts.errors[HUMMING], [HUMMING])
        note = facts.sglang.note if facts.sglang is not None else None
        return skipped(
            f"the server's environment was not found: {note or 'no SGLang installation'}", [HUMMING]
        )
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
        return failed(
            "humming-kernels is not installed in the server's environment: the humming backend cannot load",
            [HUMMING],
            "not_installed",
            **ev,
        )
    who = f" by {h.service_user}" if h.service_user else ""
    if not h.cache_writable:
        return failed(
            f"Humming's kernel cache {h.cache_dir} is not writable{who}",
            [HUMMING],
            "cache_dir",
            params=params,
            **ev,
        )
    if not h.tmp_writable:
        return failed(
            f"Humming's tmp directory {h.tmp_dir} is not writable{who}",
            [HUMMING],
            "tmp_dir",
            params=params,
            **ev,
        )
    if h.cached_kernels == 0:
        return warned(
            f"Humming's kernel cache {h.cache_dir} is empty: the first requests will JIT-compile kernels",
            [HUMMING],
            "cold_cache",
            **ev,
        )
    return passed(f"humming-kernels {h.version} ready, {h.cached_kernels} cached kernels", [HUMMING], **ev)
