"""The rule pack's schema: the records a pack's YAML is validated into (frozen dataclasses read by
``validator.schema``). Records only: filling a pack's templates and resolving ``value_from`` are
``validator.pack_templates``' job, applying waivers the engine's.

Apart from the loader (``validator.rulepack``) so that the check API (``validator.checks.base``) can name
a check's spec and expectations without importing the loader, which needs the registry of builtin checks
to lint a pack.
"""

# No ``from __future__ import annotations`` here: ``schema`` reads these annotations with
# ``typing.get_type_hints`` to load or dump the pack; as strings, each would be compiled then (about 2 ms
# of every preflight for pack_schema and report together, against 0.5 ms for annotations made at import).

import datetime as _dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from validator.facts import Mode
from validator.report import Severity
from validator.schema import Ge, Gt, Le, Lt, MinLen, Pattern, Problem

# Records of the pack (frozen dataclasses): validator.schema.load refuses unknown keys and values of the
# wrong type, collecting every problem with its location.

# Every value below comes from the pack: there are no Python defaults to inherit. A section or value a
# listed builtin check needs (``needs=`` where it registers) must be given, else the pack is rejected
# naming it; a pack for a recipe without speculation simply leaves ``speculative`` out.


@dataclass(frozen=True, kw_only=True)
class SpeculativeExpect:
    algorithm: str  # as written on the command line
    resolved_algorithm: str  # as SGLang reports it once resolved
    num_steps: Annotated[int, Ge(1)]
    eagle_topk: Annotated[int, Ge(1)]
    num_draft_tokens: Annotated[int, Ge(2)]
    require_draft_model_path: bool


@dataclass(frozen=True, kw_only=True)
class CheckpointExpect:
    architecture: str
    draft_architecture: str
    lm_head_shape: tuple[int, int]
    lm_head_dtype: str  # safetensors dtype of the stored head
    min_nextn_layers: Annotated[int, Ge(0)]
    routed_experts: str


@dataclass(frozen=True, kw_only=True)
class HostExpect:
    max_mem_fraction_static: Annotated[float, Gt(0), Le(1)]
    memory_bandwidth_gbps: Annotated[float, Gt(0)]  # measured effective


@dataclass(frozen=True, kw_only=True)
class DSparkExpect:
    """The DSpark draft the recipe runs (``--speculative-algorithm DSPARK``)."""

    block_size: Annotated[int, Ge(1)]  # gamma: drafted tokens per verify round (the draft's config.json)
    draft_architectures: Annotated[tuple[str, ...], MinLen(1)]  # the draft classes the recipe accepts
    replayssm_spec: bool  # --enable-linear-replayssm-spec (the KDA spec-verify ring) is part of the recipe


@dataclass(frozen=True, kw_only=True)
class StartupExpect:
    """What a start of this recipe needs from the host and its supervisor."""

    min_mem_available_gib: Annotated[float, Gt(0)]  # MemAvailable below this before start can wedge GB10
    cold_start_s: Annotated[float, Gt(0)]  # weight load plus graph capture, to healthy


@dataclass(frozen=True, kw_only=True)
class RecipeSpec:
    """What ``--rules auto`` recognises the recipe by (``validator/recipe_match.py``): the model first
    (a deployment of another model follows none of this pack's recipe, whatever its flags), then the
    three settings that tell the recipes for one model apart."""

    # the target model's Hugging Face ``architectures`` (``/model_info``, config.json) and ``model_type``
    architectures: Annotated[tuple[str, ...], MinLen(1)]
    model_types: Annotated[tuple[str, ...], MinLen(1)]
    speculative: str  # NEXTN | DSPARK | none, as written on the command line
    moe_runner_backend: str
    lm_head: Literal["fp8", "bf16", "fp32"]


@dataclass(frozen=True, kw_only=True)
class ModelBytes:
    """Bytes read per decode step, for the TPOT floor."""

    active_params: Annotated[float, Gt(0)]
    bytes_per_active_param: Annotated[float, Gt(0)]
    lm_head_params: Annotated[float, Gt(0)]
    verify_cost_steps: Annotated[float, Gt(0)]  # one verify forward, in plain decode steps
    tpot_slack: Annotated[float, Gt(1)]  # warn when measured TPOT exceeds floor x slack


@dataclass(frozen=True, kw_only=True)
class Expectations:
    sglang_version: str | None = None
    moe_runner_backend: str | None = None
    moe_auto_backend: str | None = None  # what SGLang's 'auto' silently picks for this checkpoint (messages)
    lm_head_dtype: str | None = None  # the head's torch dtype in effect
    fp8_lm_head_env: str | None = None  # the variable that turns the online FP8 head on
    # --tool-call-parser values that parse the model's tool calls; the first names its own detector
    tool_call_parsers: tuple[str, ...] | None = None
    speculative: SpeculativeExpect | None = None
    dspark: DSparkExpect | None = None
    accept_length_min: Annotated[float | None, Ge(1.0)] = None
    checkpoint: CheckpointExpect | None = None
    host: HostExpect | None = None
    model_bytes: ModelBytes | None = None
    startup: StartupExpect | None = None
    require_attestation: bool = False  # policy switch: demand the in-process plugin's evidence


@dataclass(frozen=True, kw_only=True)
class ProbeSettings:
    prompts: str  # relative to the pack's directory
    max_new_tokens: Annotated[int, Ge(8), Le(4096)]
    max_total_tokens: Annotated[int, Ge(16)]
    max_seconds: Annotated[float, Gt(0)]
    confidence: Annotated[float, Gt(0.5), Lt(1)]


Operator = Literal[
    "==", "!=", "<", "<=", ">", ">=", "in", "not in", "exists", "absent", "matches", "not matches"
]


@dataclass(frozen=True, kw_only=True)
class Expect:
    """A declarative check over one fact: ``fact <op> value``; ``value_from`` names an expectation of the
    pack instead (``host.max_mem_fraction_static``), so a limit is written once."""

    fact: Annotated[str, MinLen(1)]
    op: Operator
    value: Any = None
    value_from: str | None = None
    when_missing: Literal["skip", "error", "fail", "pass"] = "skip"

    def __check__(self) -> Iterator[Problem]:
        if self.value is not None and self.value_from is not None:
            yield (), "Value error, give 'value' or 'value_from', not both"
        if self.op not in ("exists", "absent") and self.value is None and self.value_from is None:
            yield (), f"Value error, operator {self.op!r} needs a value"


@dataclass(frozen=True, kw_only=True)
class CheckSpec:
    id: Annotated[str, Pattern(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")]
    title: str
    severity: Severity
    modes: tuple[Mode, ...] = ("preflight", "check")
    why: str
    remedy: str  # shown when the check fails or warns and names no variant
    remedies: dict[str, str] = field(default_factory=dict)  # named variants a builtin check chooses from
    expect: Expect | None = None  # declarative check; builtin checks leave it out
    # the hardware whose figures the check holds (GB10's memory limits): on a host known to be another
    # one the check does not apply there (skip), instead of judging it by the wrong machine's numbers
    platform: Literal["dgx_spark"] | None = None
    pass_message: str | None = None
    fail_message: str | None = None


@dataclass(frozen=True, kw_only=True)
class WaiverSpec:
    check: str
    justification: Annotated[str, MinLen(10)]
    expires: _dt.date  # the last day it applies


@dataclass(frozen=True, kw_only=True)
class Metadata:
    name: Annotated[str, Pattern(r"^[a-z0-9][a-z0-9.\-]*$")]
    version: Annotated[int, Ge(1)]
    description: str
    model: str
    sglang: str
    hardware: str


@dataclass(frozen=True, kw_only=True)
class RulePack:
    apiVersion: Literal["spark-validate/v1"]
    kind: Literal["RulePack"]
    metadata: Metadata
    recipe: RecipeSpec | None = None  # --rules auto picks this pack for deployments that follow it
    # empty: whatever the listed checks need is then reported
    expect: Expectations = field(default_factory=Expectations)
    probe: ProbeSettings | None = None  # needed by the checks that read the acceptance probe
    checks: Annotated[tuple[CheckSpec, ...], MinLen(1)]
    waivers: tuple[WaiverSpec, ...] = ()
    secrets: tuple[str, ...] = ()  # extra key names to redact from every output

    def __check__(self) -> Iterator[Problem]:
        seen: set[str] = set()
        for c in self.checks:
            if c.id in seen:
                yield ("checks",), f"Value error, duplicate check id {c.id!r}"
            seen.add(c.id)
        for w in self.waivers:
            if w.check not in seen:
                yield (), f"Value error, waiver names unknown check {w.check!r}"
