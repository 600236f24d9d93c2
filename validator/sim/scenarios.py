"""Named simulator scenarios: one consistent server state per name, shown the same way on every surface.

Everything a client observes is derived from a scenario's few settings in one place (:class:`Scenario`), so
the surfaces cannot disagree. :data:`SCENARIOS` is the table (overrides on ``healthy``, the pack, the verdict
``check`` must reach, the checks that must fail), held by the tests. Scenarios combine
(``backend-auto,no-plugin``); two setting one value differently are refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from validator.errors import UsageError

MODEL_PATH = "/models/Ling-3.0-flash-fp4"
TOKEN_MAP_PATH = "/models/hot-token-map.pt"  # --speculative-token-map (token_map)
HOT_TOKENS = 32768  # the map's size: the draft head's rows after init_lm_head slices it
SERVED_MODEL_NAME = MODEL_PATH
DSPARK_DRAFT_PATH = "/models/Ling-3.0-flash-dspark"
TARGET_CLASS = "BailingMoeV3ForCausalLM"
DRAFT_CLASS = "BailingMoeForCausalLMNextN"
DSPARK_DRAFT_CLASS = "LingDSparkModel"  # srt/models/dspark.py:981 (EntryClass at l.995)
VOCAB = 157184
HIDDEN = 2560
MOE_LAYERS = 41
NUM_LAYERS = 42
# ``--linear-replayssm-cache-len`` default (srt/arg_groups/fields/exec_.py:582-585)
REPLAYSSM_DEFAULT_CACHE_LEN = 16
# Published acceptance lengths (domain.md, recipes.md): NEXTN greedy synthetic 3.90, GSM8K sampled 2.68;
# DSpark with Ling-3.0-flash-dspark 3.5 to 6.4 by workload, macro mean 5.29.
NEXTN_GREEDY_ACCEPT = 3.90
NEXTN_SAMPLED_ACCEPT = 2.68
DSPARK_ACCEPT = 5.29

DEFAULT_PACK = "ling-3.0-flash-dgx-spark"
DSPARK_PACK = "ling-3.0-flash-dgx-spark-dspark"
COOKBOOK_PACK = "sglang-cookbook-dgx-spark"
BASELINE_PACK = "ling-3.0-flash-baseline"


@dataclass(frozen=True)
class Scenario:
    """The settings of one simulated deployment; every observable surface is derived from these."""

    name: str = "healthy"
    moe_backend_flag: str = "humming"  # what the launch command asks for
    fp8_env: bool = True  # SGLANG_ENABLE_FP8_LM_HEAD=1 in the server's environment
    build_declares_fp8: bool = True  # the installed SGLang carries the Ling-3.0 patch's variable
    build_shares_module: bool = True  # BailingMoeForCausalLMNextN.set_lm_head_from_target exists
    fp32_head_flag: bool = False  # --enable-fp32-lm-head
    token_map: bool = False  # --speculative-token-map: init_lm_head gives the draft a sliced copy of the head
    spec: bool = True  # speculative decoding requested
    spec_algorithm: str = "NEXTN"  # as typed: NEXTN (3/1/4) or DSPARK
    dspark_block_size: int = 8  # the DSpark draft checkpoint's block_size (gamma)
    replayssm_spec: bool = False  # --enable-linear-replayssm-spec
    replayssm_cache_len: int | None = None  # --linear-replayssm-cache-len (None: flag absent, default 16)
    drafter_broken: bool = False  # the draft model proposes tokens the target never accepts
    mem_fraction: float = 0.6  # --mem-fraction-static
    metrics: bool = False  # --enable-metrics (off by default, as on a real server)
    auth: bool = False  # --api-key set (the key itself comes from the caller)
    plugin: bool = True  # the spark-validate attestation plugin is installed
    startup_factor: float = 1.0  # multiplies --startup-seconds
    crash_after_ready: bool = False
    flaky_rate: float = 0.0  # share of non-health requests answered 503
    malformed_json: bool = False
    degenerate: bool = False
    # a recipe's own published TPOT at batch 1 (the cookbook cell's 9.48 ms, recipes.md): its verify round
    # then costs that times the mean acceptance, so the simulated cell runs at the speed its pack expects
    published_tpot_ms: float | None = None
    # the scheduler stops completing work (``/health`` 200, requests accepted, no token) once this many
    # requests were accepted after ready, or this many seconds after ready, whichever comes first (None:
    # never); it recovers after ``stall_for_s`` (None: never), and the held requests then complete
    stall_after_requests: int | None = None
    stall_after_s: float | None = None
    stall_for_s: float | None = None

    @property
    def stalls(self) -> bool:
        return self.stall_after_requests is not None or self.stall_after_s is not None

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
    def dspark(self) -> bool:
        return self.spec and self.spec_algorithm == "DSPARK"

    @property
    def resolved_algorithm(self) -> str | None:
        """``/server_info``'s value: NEXTN is a reserved alias of EAGLE (srt/arg_groups/speculative_hook.py
        :81-118); DSPARK stays DSPARK."""
        if not self.spec:
            return None
        return "DSPARK" if self.dspark else "EAGLE"

    @property
    def num_steps(self) -> int:
        """DSpark forces ``speculative_num_steps`` to 1 (speculative_hook.py:757-772)."""
        return 1 if self.dspark else 3

    @property
    def num_draft_tokens(self) -> int:
        """The verify width: NEXTN 4 (3 drafts + bonus); DSpark gamma + 1, gamma being the draft's block size
        (speculative_hook.py:806-833, dspark_config.py:130-134)."""
        return self.dspark_block_size + 1 if self.dspark else 4

    @property
    def drafts_per_verify(self) -> int:
        """K = ``speculative_num_draft_tokens - 1``: what ``spec_num_proposed_drafts`` counts per verify."""
        return self.num_draft_tokens - 1

    @property
    def graphs(self) -> dict[str, tuple[float, float]]:
        """The CUDA graphs captured at start-up, by SGLang's phase key: (seconds, GB). The DSpark draft
        runner is a draft worker: its graph counts as ``draft_decode``."""
        if not self.spec:
            return {"decode": (21.37, 1.21)}
        if self.dspark:
            return {"target_verify": (21.37, 1.21), "draft_decode": (3.91, 0.44)}
        return {"target_verify": (21.37, 1.21), "draft_decode": (6.02, 0.31), "draft_extend": (4.87, 0.22)}

    @property
    def draft_path(self) -> str:
        return DSPARK_DRAFT_PATH if self.dspark else MODEL_PATH

    @property
    def draft_class(self) -> str:
        return DSPARK_DRAFT_CLASS if self.dspark else DRAFT_CLASS

    @property
    def ring_len(self) -> int:
        return REPLAYSSM_DEFAULT_CACHE_LEN if self.replayssm_cache_len is None else self.replayssm_cache_len

    @property
    def ring_error(self) -> str | None:
        """The ValueError ``srt/mem_cache/memory_pool.py:818-832`` raises at KV pool allocation, after the
        weights have loaded, for a KDA model with ReplaySSM spec on: the server logs it and exits."""
        if not (self.spec and self.replayssm_spec):
            return None
        length, width = self.ring_len, self.num_draft_tokens
        if length & (length - 1) != 0:
            return f"spec-verify ring length must be a power of two, got {length}"
        if length < 2 * width:
            return f"spec-verify ring too small: {length} < 2 * {width} (early-flush margin)"
        return None

    @property
    def module_shared(self) -> bool:
        """NEXTN shares the module only through ``set_lm_head_from_target``; the DSpark worker always
        attaches the target's module (``attach_shared_modules``, dspark_worker_v2.py:307-324)."""
        if not self.spec:
            return False
        return True if self.dspark else self.build_shares_module and not self.token_map

    @property
    def draft_broken(self) -> bool:
        """Weight-only sharing of an FP8 head (the draft reads FP8 codes without scales), or a drafter
        whose proposals are garbage for any other reason."""
        return self.spec and (self.drafter_broken or (self.fp8_head and not self.module_shared))

    def accept_mean(self, temperature: float) -> float:
        """The mean acceptance length per verify round (accepted drafts + the bonus token)."""
        if self.draft_broken:
            return 1.0
        if self.dspark:
            return DSPARK_ACCEPT
        return NEXTN_GREEDY_ACCEPT if temperature <= 0.0 else NEXTN_SAMPLED_ACCEPT


@dataclass(frozen=True)
class Entry:
    """One row of the scenario table: what to set, what it is, and what ``check`` must conclude against
    ``pack`` (``verdict``, ``None`` where retries decide; ``fails``, the IDs that must fail)."""

    overrides: dict[str, Any]
    text: str
    pack: str = DEFAULT_PACK
    verdict: str | None = "fail"
    fails: frozenset[str] = frozenset()


def _e(text: str, *, pack: str = DEFAULT_PACK, verdict: str | None = "fail", fails: tuple[str, ...] = (),
       **overrides: Any) -> Entry:  # fmt: skip
    return Entry(overrides, text, pack, verdict, frozenset(fails))


_DSPARK: dict[str, Any] = {
    "spec_algorithm": "DSPARK",
    "replayssm_spec": True,
    "replayssm_cache_len": 32,
    "mem_fraction": 0.68,
}


def _dspark(text: str, *, pack: str = DSPARK_PACK, **settings: Any) -> Entry:
    """A row on a DSPARK recipe: the DSPARK launch (``_DSPARK``) with the row's own settings over it."""
    return _e(text, pack=pack, **{**_DSPARK, **settings})


SCENARIOS: dict[str, Entry] = {
    "healthy": _e("all three optimizations, draft shares the target's LM-head module", verdict="pass"),
    "draft-head-weight-only": _e(
        "FP8 head + NEXTN on a build that shares only the weight tensor: accept length 1.00",
        fails=("spec.lm_head_shared", "spec.accept_length"),
        build_shares_module=False,
    ),
    "token-map": _e(
        "FP8 head + NEXTN with --speculative-token-map: the draft gets a sliced copy of the head",
        fails=("spec.lm_head_shared", "spec.accept_length"),
        token_map=True,
    ),
    "backend-auto": _e(
        "--moe-runner-backend auto resolves to flashinfer_mxfp4",
        fails=("moe.backend",),
        moe_backend_flag="auto",
    ),
    "fp32-head": _e(
        "baseline FP32-logits head, no FP8 head", fails=("lm_head.fp8",), fp8_env=False, fp32_head_flag=True
    ),
    "fp8-and-fp32": _e(
        "FP8 head and --enable-fp32-lm-head both requested",
        fails=("lm_head.exclusive",),
        fp8_env=True,
        fp32_head_flag=True,
    ),
    "fp8-ignored": _e(
        "FP8 variable set on a stock build that ignores it: BF16 head",
        fails=("lm_head.fp8",),
        build_declares_fp8=False,
        build_shares_module=False,
    ),
    "no-spec": _e("no speculative decoding", fails=("spec.config", "spec.accept_length"), spec=False),
    "slow-start": _e("start-up phase six times longer", verdict="pass", startup_factor=6.0),
    "crash-after-ready": _e(
        "the scheduler dies on the first real /generate (with --log: server.log fails on the crash)",
        fails=("server.log",),
        crash_after_ready=True,
    ),
    "flaky-5xx": _e("about 30% of non-health requests answer 503", verdict=None, flaky_rate=0.3),
    "malformed-json": _e(
        "JSON endpoints answer truncated bodies", verdict="inconclusive", malformed_json=True
    ),
    "degenerate-output": _e("output is runs of token 0 ('!!!!')", fails=("probe.output",), degenerate=True),
    "metrics-disabled": _e(
        "no --enable-metrics (the default; the name is kept for old scripts): /metrics answers 404",
        verdict="pass",
        metrics=False,
    ),
    "auth-required": _e(
        "--api-key set: Bearer token needed (key from --api-key-file)", verdict="pass", auth=True
    ),
    "stall": _e(
        "the scheduler stalls at the first request: /health 200, requests accepted, no token ever",
        fails=("server.progress",),
        stall_after_requests=0,
    ),
    "stall-then-recover": _e(
        "the scheduler stalls at the first request and completes the held requests 20 s later",
        verdict=None,
        stall_after_requests=0,
        stall_for_s=20.0,
    ),
    "no-plugin": _e("attestation plugin not installed: no attestation file", verdict=None, plugin=False),
    # ---- the other recipes: each shipped pack has a healthy simulator ----
    "dspark": _dspark(
        "Humming + FP8 head + DSPARK (Ling-3.0-flash-dspark, block 8), ReplaySSM ring 32: accept ~5.29",
        verdict="pass",
    ),
    "dspark-broken-drafter": _dspark(
        "DSPARK whose drafter proposes garbage: accept length ~1.0 (K = 8 drafts per verify)",
        fails=("spec.accept_length",),
        drafter_broken=True,
    ),
    "dspark-ring-16": _dspark(
        "DSPARK with the default --linear-replayssm-cache-len 16: the server logs SGLang's ring error after "
        "weight load and exits (check ends the wait on that line and judges the logged start)",
        verdict="fail",
        fails=("spec.dspark",),
        replayssm_cache_len=16,
        startup_factor=10.0,  # the error comes after the weights have loaded: on a Spark, minutes in
    ),
    "dspark-no-replayssm": _dspark(
        "DSPARK without --enable-linear-replayssm-spec (and so no ring length): serves, but not the recipe",
        fails=("spec.dspark",),
        replayssm_spec=False,
        replayssm_cache_len=None,
    ),
    "cookbook": _dspark(
        "SGLang cookbook DGX Spark cell: flashinfer_mxfp4 MoE, BF16 head, DSPARK",
        pack=COOKBOOK_PACK,
        verdict="pass",
        moe_backend_flag="flashinfer_mxfp4",
        fp8_env=False,
        published_tpot_ms=9.48,
    ),
    "baseline": _e(
        "the unoptimized baseline: flashinfer_mxfp4 MoE, FP32 head, no speculation",
        pack=BASELINE_PACK,
        verdict="pass",
        moe_backend_flag="flashinfer_mxfp4",
        fp8_env=False,
        fp32_head_flag=True,
        spec=False,
        mem_fraction=0.68,
    ),
}


def parse_names(values: list[str] | str) -> list[str]:
    """Split repeated and comma-separated ``--scenario`` values, keeping order and dropping repeats."""
    raw = [values] if isinstance(values, str) else values
    # a dict keeps the order and finds a repeat at once: discovery parses the argv of every simulator-like
    # process, any local user's, so a hostile one may name thousands
    out = dict.fromkeys(name for value in raw for part in value.split(",") if (name := part.strip()))
    return list(out) or ["healthy"]


def resolve(values: list[str] | str) -> Scenario:
    """Combine named scenarios into one; unknown names and contradictory combinations are usage errors."""
    chosen = parse_names(values)
    settings: dict[str, Any] = {}
    setter: dict[str, str] = {}
    for name in chosen:
        if name not in SCENARIOS:
            raise UsageError(f"sim: unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
        for key, value in SCENARIOS[name].overrides.items():
            if key in settings and settings[key] != value:
                raise UsageError(f"sim: scenarios {setter[key]!r} and {name!r} contradict each other ({key})")
            settings[key] = value
            setter[key] = name
    label = ",".join(n for n in chosen if n != "healthy") or "healthy"
    return replace(Scenario(), name=label, **settings)
