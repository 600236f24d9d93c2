"""The argparse parser SGLang builds, rebuilt from its flag table: real ``argparse`` with SGLang's custom
actions (``LoRAPathAction``, deprecated switches, ``--no-`` forms), so classification, prefixes, nargs,
types, choices and defaults are argparse's own; exits become exceptions, and each parse records which
dests the command line gave.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from validator.sources.sglang.arg_types import TYPES, ArgumentTypeError, identity
from validator.sources.sglang.cli_table import CliAction, CliTable


@dataclass
class ParsedArgs:
    """One parse: the argv argparse saw (after ``--config`` merging) and what it produced."""

    argv: list[str]
    args: dict[str, Any]
    explicit: set[str]
    warnings: list[str] = field(default_factory=list)
    config_file: Path | None = None
    unknown: list[str] = field(default_factory=list)  # lenient parse: arguments the table does not know


class ArgparseExit(Exception):
    """What ``parser.error`` would print (argparse then exits 2)."""


class HelpRequested(Exception):
    pass


class _TableParser(argparse.ArgumentParser):
    """argparse itself, with its exits turned into exceptions: a refusal is ``parser.error``'s message,
    ``-h`` is reported instead of printed."""

    def error(self, message: str) -> NoReturn:
        raise ArgparseExit(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise HelpRequested()

    def _get_formatter(self) -> argparse.HelpFormatter:
        # add_argument asks for a formatter only to validate nargs against the metavar; a new one each
        # time reads the terminal size again. Help is never printed.
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
                    raise ArgparseExit(str(exc)) from None
                if not (isinstance(obj, dict) and "lora_path" in obj and "lora_name" in obj):
                    raise ArgparseExit(
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
        raise HelpRequested()


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
                "type": _TypeFunction(str(a.type), TYPES.get(a.type, identity)),
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


def parse_with_table(table: CliTable, argv: list[str], lenient: bool = False) -> ParsedArgs:
    """Parse ``argv`` with argparse over the table: accepts, refuses and values as SGLang's parser does
    (the parity test holds it to the real one), and says which dests the command line gave."""
    explicit: set[str] = set()
    warnings: list[str] = []
    namespace = argparse.Namespace(**{_EXPLICIT: explicit, _WARNINGS: warnings})
    try:
        parsed, extras = _parser(table).parse_known_args(argv, namespace)
    except argparse.ArgumentError as exc:
        raise ArgparseExit(str(exc)) from None
    if extras and not lenient:
        shown = " ".join(extras[:20]) + (f" ... ({len(extras) - 20} more)" if len(extras) > 20 else "")
        raise ArgparseExit(f"unrecognized arguments: {shown}"[:2000])
    args = {k: v for k, v in vars(parsed).items() if k not in (_EXPLICIT, _WARNINGS)}
    return ParsedArgs(argv=argv, args=args, explicit=explicit, warnings=warnings, unknown=list(extras))
