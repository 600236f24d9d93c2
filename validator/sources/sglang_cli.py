"""SGLang's server-argument parser, replayed from a table instead of imported.

Why: preflight must accept and reject exactly what ``sglang.srt.server_args.prepare_server_args`` accepts
and rejects (an abbreviation SGLang takes, a typo it refuses), yet importing SGLang costs torch, triton,
seconds and a GPU build. ``scripts/gen_sglang_cli_table.py`` dumps the real parser to
``validator/data/sglang-0.5.23-cli.json``; this module registers every action of that table on a real
``argparse.ArgumentParser`` (so option classification, unambiguous prefixes, nargs, type conversion,
choices, required options and string defaults are argparse's own), with SGLang's type functions and
custom actions reproduced, and replays SGLang's ``--config`` YAML merge
(``srt/utils/server_args_config_parser.py``). ``tests/test_sglang_parity.py`` holds it to the real parser.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from validator.errors import InputError
from validator.sources.files import TEXT_CAP, read_text_bounded

TABLE_RESOURCE = "sglang-0.5.23-cli.json"
# package data, found beside the package as rulepack finds the built-in packs (importlib.resources would
# cost every preflight its import, about 2 ms, for a directory that is always a real one)
_DATA_DIR = Path(__file__).resolve().parents[1] / "data"


class ArgumentTypeError(Exception):
    """A type function's own message (argparse.ArgumentTypeError): printed verbatim after the flag."""


@dataclass(frozen=True)
class CliAction:
    option_strings: tuple[str, ...]
    dest: str
    action: str  # the class name in SGLang's parser (_StoreAction, BooleanOptionalAction, ...)
    kind: str  # store | set_const | boolean_optional | lora_paths | help
    nargs: int | str | None
    const: Any
    default: Any
    type: str | None
    choices: tuple[Any, ...] | None
    required: bool
    deprecated: bool
    new_flag: str | None

    @property
    def name(self) -> str:
        """How argparse names the action in messages: ``--tp-size/--tensor-parallel-size``."""
        return "/".join(self.option_strings)


@dataclass(frozen=True)
class CliTable:
    sglang_version: str
    prog: str
    allow_abbrev: bool
    prefix_chars: str
    parser_defaults: dict[str, Any]
    actions: tuple[CliAction, ...]
    by_option: dict[str, CliAction]  # every option string, in registration order (argparse's dict order)

    def action_for_dest(self, dest: str) -> CliAction | None:
        return next((a for a in self.actions if a.dest == dest), None)


@dataclass
class ParsedArgs:
    """One parse: the argv argparse saw (after ``--config`` merging) and what it produced."""

    argv: list[str]
    args: dict[str, Any]
    explicit: set[str]
    warnings: list[str] = field(default_factory=list)
    config_file: Path | None = None
    unknown: list[str] = field(default_factory=list)  # lenient parse: arguments the table does not know


@dataclass(frozen=True)
class TableChoice:
    """Which flag table parses launch commands, and whether arguments it does not know are fatal."""

    table: CliTable
    described: str  # "the table generated from SGLang 0.0.0.dev1+g... (/root/.cache/...json)"
    lenient: bool = False  # report unknown arguments instead of refusing the command


_CHOICE: ContextVar[TableChoice | None] = ContextVar("sglang_cli_table", default=None)


@contextmanager
def parsing_with(choice: TableChoice) -> Iterator[None]:
    """Parse launch commands with another build's table (``spark-validate sglang-table``), or leniently
    with the shipped one for a build that has no table: SGLang builds other than 0.5.23 accept flags
    the shipped table lacks, and refusing those would be a false alarm."""
    token = _CHOICE.set(choice)
    try:
        yield
    finally:
        _CHOICE.reset(token)


def table_from_json(data: dict[str, Any], *, allow_unknown_types: bool = False) -> CliTable:
    """A table as ``scripts/gen_sglang_cli_table.py`` writes it (``spark-validate sglang-table`` checks a
    generated one with it before caching); ``allow_unknown_types``: keep values of type functions this
    module does not reproduce as strings."""
    actions = []
    for raw in data["actions"]:
        choices = raw["choices"]
        actions.append(
            CliAction(
                option_strings=tuple(raw["option_strings"]),
                dest=raw["dest"],
                action=raw["action"],
                kind=raw["kind"],
                nargs=raw["nargs"],
                const=raw["const"],
                default=raw["default"],
                type=raw["type"],
                choices=None if choices is None else tuple(choices),
                required=raw["required"],
                deprecated=raw["deprecated"],
                new_flag=raw["new_flag"],
            )
        )
    by_option: dict[str, CliAction] = {}
    for action in actions:
        for option in action.option_strings:
            by_option[option] = action  # a later registration replaces, as in argparse
    unknown = {a.type for a in actions} - set(_TYPES)
    if unknown and not allow_unknown_types:
        raise ValueError(
            f"CLI table uses type functions this parser does not know: {sorted(map(str, unknown))}"
        )
    parser = data["parser"]
    return CliTable(
        sglang_version=data["sglang_version"],
        prog=parser["prog"],
        allow_abbrev=parser["allow_abbrev"],
        prefix_chars=parser["prefix_chars"],
        parser_defaults=dict(parser["defaults"]),
        actions=tuple(actions),
        by_option=by_option,
    )


@cache
def load_table(path: Path | None = None) -> CliTable:
    """The shipped table (or ``path``, a table generated from another build), parsed once per process.

    A generated table may name type functions this module does not reproduce (a newer build's own
    parsers): their values are kept as the strings given, which can only make a check see less."""
    if path is None:
        text = (_DATA_DIR / TABLE_RESOURCE).read_text(encoding="utf-8")
        where = f"validator/data/{TABLE_RESOURCE}"
    else:
        text = read_text_bounded(path, 16 * 1024 * 1024, "SGLang CLI table")
        where = str(path)
    try:
        return table_from_json(json.loads(text), allow_unknown_types=path is not None)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(where, f"not a valid SGLang CLI table: {exc}") from exc


# --- SGLang's argparse type functions, reproduced ------------------------------------------------------


def _human_readable_int(value: str) -> int:
    # sglang/srt/utils/common.py: human_readable_int
    from decimal import Decimal  # here: importing decimal costs every preflight 4 ms, few flags need it

    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def _nullable_str(value: str) -> str | None:
    return None if not value or value == "None" else value


def _orjson_int(text: str) -> int:
    # orjson (used by json_list_type) refuses integers outside 64 bits.
    number = int(text)
    if not -(2**63) <= number < 2**64:
        raise ValueError("integer out of range")
    return number


def _orjson_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):  # orjson refuses a number too large for a double (1e400); json makes it inf
        raise ValueError("number out of range")
    return number


def _orjson_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")  # orjson rejects NaN/Infinity


def _json_list_type(value: str) -> Any:
    try:
        return json.loads(
            value, parse_int=_orjson_int, parse_float=_orjson_float, parse_constant=_orjson_constant
        )
    except ValueError:
        raise ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.") from None


def _json_loads(value: str) -> Any:
    return json.loads(value)


_CUDA_GRAPH_PHASES = ("decode", "prefill")
# sglang/srt/model_executor/cuda_graph_config.py: ALLOWED_KEYS_PER_PHASE
_CUDA_GRAPH_KEYS = {
    "decode": ("backend", "max_bs", "bs"),
    "prefill": (
        "backend",
        "max_bs",
        "bs",
        "max_context_size",
        "full_prefill_max_req",
        "full_prefill_prefix_chunk_tokens",
        "max_seq_len",
    ),
}


def _parse_cuda_graph_backend_arg(raw: str) -> str:
    if raw == "tc_piecewise":
        raise ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def _parse_cuda_graph_config_arg(raw: str) -> dict[str, dict[str, Any]]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ArgumentTypeError(f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
    result: dict[str, dict[str, Any]] = {}
    for phase, settings in parsed.items():
        phase = str(phase)
        if phase not in _CUDA_GRAPH_PHASES:
            raise ArgumentTypeError(
                f"--cuda-graph-config: unknown phase '{phase}', expected one of {_CUDA_GRAPH_PHASES}"
            )
        if not isinstance(settings, dict):
            raise ArgumentTypeError(
                f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}"
            )
        if "backend" in settings:
            _parse_cuda_graph_backend_arg(settings["backend"])
        allowed = _CUDA_GRAPH_KEYS[phase]
        result[phase] = {}
        for key, value in settings.items():
            if key not in allowed:
                raise ArgumentTypeError(
                    f"--cuda-graph-config['{phase}']: unknown key '{key}', expected one of {allowed}"
                )
            result[phase][key] = value
    return result


def _identity(value: str) -> str:
    return value


_TYPES: dict[str | None, Any] = {
    None: _identity,
    "str": str,
    "int": int,
    "float": float,
    "loads": _json_loads,
    "human_readable_int": _human_readable_int,
    "nullable_str": _nullable_str,
    "json_list_type": _json_list_type,
    "parse_cuda_graph_backend_arg": _parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": _parse_cuda_graph_config_arg,
}


# --- the parser: real argparse, built from the table ------------------------------------------------


class _ArgparseExit(Exception):
    """What ``parser.error`` would print (argparse then exits 2)."""


class _HelpRequested(Exception):
    pass


class _TableParser(argparse.ArgumentParser):
    """argparse itself, with its exits turned into exceptions: a refusal is ``parser.error``'s message,
    ``-h`` is reported instead of printed."""

    def error(self, message: str) -> NoReturn:
        raise _ArgparseExit(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _HelpRequested()

    def _get_formatter(self) -> argparse.HelpFormatter:
        # add_argument asks for a formatter only to validate nargs against the metavar; a new one each
        # time reads the terminal size, half of building the 532-action parser. Help is never printed.
        if self._formatter is None:
            self._formatter = super()._get_formatter()
        return self._formatter

    _formatter: argparse.HelpFormatter | None = None


class _TypeFunction:
    """A table type name as argparse's ``type=``: argparse names it in "invalid <type> value" by
    ``__name__``, as it names SGLang's own function."""

    def __init__(self, name: str, func: Callable[[str], Any]) -> None:
        self.__name__ = name
        self._func = func

    def __call__(self, text: str) -> Any:
        try:
            return self._func(text)
        except ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        except ArithmeticError:  # decimal's InvalidOperation: argparse reports ValueError and TypeError
            raise ValueError(text) from None


def _record(namespace: argparse.Namespace, dest: str) -> None:
    explicit: set[str] = getattr(namespace, _EXPLICIT)
    explicit.add(dest)


class _Store(argparse._StoreAction):
    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        _record(namespace, self.dest)
        setattr(namespace, self.dest, values)


class _SetConst(argparse.Action):
    """``store_true``/``store_const`` and SGLang's deprecated variants (which warn, then store)."""

    def __init__(self, option_strings: list[str], dest: str, *, table_action: CliAction, **kw: Any) -> None:
        # The table's nargs: 0 for a switch; None (one value) for a retired valued flag whose one accepted
        # value became a boolean (``--monokernel-backend amd``, its value checked against ``choices``).
        super().__init__(
            option_strings,
            dest,
            nargs=table_action.nargs,
            const=table_action.const,
            choices=table_action.choices,
            **kw,
        )
        self.table_action = table_action

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        _record(namespace, self.dest)
        setattr(namespace, self.dest, self.const)
        if self.table_action.deprecated:
            hint = f" Use '{self.table_action.new_flag}' instead." if self.table_action.new_flag else ""
            warnings: list[str] = getattr(namespace, _WARNINGS)
            warnings.append(f"'{option}' is deprecated and will be removed in a future release.{hint}")


class _BooleanOptional(argparse.Action):
    """``BooleanOptionalAction`` over the table's option strings, which already hold the ``--no-`` forms
    (argparse's own class would add them a second time)."""

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        _record(namespace, self.dest)
        setattr(namespace, self.dest, not str(option).startswith("--no-"))


class _LoraPaths(argparse._StoreAction):
    """SGLang's ``LoRAPathAction`` (``sglang/srt/arg_groups/argparse_actions.py``): a JSON entry must
    name both ``lora_name`` and ``lora_path``."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        _record(namespace, self.dest)
        out: list[Any] = []
        for raw in values or []:
            path = str(raw).strip()
            if path.startswith("{") and path.endswith("}"):
                # SGLang's action raises json's error and an AssertionError, not argparse errors: the launch
                # stops with a traceback whose last line is this text, without argparse's "argument" prefix
                try:
                    obj = json.loads(path)
                except ValueError as exc:
                    raise _ArgparseExit(str(exc)) from None
                if not (isinstance(obj, dict) and "lora_path" in obj and "lora_name" in obj):
                    raise _ArgparseExit(
                        f"{path!r} looks like a JSON str, "
                        "but it does not contain 'lora_name' and 'lora_path' keys."
                    )
                out.append(obj)
            else:
                out.append(path)
        setattr(namespace, self.dest, out)


class _Help(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        raise _HelpRequested()


_EXPLICIT = "__spark_validate_explicit__"
_WARNINGS = "__spark_validate_warnings__"


_PARSERS: dict[int, tuple[CliTable, _TableParser]] = {}


def _parser(table: CliTable) -> _TableParser:
    """One argparse parser per table, built once per process (tables are loaded once and kept)."""
    held = _PARSERS.get(id(table))
    if held is None or held[0] is not table:
        held = _PARSERS[id(table)] = (table, _build_parser(table))
    return held[1]


def _build_parser(table: CliTable) -> _TableParser:
    """Every action of the table, registered as SGLang registers it."""
    parser = _TableParser(
        prog=table.prog,
        allow_abbrev=table.allow_abbrev,
        prefix_chars=table.prefix_chars,
        add_help=False,
        exit_on_error=False,
    )
    for a in table.actions:
        common: dict[str, Any] = {"dest": a.dest, "default": a.default, "required": a.required}
        options = list(a.option_strings)
        if a.kind == "help":
            parser.add_argument(*options, action=_Help, dest=a.dest, default=a.default)
        elif a.kind == "set_const":
            parser.add_argument(*options, action=_SetConst, table_action=a, **common)
        elif a.kind == "boolean_optional":
            parser.add_argument(*options, action=_BooleanOptional, **common)
        elif a.kind in ("store", "lora_paths"):
            kwargs: dict[str, Any] = {
                **common,
                "type": _TypeFunction(str(a.type), _TYPES.get(a.type, _identity)),
            }
            if a.type is None:
                kwargs.pop("type")
            if a.nargs is not None:
                kwargs["nargs"] = a.nargs
            if a.nargs == "?":
                kwargs["const"] = a.const
            if a.choices is not None:
                kwargs["choices"] = a.choices
            parser.add_argument(*options, action=_Store if a.kind == "store" else _LoraPaths, **kwargs)
        else:
            raise ValueError(f"CLI table action {a.name} has an unknown kind {a.kind!r}")
    parser.set_defaults(**table.parser_defaults)
    return parser


def _run(table: CliTable, argv: list[str], lenient: bool = False) -> ParsedArgs:
    """Parse ``argv`` with argparse over the table: accepts, refuses and values as SGLang's parser does
    (the parity test holds it to the real one), and says which dests the command line gave."""
    explicit: set[str] = set()
    warnings: list[str] = []
    namespace = argparse.Namespace(**{_EXPLICIT: explicit, _WARNINGS: warnings})
    try:
        parsed, extras = _parser(table).parse_known_args(argv, namespace)
    except argparse.ArgumentError as exc:
        raise _ArgparseExit(str(exc)) from None
    if extras and not lenient:
        shown = " ".join(extras[:20]) + (f" ... ({len(extras) - 20} more)" if len(extras) > 20 else "")
        raise _ArgparseExit(f"unrecognized arguments: {shown}"[:2000])
    args = {k: v for k, v in vars(parsed).items() if k not in (_EXPLICIT, _WARNINGS)}
    return ParsedArgs(argv=argv, args=args, explicit=explicit, warnings=warnings, unknown=list(extras))


# --- --config YAML merging (sglang/srt/utils/server_args_config_parser.py) ------------------------------


def _config_keys(action: CliAction) -> set[str]:
    return {action.dest} | {o[2:].replace("-", "_") for o in action.option_strings if o.startswith("--")}


def _config_support(table: CliTable) -> tuple[set[str], dict[str, CliAction]]:
    """(keys of store_true flags, unsupported key -> action), as ConfigArgumentMerger computes them."""
    store_true = {k for a in table.actions if a.action == "_StoreTrueAction" for k in _config_keys(a)}
    supported = [
        a for a in table.actions if a.action in ("_StoreTrueAction", "_StoreAction") or a.nargs is None
    ]
    supported_keys = {k for a in supported for k in _config_keys(a)}
    unsupported: dict[str, CliAction] = {}
    for action in table.actions:
        if not action.option_strings or action in supported:
            continue
        if {"--config", "--help", "-h"} & set(action.option_strings):
            continue
        for key in _config_keys(action):
            if key not in supported_keys:
                unsupported[key] = action
    return store_true, unsupported


def _yaml_to_argv(data: dict[Any, Any], table: CliTable, where: str) -> list[str]:
    store_true, unsupported = _config_support(table)
    out: list[str] = []
    for key, value in data.items():
        if not isinstance(key, str):
            raise InputError(where, f"config key {key!r} is not a string (SGLang would crash on it)")
        norm = key.replace("-", "_")
        if norm in unsupported:
            raise InputError(
                where, f"Unsupported config option '{norm}' with action '{unsupported[norm].action}'"
            )
        if isinstance(value, bool):
            if norm in store_true:
                if value:
                    out.append(f"--{key}")
            else:
                out.extend([f"--{key}", str(value).lower()])
        elif isinstance(value, list):
            if value:
                out.append(f"--{key}")
                out.extend(str(item) for item in value)
        elif isinstance(value, dict):
            out.extend([f"--{key}", json.dumps(value)])
        else:
            out.extend([f"--{key}", str(value)])
    return out


def merge_config(
    argv: list[str], *, origin: str, base_dir: Path | None = None, table: CliTable | None = None
) -> tuple[list[str], Path | None]:
    """Apply ``--config FILE`` as SGLang does: the file's options go first, so the command line wins.

    Only the exact token ``--config`` triggers it (``--config=f.yaml`` is stored and ignored by SGLang).
    A relative path is read against ``base_dir`` (the server's working directory), else the CWD.
    """
    table = table or load_table()
    indices = [i for i, arg in enumerate(argv) if arg == "--config"]
    if not indices:
        return list(argv), None
    if len(indices) > 1:
        raise InputError(origin, "Multiple config files specified! Only one allowed.")
    index = indices[0]
    if index == len(argv) - 1:
        raise InputError(origin, "No config file specified after --config flag!")
    name = argv[index + 1]
    if not name:  # SGLang merges nothing for an empty name; argparse then stores '' as --config
        return list(argv), None
    path = Path(name)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise InputError(origin, f"Config file must be YAML format, got: {path.suffix}")
    try:
        exists = path.exists()
    except OSError as exc:  # a name over the kernel's limit: SGLang's Path.exists raises the same
        raise InputError(origin, str(exc).replace(str(path), name)) from None
    if not exists:
        raise InputError(origin, f"Config file not found: {name}")
    import yaml  # lazy: only a --config command pays for it

    text = read_text_bounded(path, TEXT_CAP, "--config file")  # regular file, size-capped
    try:
        # A server config has no use for anchors and aliases; refusing them keeps a small file from
        # expanding into gigabytes of argv words (a "billion laughs").
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                raise InputError(
                    str(path),
                    "YAML aliases are not accepted in a --config file",
                    mark.line + 1 if mark else None,
                )
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        line = None
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = int(mark.line) + 1
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(str(path), f"cannot read --config file: {reason}", line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(str(path), "Config file must contain a dictionary at root level")
    merged = _yaml_to_argv(data, table, str(path)) + argv[:index] + argv[index + 2 :]
    return merged, path


# --- public entry points -------------------------------------------------------------------------------


# logging's level names (getattr(logging, NAME) is the level's number, which setLevel accepts)
_LOGGING_LEVELS = frozenset({"CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET"})


def _check_log_level(value: object, origin: str) -> None:
    """``prepare_server_args`` configures logging with ``getattr(logging, log_level.upper())`` before the
    server starts: a level ``logging`` does not have (``--log-level verbose``) stops the launch with that
    AttributeError, and a name that is not a level (``--log-level basic_format``) with the ValueError or
    TypeError ``basicConfig`` raises. The same refusal here, with the same text, instead of a pass for a
    command that never starts a server."""
    if not isinstance(value, str) or value.upper() in _LOGGING_LEVELS:
        return
    import logging  # here: the default (info) and every level name pass without it (1.5 ms a preflight)

    try:
        level = getattr(logging, value.upper())
        logging.getLogger("spark_validate.log_level_check").setLevel(level)
    except (AttributeError, ValueError, TypeError) as exc:
        raise InputError(origin, str(exc)) from None


def parse_argv(
    argv: list[str], *, origin: str, base_dir: Path | None = None, table: CliTable | None = None
) -> ParsedArgs:
    """Parse server arguments (after ``python -m sglang.launch_server`` / ``sglang serve``) as
    ``prepare_server_args`` would; any refusal raises InputError(origin, <argparse's message>).
    Inside ``parsing_with``, that table (and its leniency) is used unless ``table`` is given."""
    choice = _CHOICE.get() if table is None else None
    table = table or (choice.table if choice is not None else load_table())
    lenient = choice is not None and choice.lenient
    merged, config_file = merge_config(list(argv), origin=origin, base_dir=base_dir, table=table)
    try:
        parsed = _run(table, merged, lenient=lenient)
    except _ArgparseExit as exc:
        raise InputError(origin, str(exc)) from None
    except _HelpRequested:
        raise InputError(
            origin, "-h/--help prints SGLang's usage and exits; the server would not start"
        ) from None
    parsed.config_file = config_file
    _check_log_level(parsed.args.get("log_level"), origin)
    if config_file is None and isinstance(parsed.args.get("config"), str):
        parsed.warnings.append(
            f"--config value {parsed.args['config']!r} is ignored by SGLang {table.sglang_version}: "
            "only the separate form '--config FILE' is merged"
        )
    if parsed.unknown:
        parsed.warnings.append(
            f"arguments not in {choice.described if choice else 'the flag table'}, not checked: "
            + " ".join(parsed.unknown)
        )
    return parsed


def parse_server_args(
    argv: list[str], *, origin: str, base_dir: Path | None = None
) -> tuple[dict[str, Any], set[str]]:
    """(argparse dest -> value with defaults filled in, dests given on the command line or in --config)."""
    parsed = parse_argv(argv, origin=origin, base_dir=base_dir)
    return parsed.args, parsed.explicit
