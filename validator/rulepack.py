"""Rule packs: the expectations and checks of one deployment recipe, as data a user can copy and edit.

A pack is a YAML file (kube-bench style): what the recipe expects (backend, head dtype, speculative
settings, acceptance threshold, checkpoint shape, host limits), which checks run with which severity,
why each matters and how to fix it, and waivers. The check logic lives in ``validator/checks``; a pack
can also declare simple ``expect`` checks over any fact (``launch.args.mem_fraction_static <= 0.68``)
without touching Python.

Loading validates the whole file with pydantic and maps every error back to a line of the YAML, so
``rules lint`` can say ``pack.yaml:42: checks[3].severity: Input should be 'critical', 'warning' or
'info'``.
"""

from __future__ import annotations

import datetime as _dt
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from validator.errors import InputError
from validator.report import Severity

DEFAULT_PACK = "ling-3.0-flash-dgx-spark"
PACK_API_VERSION = "spark-validate/v1"
Mode = Literal["preflight", "check"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpeculativeExpect(_Strict):
    algorithm: str = "NEXTN"  # as written on the command line
    resolved_algorithm: str = "EAGLE"  # as SGLang reports it once resolved
    num_steps: int = Field(3, ge=1)
    eagle_topk: int = Field(1, ge=1)
    num_draft_tokens: int = Field(4, ge=2)
    require_draft_model_path: bool = True


class CheckpointExpect(_Strict):
    architecture: str = "BailingMoeV3ForCausalLM"
    draft_architecture: str = "BailingMoeForCausalLMNextN"
    lm_head_shape: tuple[int, int] = (157184, 2560)
    lm_head_dtype: str = "BF16"  # safetensors dtype of the stored head
    min_nextn_layers: int = Field(1, ge=0)
    routed_experts: str = "mxfp4"


class HostExpect(_Strict):
    max_mem_fraction_static: float = Field(0.68, gt=0, le=1)
    memory_bandwidth_gbps: float = Field(216.0, gt=0)  # measured effective on GB10


class ModelBytes(_Strict):
    """Bytes read per decode step, for the TPOT floor (domain.md)."""

    active_params: float = Field(5.1e9, gt=0)
    bytes_per_active_param: float = Field(0.75, gt=0)  # W4A8: MXFP4 experts + FP8 linear layers
    lm_head_params: float = Field(157184 * 2560, gt=0)
    tpot_slack: float = Field(3.0, gt=1)  # warn when measured TPOT exceeds floor x slack


class Expectations(_Strict):
    sglang_version: str = "0.5.23"
    model_architecture: str = "BailingMoeV3ForCausalLM"
    moe_runner_backend: str = "humming"
    lm_head_dtype: str = "float8_e4m3fn"
    lm_head_quant_method: str = "Fp8LinearMethod"
    fp8_lm_head_env: str = "SGLANG_ENABLE_FP8_LM_HEAD"
    speculative: SpeculativeExpect = SpeculativeExpect()
    accept_length_min: float = Field(1.5, ge=1.0)
    checkpoint: CheckpointExpect = CheckpointExpect()
    host: HostExpect = HostExpect()
    model_bytes: ModelBytes = ModelBytes()
    require_attestation: bool = False  # demand the in-process plugin's evidence


class ProbeSettings(_Strict):
    prompts: str = "probe-prompts.yaml"  # relative to the pack's directory
    max_new_tokens: int = Field(64, ge=8, le=4096)
    max_total_tokens: int = Field(512, ge=16)
    max_seconds: float = Field(60.0, gt=0)
    confidence: float = Field(0.99, gt=0.5, lt=1)


Operator = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not in", "exists", "absent", "matches"]


class Expect(_Strict):
    """A declarative check over one fact: ``fact <op> value``."""

    fact: str = Field(min_length=1)
    op: Operator
    value: Any = None
    when_missing: Literal["skip", "error", "fail", "pass"] = "skip"

    @model_validator(mode="after")
    def _value_needed(self) -> Expect:
        if self.op not in ("exists", "absent") and self.value is None:
            raise ValueError(f"operator {self.op!r} needs a value")
        return self


class CheckSpec(_Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
    title: str
    severity: Severity
    modes: tuple[Mode, ...] = ("preflight", "check")
    why: str
    remedy: str
    expect: Expect | None = None  # declarative check; builtin checks leave it out
    pass_message: str | None = None
    fail_message: str | None = None


class WaiverSpec(_Strict):
    check: str
    justification: str = Field(min_length=10)
    expires: _dt.date

    def active(self, today: _dt.date | None = None) -> bool:
        return (today or _dt.date.today()) <= self.expires


class Metadata(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    version: int = Field(ge=1)
    description: str
    model: str
    sglang: str
    hardware: str


class RulePack(_Strict):
    apiVersion: Literal["spark-validate/v1"]
    kind: Literal["RulePack"]
    metadata: Metadata
    expect: Expectations = Expectations()
    probe: ProbeSettings = ProbeSettings()
    checks: tuple[CheckSpec, ...] = Field(min_length=1)
    waivers: tuple[WaiverSpec, ...] = ()
    secrets: tuple[str, ...] = ()  # extra key names to redact from every output

    @field_validator("checks")
    @classmethod
    def _unique_ids(cls, checks: tuple[CheckSpec, ...]) -> tuple[CheckSpec, ...]:
        seen: set[str] = set()
        for c in checks:
            if c.id in seen:
                raise ValueError(f"duplicate check id {c.id!r}")
            seen.add(c.id)
        return checks

    @model_validator(mode="after")
    def _waivers_name_checks(self) -> RulePack:
        ids = {c.id for c in self.checks}
        for w in self.waivers:
            if w.check not in ids:
                raise ValueError(f"waiver names unknown check {w.check!r}")
        return self

    def check(self, check_id: str) -> CheckSpec:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(check_id)

    def waiver_for(self, check_id: str, today: _dt.date | None = None) -> WaiverSpec | None:
        for w in self.waivers:
            if w.check == check_id and w.active(today):
                return w
        return None


class LoadedPack:
    """A validated pack and where it came from (its directory resolves relative data files)."""

    def __init__(self, pack: RulePack, path: Path) -> None:
        self.pack = pack
        self.path = path

    @property
    def name(self) -> str:
        return self.pack.metadata.name

    def data_file(self, relative: str) -> Path:
        return (self.path.parent / relative).resolve()


def builtin_packs_dir() -> Path:
    """The built-in packs: ``rules/`` at the project root, reached through the ``validator/data/rules``
    link in a checkout and copied into the package when a wheel is built."""
    return Path(__file__).resolve().parent / "data" / "rules"


def list_builtin_packs() -> list[Path]:
    return sorted(p for p in builtin_packs_dir().glob("*.yaml") if _looks_like_pack(p))


def _looks_like_pack(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8")[:512]
    except OSError:
        return False
    return "kind: RulePack" in head


def resolve_pack_path(name_or_path: str | None) -> Path:
    """``--rules NAME|PATH``: a path when it names a file, else a built-in pack's name."""
    ref = name_or_path or DEFAULT_PACK
    candidate = Path(ref)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists() or "/" in ref:
        if not candidate.is_file():
            raise InputError(ref, "rule pack file not found")
        return candidate
    builtin = builtin_packs_dir() / f"{ref}.yaml"
    if not builtin.is_file():
        names = ", ".join(p.stem for p in list_builtin_packs()) or "none"
        raise InputError(ref, f"no built-in rule pack of that name (built-in: {names})")
    return builtin


def load_pack(name_or_path: str | None = None) -> LoadedPack:
    path = resolve_pack_path(name_or_path)
    return _load_pack_cached(path.resolve())


@lru_cache(maxsize=8)
def _load_pack_cached(path: Path) -> LoadedPack:
    return LoadedPack(parse_pack(path), path)


def parse_pack(path: Path) -> RulePack:
    """Parse and validate one pack file; every problem is an InputError with file and line."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read rule pack: {exc}") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 10x faster
    try:
        data = yaml.load(text, Loader=loader)  # a safe loader (CSafeLoader or SafeLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
        raise InputError(str(path), f"invalid YAML: {exc.problem}", line) from None
    except yaml.YAMLError as exc:
        raise InputError(str(path), f"invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(str(path), "a rule pack must be a YAML mapping", 1)
    try:
        return RulePack.model_validate(data)
    except ValidationError as exc:
        node = yaml.compose(text, Loader=loader)  # positions, only needed to report an error
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        where = _format_loc(loc) or "pack"
        line = _line_of(node, loc)
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InputError(str(path), f"{where}: {err['msg']}{more}", line) from None


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not str(part).startswith(("function-", "tagged-union")):
            out += ("." if out else "") + str(part)
    return out


def _line_of(node: Any, loc: tuple[Any, ...]) -> int | None:
    """Walk the composed YAML node tree along a pydantic error location to the nearest line."""
    import yaml

    if node is None:
        return None
    best: int = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for key, value in node.value:
                if key.value == part:
                    nxt = value
                    best = key.start_mark.line + 1
                    break
            if nxt is None:
                return best
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return best
            node = node.value[part]
            best = node.start_mark.line + 1
        else:
            return best
    return node.start_mark.line + 1 if node is not None else best
