"""Named simulator scenarios: one consistent server state per name, shown the same way on every surface.

A scenario is a small set of settings; everything a client can observe (``/server_info`` resolved args and
``launch_command``, ``/generate`` ``meta_info``, ``/metrics``, the server log, the attestation file and the
``/weights_checker`` checksums) is derived from those settings in one place (:class:`Scenario`'s
properties), so the surfaces cannot disagree with each other.

======================  ==========================================================  ==========================
scenario                what a real server in that state shows                      validator checks that fail
======================  ==========================================================  ==========================
healthy                 humming, FP8 head (logged once), NEXTN 3/1/4, draft shares  none
                        the target's LM-head module; accept length ~3.90 greedy,
                        ~2.68 sampled; attestation shared_module true
draft-head-weight-only  same flags, but a build whose NEXTN class lacks             spec.lm_head_shared,
                        set_lm_head_from_target: draft keeps its unquantized        spec.accept_length
                        method over FP8 codes; accept length exactly 1.00 (+1/V);
                        attestation shared_module false / shared_weight true;
                        weights_checker draft lacks lm_head.weight_scale
backend-auto            --moe-runner-backend auto resolved to flashinfer_mxfp4,     moe.backend
                        the "Bailing V3 mixed FP8/MXFP4 checkpoint" log line,
                        FlashInfer CUTLASS expert lines; slower steps
fp32-head               baseline head: --enable-fp32-lm-head, no FP8 variable;      lm_head.fp8
                        head bfloat16, no "Online FP8" line
fp8-and-fp32            FP8 variable and --enable-fp32-lm-head both set; the        lm_head.exclusive
                        quantized head silently ignores the FP32 flag
fp8-ignored             FP8 variable set on a stock build that does not declare     lm_head.fp8
                        it: head stays bfloat16, no "Online FP8" line; stock draft  (spec.lm_head_shared
                        class (tensor sharing, harmless for a BF16 head)            warns: harmless here)
no-spec                 no speculative flags: speculative_algorithm null, no        spec.config,
                        spec_* meta, no draft in attestation or weights_checker     spec.accept_length
slow-start              start-up phase 6x longer (503 on /health meanwhile)         none (server.ready if the
                                                                                    check's --wait is short)
crash-after-ready       ready, then the scheduler dies on the first real            server.ready / probe
                        /generate: the log shows the traceback, the process stops   (unavailable, exit 69)
                        answering (connection refused)
flaky-5xx               about 30% of non-health requests answer 503 (seeded)       depends on retries
malformed-json          /server_info, /model_info and /generate answer 200 with     server.ready (input error)
                        truncated JSON
degenerate-output       output is long runs of token 0 ("!!!!"), as on SM121 with   probe output checks
                        broken kernels; acceptance normal
metrics-disabled        no --enable-metrics: /metrics 404, no metric meta fields    none (metrics cross-check
                                                                                    skipped)
auth-required           --api-key set: every endpoint but health/ready/metrics      none with --api-key-file;
                        needs Authorization: Bearer; /server_info shows the key     server.ready without it
no-plugin               (combinable) no attestation file written, no plugin log     spec.lm_head_shared falls
                        lines                                                       back to weights_checker
======================  ==========================================================  ==========================

Scenarios combine (``--scenario backend-auto,no-plugin``) by applying each one's overrides on top of
``healthy``; two scenarios that set the same setting to different values are refused.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from validator.errors import UsageError

MODEL_PATH = "/models/Ling-3.0-flash-fp4"
SERVED_MODEL_NAME = MODEL_PATH
TARGET_CLASS = "BailingMoeV3ForCausalLM"
DRAFT_CLASS = "BailingMoeForCausalLMNextN"
VOCAB = 157184
HIDDEN = 2560
MOE_LAYERS = 41
NUM_LAYERS = 42


@dataclass(frozen=True)
class Scenario:
    """The settings of one simulated deployment; every observable surface is derived from these."""

    name: str = "healthy"
    moe_backend_flag: str = "humming"  # what the launch command asks for
    fp8_env: bool = True  # SGLANG_ENABLE_FP8_LM_HEAD=1 in the server's environment
    build_declares_fp8: bool = True  # the installed SGLang carries the Ling-3.0 patch's variable
    build_shares_module: bool = True  # BailingMoeForCausalLMNextN.set_lm_head_from_target exists
    fp32_head_flag: bool = False  # --enable-fp32-lm-head
    spec: bool = True  # NEXTN 3/1/4 requested
    metrics: bool = True  # --enable-metrics
    auth: bool = False  # --api-key set (the key itself comes from the caller)
    plugin: bool = True  # the spark-validate attestation plugin is installed
    startup_factor: float = 1.0  # multiplies --startup-seconds
    crash_after_ready: bool = False
    flaky_rate: float = 0.0  # share of non-health requests answered 503
    malformed_json: bool = False
    degenerate: bool = False

    # ---- derived state: what the running server really does ----

    @property
    def moe_backend(self) -> str:
        """Resolved: ``auto`` becomes ``flashinfer_mxfp4`` for this checkpoint (the Bailing V3 override)."""
        return "flashinfer_mxfp4" if self.moe_backend_flag == "auto" else self.moe_backend_flag

    @property
    def fp8_head(self) -> bool:
        """The head really is FP8 only when the variable is set and the build declares it."""
        return self.fp8_env and self.build_declares_fp8

    @property
    def head_precision(self) -> str:
        """Which figure of the step-cost table applies: ``fp8``, ``fp32`` (logits) or ``bf16``."""
        if self.fp8_head:
            return "fp8"
        return "fp32" if self.fp32_head_flag else "bf16"

    @property
    def head_dtype(self) -> str:
        return "float8_e4m3fn" if self.fp8_head else "bfloat16"

    @property
    def module_shared(self) -> bool:
        return self.spec and self.build_shares_module

    @property
    def draft_broken(self) -> bool:
        """Weight-only sharing of an FP8 head: the draft reads FP8 codes without scales."""
        return self.spec and self.fp8_head and not self.module_shared


def _o(**kw: Any) -> dict[str, Any]:
    return kw


# name -> (overrides on top of healthy, one-line description)
SCENARIOS: dict[str, tuple[dict[str, Any], str]] = {
    "healthy": (_o(), "all three optimizations, draft shares the target's LM-head module"),
    "draft-head-weight-only": (
        _o(build_shares_module=False),
        "FP8 head + NEXTN on a build that shares only the weight tensor: accept length 1.00",
    ),
    "backend-auto": (_o(moe_backend_flag="auto"), "--moe-runner-backend auto resolves to flashinfer_mxfp4"),
    "fp32-head": (_o(fp8_env=False, fp32_head_flag=True), "baseline FP32-logits head, no FP8 head"),
    "fp8-and-fp32": (
        _o(fp8_env=True, fp32_head_flag=True),
        "FP8 head and --enable-fp32-lm-head both requested",
    ),
    "fp8-ignored": (
        _o(build_declares_fp8=False, build_shares_module=False),
        "FP8 variable set on a stock build that ignores it: BF16 head",
    ),
    "no-spec": (_o(spec=False), "no speculative decoding"),
    "slow-start": (_o(startup_factor=6.0), "start-up phase six times longer"),
    "crash-after-ready": (_o(crash_after_ready=True), "the scheduler dies on the first real /generate"),
    "flaky-5xx": (_o(flaky_rate=0.3), "about 30% of non-health requests answer 503"),
    "malformed-json": (_o(malformed_json=True), "JSON endpoints answer truncated bodies"),
    "degenerate-output": (_o(degenerate=True), "output is runs of token 0 ('!!!!')"),
    "metrics-disabled": (_o(metrics=False), "no --enable-metrics: /metrics is absent"),
    "auth-required": (_o(auth=True), "--api-key set: Bearer token needed (key from --api-key-file)"),
    "no-plugin": (_o(plugin=False), "attestation plugin not installed: no attestation file"),
}


def names() -> list[str]:
    return list(SCENARIOS)


def parse_names(values: list[str] | str) -> list[str]:
    """Split repeated and comma-separated ``--scenario`` values, keeping order and dropping repeats."""
    raw = [values] if isinstance(values, str) else values
    out: list[str] = []
    for value in raw:
        for part in value.split(","):
            name = part.strip()
            if name and name not in out:
                out.append(name)
    return out or ["healthy"]


def resolve(values: list[str] | str) -> Scenario:
    """Combine named scenarios into one; unknown names and contradictory combinations are usage errors."""
    chosen = parse_names(values)
    settings: dict[str, Any] = {}
    setter: dict[str, str] = {}
    for name in chosen:
        if name not in SCENARIOS:
            raise UsageError(f"sim: unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
        for key, value in SCENARIOS[name][0].items():
            if key in settings and settings[key] != value:
                raise UsageError(f"sim: scenarios {setter[key]!r} and {name!r} contradict each other ({key})")
            settings[key] = value
            setter[key] = name
    label = ",".join(n for n in chosen if n != "healthy") or "healthy"
    known = {f.name for f in fields(Scenario)}
    assert set(settings) <= known
    return replace(Scenario(), name=label, **settings)
