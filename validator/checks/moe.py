"""MoE checks: is the Humming MXFP4 backend really the one in effect, and can it run?

With ``--moe-runner-backend auto`` SGLang silently forces ``flashinfer_mxfp4`` for this checkpoint
(``_bailing_moe_v3_overrides``), so only an explicit ``humming`` counts before start; after start the
resolved value, the attestation's per-layer methods and the log must all agree.
"""

from __future__ import annotations

from typing import Any

from validator.checks.base import (
    CheckContext,
    Outcome,
    builtin,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from validator.checks.sources_agree import Observations
from validator.facts import ATTESTATION, HUMMING, LAUNCH, LOG, SERVER, SGLANG, Facts

_AUTO = "auto"


def _backend_remedy(expected: str) -> str:
    return (
        f"Pass --moe-runner-backend {expected} explicitly (and do not set --speculative-moe-runner-backend, "
        f"or set it to {expected}); 'auto' resolves to flashinfer_mxfp4 for this checkpoint."
    )


@builtin("moe.backend")
def moe_backend(facts: Facts, ctx: CheckContext) -> Outcome:
    want = ctx.expect.moe_runner_backend
    if ctx.mode == "preflight":
        return _preflight(facts, want)
    return _live(facts, want)


def _preflight(facts: Facts, want: str) -> Outcome:
    launch = facts.launch
    if launch is None:
        return errored(facts.errors.get(LAUNCH, "no launch command given"), [LAUNCH])
    backend = launch.args.get("moe_runner_backend")
    draft = launch.args.get("speculative_moe_runner_backend")
    sources = [LAUNCH]
    evidence: dict[str, Any] = {"moe_runner_backend": backend, "speculative_moe_runner_backend": draft}
    if facts.sglang is not None and facts.sglang.moe_runner_backends is not None:
        sources.append(SGLANG)
        if want not in facts.sglang.moe_runner_backends:
            return failed(
                f"the installed SGLang ({facts.sglang.version}) has no '{want}' MoE runner backend",
                sources,
                "Install an SGLang build whose --moe-runner-backend accepts humming (0.5.23 or newer).",
                **evidence,
                available=facts.sglang.moe_runner_backends,
            )
    if backend == _AUTO:
        return failed(
            f"MoE runner backend is 'auto': SGLang silently picks flashinfer_mxfp4 for this checkpoint, "
            f"not {want}",
            sources,
            _backend_remedy(want),
            **evidence,
        )
    if backend != want:
        return failed(
            f"MoE runner backend is {backend}, not {want}", sources, _backend_remedy(want), **evidence
        )
    if draft not in (None, want):
        return failed(
            f"the draft model's MoE backend is overridden to {draft} (--speculative-moe-runner-backend)",
            sources,
            _backend_remedy(want),
            **evidence,
        )
    return passed(f"MoE runner backend is {want} (target and draft)", sources, **evidence)


def _live(facts: Facts, want: str) -> Outcome:
    obs = Observations("MoE runner backend")
    if facts.server is not None:
        info = facts.server.server_info
        backend = info.get("moe_runner_backend")
        draft = info.get("speculative_moe_runner_backend") or backend
        obs.add(SERVER, "target", backend)
        if info.get("speculative_algorithm"):
            obs.add(SERVER, "draft", draft)
    att = facts.attestation
    if att is not None:
        for role in ("target", "draft"):
            section = att.get(role)
            if not isinstance(section, dict):
                continue
            moe = section.get("moe") or {}
            backends = moe.get("runner_backends") or {}
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
        return failed(disagreement, obs.sources(), _backend_remedy(want), **obs.evidence())
    values = obs.values()
    if values != {want}:
        bad = ", ".join(sorted(str(v) for v in values if v != want))
        return failed(
            f"MoE runner backend in effect is {bad}, not {want}",
            obs.sources(),
            _backend_remedy(want),
            **obs.evidence(),
        )
    return passed(f"MoE runner backend in effect is {want}", obs.sources(), **obs.evidence())


def log_backend(log: Any) -> str | None:
    """The backend the log shows really preparing the experts: Humming's per-layer preparation lines
    against FlashInfer / TRT-LLM / Marlin ones and the silent auto override. The resolved
    ``server_args=`` value alone is not enough: it is what was asked, not what ran."""
    humming = int(getattr(log, "humming_prepare_lines", 0)) + int(
        getattr(log, "humming_indexed_gemm_lines", 0)
    )
    flashinfer = int(getattr(log, "flashinfer_expert_lines", 0)) + int(getattr(log, "trtllm_expert_lines", 0))
    if getattr(log, "flashinfer_override", False):
        flashinfer += 1
    marlin = int(getattr(log, "marlin_expert_lines", 0))
    seen = [
        name for name, n in (("humming", humming), ("flashinfer_mxfp4", flashinfer), ("marlin", marlin)) if n
    ]
    if len(seen) > 1:
        return "mixed:" + ",".join(seen)
    if seen:
        return seen[0]
    args = getattr(log, "server_args", None)
    if isinstance(args, dict) and isinstance(args.get("moe_runner_backend"), str):
        return str(args["moe_runner_backend"])
    return None


@builtin("moe.humming_runtime")
def humming_runtime(facts: Facts, ctx: CheckContext) -> Outcome:
    if ctx.mode != "preflight":
        return skipped("the Humming runtime is checked before start, on the server's host")
    launch = facts.launch
    if launch is not None and launch.args.get("moe_runner_backend") != ctx.expect.moe_runner_backend:
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
    if not h.installed:
        return failed(
            "humming-kernels is not installed in the server's environment: the humming backend cannot load",
            [HUMMING],
            "pip install humming-kernels into the SGLang environment.",
            **ev,
        )
    who = f" by {h.service_user}" if h.service_user else ""
    if not h.cache_writable:
        return failed(
            f"Humming's kernel cache {h.cache_dir} is not writable{who}",
            [HUMMING],
            f"Create {h.cache_dir} owned by the service user, or set HUMMING_CACHE_DIR.",
            **ev,
        )
    if not h.tmp_writable:
        return failed(
            f"Humming's tmp directory {h.tmp_dir} is not writable{who}",
            [HUMMING],
            f"Create {h.tmp_dir} owned by the service user, or set HUMMING_TMP_DIR.",
            **ev,
        )
    if h.cached_kernels == 0:
        return warned(
            f"Humming's kernel cache {h.cache_dir} is empty: the first requests will JIT-compile kernels",
            [HUMMING],
            "Warm the cache once (a short generation after start) "
            "and keep HUMMING_CACHE_DIR on persistent storage.",
            **ev,
        )
    return passed(f"humming-kernels {h.version} ready, {h.cached_kernels} cached kernels", [HUMMING], **ev)
