"""The rule pack's schema: the records a pack's YAML is validated into (frozen dataclasses, validated by
pydantic through ``validator.validation``). Records only: filling a pack's templates and resolving
``value_from`` are ``validator.pack_templates``' job, applying waivers the engine's.

Apart from the loader (``validator.rulepack``) so that the check API (``validator.checks.base``) can name
a check's spec and expectations without importing the loader, which needs the registry of builtin checks
to lint a pack.
"""

import datetime as _dt
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, ValidationInfo
from pydantic_core import PydanticCustomError

from validator.facts import Mode
from validator.report import Severity

# Every value below comes from the pack: there are no Python defaults to inherit. A section or value a
# listed builtin check needs (``needs=`` where it registers) must be given, else the pack is rejected
# naming it; a pack for a recipe without speculation simply leaves ``speculative`` out.


class _Record:
    """Unknown keys are refused; scalars are lax where YAML needs it (``"3"`` is 3, ``"yes"`` true)."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")


def _int(value: object) -> object:
    """YAML's ``yes`` is not a step count; a string must be an integer's digits ("3", never "3.0")."""
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            msg = "Input should be a valid integer, unable to parse string as an integer"
            raise PydanticCustomError("int_parsing", msg) from None
    return value


def _not(kind: str, message: str, refused: type) -> BeforeValidator:
    def check(value: object) -> object:
        if isinstance(value, refused):
            raise PydanticCustomError(kind, message)
        return value

    return BeforeValidator(check)


def _date(value: object) -> object:
    """An ISO date, as YAML reads it or as a string; never a number (pydantic would read a timestamp)."""
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    elif isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value
    raise PydanticCustomError("date_type", "Input should be a valid date in the format YYYY-MM-DD")


# pydantic's lax scalars, less what it would guess: a bool is not a number, nor 1.0 a switch
Int = Annotated[int, BeforeValidator(_int)]
Float = Annotated[float, _not("float_type", "Input should be a valid number", bool)]
Bool = Annotated[bool, _not("bool_type", "Input should be a valid boolean", float)]
Date = Annotated[_dt.date, BeforeValidator(_date)]


@dataclass(frozen=True, kw_only=True)
class SpeculativeExpect(_Record):
    algorithm: str  # as written on the command line
    resolved_algorithm: str  # as SGLang reports it once resolved
    num_steps: Annotated[Int, Field(ge=1)]
    eagle_topk: Annotated[Int, Field(ge=1)]
    num_draft_tokens: Annotated[Int, Field(ge=2)]
    require_draft_model_path: Bool


@dataclass(frozen=True, kw_only=True)
class CheckpointExpect(_Record):
    architecture: str
    draft_architecture: str
    lm_head_shape: tuple[Int, Int]
    lm_head_dtype: str  # safetensors dtype of the stored head
    min_nextn_layers: Annotated[Int, Field(ge=0)]
    routed_experts: str


@dataclass(frozen=True, kw_only=True)
class HostExpect(_Record):
    max_mem_fraction_static: Annotated[Float, Field(gt=0, le=1)]
    memory_bandwidth_gbps: Annotated[Float, Field(gt=0)]  # measured effective


@dataclass(frozen=True, kw_only=True)
class DSparkExpect(_Record):
    """The DSpark draft the recipe runs (``--speculative-algorithm DSPARK``)."""

    # gamma: drafted tokens per verify round (the draft's config.json)
    block_size: Annotated[Int, Field(ge=1)]
    # the draft classes the recipe accepts
    draft_architectures: Annotated[tuple[str, ...], Field(min_length=1)]
    replayssm_spec: Bool  # --enable-linear-replayssm-spec (the KDA spec-verify ring) is part of the recipe


@dataclass(frozen=True, kw_only=True)
class StartupExpect(_Record):
    """What a start of this recipe needs from the host and its supervisor."""

    # MemAvailable below this before start can wedge GB10
    min_mem_available_gib: Annotated[Float, Field(gt=0)]
    cold_start_s: Annotated[Float, Field(gt=0)]  # weight load plus graph capture, to healthy


@dataclass(frozen=True, kw_only=True)
class RecipeSpec(_Record):
    """What ``--rules auto`` recognises the recipe by (``validator/recipe_match.py``): the model first
    (a deployment of another model follows none of this pack's recipe, whatever its flags), then the
    three settings that tell the recipes for one model apart."""

    # the target model's Hugging Face ``architectures`` (``/model_info``, config.json) and ``model_type``
    architectures: Annotated[tuple[str, ...], Field(min_length=1)]
    model_types: Annotated[tuple[str, ...], Field(min_length=1)]
    speculative: str  # NEXTN | DSPARK | none, as written on the command line
    moe_runner_backend: str
    lm_head: Literal["fp8", "bf16", "fp32"]


@dataclass(frozen=True, kw_only=True)
class ModelBytes(_Record):
    """Bytes read per decode step, for the TPOT floor."""

    active_params: Annotated[Float, Field(gt=0)]
    bytes_per_active_param: Annotated[Float, Field(gt=0)]
    lm_head_params: Annotated[Float, Field(gt=0)]
    verify_cost_steps: Annotated[Float, Field(gt=0)]  # one verify forward, in plain decode steps
    tpot_slack: Annotated[Float, Field(gt=1)]  # warn when measured TPOT exceeds floor x slack


@dataclass(frozen=True, kw_only=True)
class Expectations(_Record):
    sglang_version: str | None = None
    moe_runner_backend: str | None = None
    moe_auto_backend: str | None = None  # what SGLang's 'auto' silently picks for this checkpoint (messages)
    lm_head_dtype: str | None = None  # the head's torch dtype in effect
    fp8_lm_head_env: str | None = None  # the variable that turns the online FP8 head on
    # --tool-call-parser values that parse the model's tool calls; the first names its own detector
    tool_call_parsers: tuple[str, ...] | None = None
    speculative: SpeculativeExpect | None = None
    dspark: DSparkExpect | None = None
    accept_length_min: Annotated[Float | None, Field(ge=1.0)] = None
    checkpoint: CheckpointExpect | None = None
    host: HostExpect | None = None
    model_bytes: ModelBytes | None = None
    startup: StartupExpect | None = None
    require_attestation: Bool = False  # policy switch: demand the in-process plugin's evidence


@dataclass(frozen=True, kw_only=True)
class ProbeSettings(_Record):
    prompts: str  # relative to the pack's directory
    max_new_tokens: Annotated[Int, Field(ge=8, le=4096)]
    max_total_tokens: Annotated[Int, Field(ge=16)]
    max_seconds: Annotated[Float, Field(gt=0)]
    confidence: Annotated[Float, Field(gt=0.5, lt=1)]


Operator = Literal[
    "==", "!=", "<", "<=", ">", ">=", "in", "not in", "exists", "absent", "matches", "not matches"
]


@dataclass(frozen=True, kw_only=True)
class Expect(_Record):
    """A declarative check over one fact: ``fact <op> value``; ``value_from`` names an expectation of the
    pack instead (``host.max_mem_fraction_static``), so a limit is written once."""

    fact: Annotated[str, Field(min_length=1)]
    op: Operator
    value: Any = None
    value_from: str | None = None
    when_missing: Literal["skip", "error", "fail", "pass"] = "skip"

    def __post_init__(self) -> None:
        if self.value is not None and self.value_from is not None:
            raise ValueError("give 'value' or 'value_from', not both")
        if self.op not in ("exists", "absent") and self.value is None and self.value_from is None:
            raise ValueError(f"operator {self.op!r} needs a value")


@dataclass(frozen=True, kw_only=True)
class CheckSpec(_Record):
    id: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")]
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
class WaiverSpec(_Record):
    check: str
    justification: Annotated[str, Field(min_length=10)]
    expires: Date  # the last day it applies


@dataclass(frozen=True, kw_only=True)
class Metadata(_Record):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")]
    version: Annotated[Int, Field(ge=1)]
    description: str
    model: str
    sglang: str
    hardware: str


def _unique_ids(checks: tuple[CheckSpec, ...]) -> tuple[CheckSpec, ...]:
    ids = [c.id for c in checks]
    twice = dict.fromkeys(i for n, i in enumerate(ids) if i in ids[:n])
    if twice:
        raise ValueError("; ".join(f"duplicate check id {i!r}" for i in twice))
    return checks


def _known_checks(waivers: tuple[WaiverSpec, ...], info: ValidationInfo) -> tuple[WaiverSpec, ...]:
    """Judged once ``checks`` is valid: pydantic validates the fields in order and passes the valid ones."""
    if "checks" in info.data:
        ids = {c.id for c in info.data["checks"]}
        if unknown := [w.check for w in waivers if w.check not in ids]:
            raise ValueError("; ".join(f"waiver names unknown check {c!r}" for c in unknown))
    return waivers


@dataclass(frozen=True, kw_only=True)
class RulePack(_Record):
    apiVersion: Literal["spark-validate/v1"]
    kind: Literal["RulePack"]
    metadata: Metadata
    recipe: RecipeSpec | None = None  # --rules auto picks this pack for deployments that follow it
    # empty: whatever the listed checks need is then reported
    expect: Expectations = field(default_factory=Expectations)
    probe: ProbeSettings | None = None  # needed by the checks that read the acceptance probe
    checks: Annotated[tuple[CheckSpec, ...], Field(min_length=1), AfterValidator(_unique_ids)]
    waivers: Annotated[tuple[WaiverSpec, ...], AfterValidator(_known_checks)] = ()
    secrets: tuple[str, ...] = ()  # extra key names to redact from every output
