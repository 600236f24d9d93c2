"""Rule packs: the expectations and checks of one deployment recipe, as data a user can copy and edit.

A pack is a YAML file (kube-bench style): what the recipe expects (backend, head dtype, speculative
settings, acceptance threshold, checkpoint shape, host limits), which checks run with which severity,
why each matters and how to fix it, and waivers. The check logic lives in ``validator/checks``; a pack
can also declare simple ``expect`` checks over any fact (``launch.args.mem_fraction_static <= 0.68``)
without touching Python.

The pack is the only source of truth for a recipe: every expectation and every remedy text is here, none
in Python. Builtin checks choose a named remedy variant (``remedies.auto``) and the pack says what it
reads; ``why``, titles, remedies and messages are templates over the pack's expectations
(``{expect.speculative.num_steps}``) and the check's own fields (``{cache_dir}``), plain names only, never
evaluated. A second model or recipe is a new YAML file.

Loading validates the whole file (the schema below, frozen dataclasses read by ``validator.schema``, then
what the listed builtin checks need from it)
and maps every problem back to a line of the YAML, so ``rules lint`` can list them all:
``pack.yaml:42: checks[3].severity: Input should be 'critical', 'warning' or 'info'``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from validator.errors import InputError
from validator.facts import Mode
from validator.report import Severity
from validator.schema import Ge, Gt, Le, Lt, MinLen, Pattern, Problem, SchemaError, format_loc, load

DEFAULT_PACK = "ling-3.0-flash-dgx-spark"


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
    """What ``--rules auto`` recognises the recipe by (``validator/recipe_match.py``)."""

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
    speculative: SpeculativeExpect | None = None
    dspark: DSparkExpect | None = None
    accept_length_min: Annotated[float | None, Ge(1.0)] = None
    checkpoint: CheckpointExpect | None = None
    host: HostExpect | None = None
    model_bytes: ModelBytes | None = None
    startup: StartupExpect | None = None
    require_attestation: bool = False  # policy switch: demand the in-process plugin's evidence

    def given(self, name: str) -> bool:
        return getattr(self, name) is not None

    def fields(self) -> dict[str, object]:
        """Every value as a template field: ``expect.speculative.num_steps`` -> 3."""
        return dict(self._fields)

    @cached_property
    def _fields(self) -> dict[str, object]:  # computed once per pack: every rendered text reads it
        out: dict[str, object] = {}

        def walk(prefix: str, record: object) -> None:
            for f in dataclasses.fields(record):  # type: ignore[arg-type]
                value = getattr(record, f.name)
                if dataclasses.is_dataclass(value):
                    walk(f"{prefix}{f.name}.", value)
                elif value is not None:
                    out[prefix + f.name] = value

        walk("expect.", self)
        return out


@dataclass(frozen=True, kw_only=True)
class ProbeSettings:
    prompts: str  # relative to the pack's directory
    max_new_tokens: Annotated[int, Ge(8), Le(4096)]
    max_total_tokens: Annotated[int, Ge(16)]
    max_seconds: Annotated[float, Gt(0)]
    confidence: Annotated[float, Gt(0.5), Lt(1)]


Operator = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not in", "exists", "absent", "matches"]


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

    def templates(self) -> dict[str, str]:
        """Every text of the check that is a template, by its key in the pack."""
        out = {"title": self.title, "why": self.why, "remedy": self.remedy}
        out.update({f"remedies.{k}": v for k, v in self.remedies.items()})
        if self.pass_message is not None:
            out["pass_message"] = self.pass_message
        if self.fail_message is not None:
            out["fail_message"] = self.fail_message
        return out


@dataclass(frozen=True, kw_only=True)
class WaiverSpec:
    check: str
    justification: Annotated[str, MinLen(10)]
    expires: _dt.date

    def active(self, today: _dt.date | None = None) -> bool:
        return (today or _dt.date.today()) <= self.expires


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

    def expect_value(self, expect: Expect) -> object:
        """The value an ``expect`` check compares with: its own, or the expectation it names."""
        if expect.value_from is None:
            return expect.value
        return self.expect.fields().get(f"expect.{expect.value_from}")

    def render(self, text: str, params: Mapping[str, object] | None = None) -> str:
        """A template of this pack filled with its expectations (``{expect.moe_runner_backend}``) and the
        check's own fields (``{cache_dir}``)."""
        return render_template(text, {**self.expect.fields(), **(params or {})})


# ---- message templates: plain named fields only ----

_FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# a literal brace pair, a field up to the first closing brace, or a lone brace (an error)
_BRACES_RE = re.compile(r"\{\{|\}\}|\{([^}]*)\}|[{}]")


def _scan(text: str) -> list[tuple[str, str]]:
    """Split a template into ("text", s) and ("field", name) parts. ``{{`` and ``}}`` are literal braces.
    A field is a plain (dotted) name looked up in a table, never evaluated: no attribute access, no
    indexing, no conversion or format spec, no dunder names."""
    parts: list[tuple[str, str]] = []
    buf: list[str] = []
    at = 0
    for m in _BRACES_RE.finditer(text):
        buf.append(text[at : m.start()])
        at = m.end()
        token, name = m.group(0), m.group(1)
        if token in ("{{", "}}"):
            buf.append(token[0])
        elif name is not None:
            if not _FIELD_RE.fullmatch(name) or "__" in name:
                raise ValueError(f"'{{{name}}}' is not a plain field name")
            parts += [("text", "".join(buf)), ("field", name)]
            buf = []
        elif token == "{":
            raise ValueError(f"unclosed '{{' at character {m.start() + 1} (write '{{{{' for a literal brace)")
        else:
            raise ValueError(f"single '}}' at character {m.start() + 1} (write '}}}}' for a literal brace)")
    buf.append(text[at:])
    parts.append(("text", "".join(buf)))
    return parts


def template_fields(text: str) -> list[str]:
    """The field names a template uses; ValueError when it is not a valid template."""
    return [v for kind, v in _scan(text) if kind == "field"]


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return str(list(value))
    return str(value)


def render_template(text: str, values: Mapping[str, object]) -> str:
    """Fill a (linted) template; a field without a value stays as written, so a gap is visible."""
    try:
        parts = _scan(text)
    except ValueError:
        return text
    return "".join(
        v if kind == "text" else (_show(values[v]) if v in values else "{" + v + "}") for kind, v in parts
    )


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
        with path.open("rb") as fh:
            head = fh.read(8192).decode("utf-8", errors="replace")
    except OSError:
        return False
    return "\nkind: RulePack" in head


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


PACK_CAP = 1024 * 1024  # a real pack is about 10 KB


class PackError(InputError):
    """A rule pack with one or more problems; each is ``(line, message)``. The exception's own message is
    the first problem (one line for any command); ``rules lint`` prints them all."""

    def __init__(self, path: str, problems: list[tuple[int | None, str]]) -> None:
        line, first = problems[0]
        more = (
            f" (and {len(problems) - 1} more: spark-validate rules lint {path})" if len(problems) > 1 else ""
        )
        super().__init__(path, first + more, line)
        self.problems = problems

    def lines(self) -> list[str]:
        return [
            f"{self.where}:{line}: {msg}" if line else f"{self.where}: {msg}" for line, msg in self.problems
        ]


def parse_pack(path: Path) -> RulePack:
    """Parse and validate one pack file: the schema, then what the listed builtin checks need from it
    (expectations, remedy variants, modes) and every message template. All problems are reported
    together as a ``PackError`` (exit 65), each with its line."""
    import yaml

    from validator.sources.files import read_text_bounded

    where = str(path)
    text = read_text_bounded(path, PACK_CAP, "rule pack")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 10x faster
    try:
        # Aliases first, from the event stream: a pack has no use for them, and a few lines of nested
        # aliases ("billion laughs") expand to gigabytes once validated.
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark is not None else None
                raise InputError(where, "YAML aliases (*name) are not allowed in a rule pack", line)
        data = yaml.load(text, Loader=loader)  # a safe loader (CSafeLoader or SafeLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
        raise InputError(where, f"invalid YAML: {exc.problem}", line) from None
    except yaml.YAMLError as exc:
        raise InputError(where, f"invalid YAML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer over Python's digit limit, absurd nesting
        raise InputError(where, f"invalid value in YAML: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(data, dict):
        raise InputError(where, "a rule pack must be a YAML mapping", 1)
    node = None

    def line_of(loc: tuple[Any, ...]) -> int | None:
        nonlocal node
        if node is None:
            node = yaml.compose(text, Loader=loader)  # positions, only needed to report an error
        return _line_of(node, loc)

    try:
        pack = load(RulePack, data)
    except SchemaError as exc:
        problems = [(line_of(loc), f"{format_loc(loc) or 'pack'}: {msg}") for loc, msg in exc.problems]
        raise PackError(where, problems) from None
    found = lint_pack(pack)
    if found:
        raise PackError(where, [(line_of(loc), f"{format_loc(loc)}: {msg}") for loc, msg in found])
    return pack


def lint_pack(pack: RulePack) -> list[tuple[tuple[str | int, ...], str]]:
    """What the schema cannot say: each check without ``expect`` is a builtin that runs in the modes
    listed, the expectations and remedy variants it uses are given, and every template names only fields
    that exist. Returns ``(location, problem)`` pairs."""
    from validator.checks.registry import builtins

    known = builtins()
    given = pack.expect.fields()
    absent = {f.name for f in dataclasses.fields(pack.expect) if not pack.expect.given(f.name)}
    out: list[tuple[tuple[str | int, ...], str]] = []
    for i, spec in enumerate(pack.checks):
        at: tuple[str | int, ...] = ("checks", i)
        params: set[str] = set()
        if spec.expect is not None:
            params = {"actual", "expected", "fact"}
            ref = spec.expect.value_from
            if ref is not None and f"expect.{ref}" not in given:
                out.append(((*at, "expect", "value_from"), f"{spec.id}: the pack has no expectation {ref!r}"))
        elif spec.id not in known:
            out.append(((*at, "id"), f"{spec.id}: no builtin check of that name and no 'expect'"))
        else:
            b = known[spec.id]
            params = set(b.params)
            for need in sorted(b.needs_in(spec.modes)):
                if need == "probe" and pack.probe is None:
                    out.append((("probe",), f"probe is missing (needed by {spec.id})"))
                elif need != "probe" and not pack.expect.given(need):
                    out.append((("expect",), f"expect.{need} is missing (needed by {spec.id})"))
            for mode in spec.modes:
                if mode not in b.forms:
                    out.append(
                        ((*at, "modes"), f"{spec.id} has no {mode} form (it runs in: {', '.join(b.forms)})")
                    )
            for variant in sorted(b.remedies_in(spec.modes) - set(spec.remedies)):
                out.append(((*at, "remedies"), f"{spec.id}: remedies.{variant} is missing"))
            for variant in sorted(set(spec.remedies) - b.remedies_in(b.forms)):
                uses = ", ".join(sorted(b.remedies_in(b.forms))) or "none"
                out.append(
                    (
                        (*at, "remedies", variant),
                        f"{spec.id} has no remedy variant {variant!r} (it uses: {uses})",
                    )
                )
        for key, text in spec.templates().items():
            loc = (*at, *key.split(".", 1))
            try:
                names = template_fields(text)
            except ValueError as exc:
                out.append((loc, f"{spec.id}: {exc}"))
                continue
            for name in dict.fromkeys(names):
                section = name.split(".")[1] if name.startswith("expect.") else None
                if section is not None and section in absent:
                    continue  # reported once, as the missing expectation
                if name not in given and name not in params:
                    out.append((loc, f"{spec.id}: unknown template field {{{name}}}"))
    # One "missing" line per expectation, naming every check that needs it.
    merged: dict[str, list[str]] = {}
    rest: list[tuple[tuple[str | int, ...], str]] = []
    for loc, msg in out:
        m = re.fullmatch(r"((?:expect\.)?\w+) is missing \(needed by (.+)\)", msg)
        if m:
            merged.setdefault(m.group(1), []).append(m.group(2))
        else:
            rest.append((loc, msg))
    missing = [((k.split(".")[0],), f"{k} is missing (needed by {', '.join(v)})") for k, v in merged.items()]
    return missing + rest


def expired_waivers(pack: RulePack, today: _dt.date | None = None) -> list[WaiverSpec]:
    return [w for w in pack.waivers if not w.active(today)]


def _line_of(node: Any, loc: tuple[Any, ...]) -> int | None:
    """Walk the composed YAML node tree along a problem's location to the nearest line."""
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
