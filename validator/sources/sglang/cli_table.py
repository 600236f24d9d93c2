"""SGLang's flag table: its records, the shipped one's loading, and which table a launch is parsed with.

Why apart from the parser: ``scripts/gen_sglang_cli_table.py`` dumps SGLang's real parser to
``validator/data/sglang-0.5.23-cli.json``; the records here are that file, read once per process. Readers
that only ask what a flag is (the launcher-script reader, drift) need the table and not the
parser, and ``spark-validate sglang-table`` checks a table generated from another build with
``table_from_json`` before caching it. ``parsing_with`` chooses that build's table for a launch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from validator.bounded_files import read_text_bounded
from validator.errors import InputError
from validator.sources.sglang.arg_types import TYPES
from validator.validation import ValidationError, format_loc, load, problems

TABLE_RESOURCE = "sglang-0.5.23-cli.json"
# package data, found beside the package as rulepack finds the built-in packs (importlib.resources would
# cost every preflight its import, for a directory that is always a real one)
_DATA_DIR = Path(__file__).resolve().parents[2] / "data"


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


@dataclass(frozen=True)
class TableChoice:
    """Which flag table parses launch commands, and whether arguments it does not know are fatal."""

    table: CliTable
    described: str  # "the table generated from SGLang 0.0.0.dev1+g... (/root/.cache/...json)"
    lenient: bool = False  # report unknown arguments instead of refusing the command
    # the build's own flags were not read (no trusted table of its version): a refusal of this table's
    # (an invalid choice, an ambiguous prefix) may not be the build's
    unread: bool = False


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


def chosen() -> TableChoice | None:
    """The table ``parsing_with`` chose for this context, or None (the shipped one, strict)."""
    return _CHOICE.get()


@dataclass(frozen=True)
class CliParserFile:
    prog: str
    allow_abbrev: bool
    prefix_chars: str
    defaults: dict[str, Any]


@dataclass(frozen=True)
class CliTableFile:
    """The file as ``scripts/gen_sglang_cli_table.py`` writes it (its other keys are notes for people)."""

    sglang_version: str
    parser: CliParserFile
    actions: tuple[CliAction, ...]


def table_from_json(data: object, *, allow_unknown_types: bool = False) -> CliTable:
    """A table as ``scripts/gen_sglang_cli_table.py`` writes it (``spark-validate sglang-table`` checks a
    generated one with it before caching); ValueError (one line: the first problem) when it is not one.
    ``allow_unknown_types``: keep values of type functions this module does not reproduce as strings."""
    try:
        doc = load(CliTableFile, data)
    except ValidationError as exc:
        (loc, msg), *rest = problems(exc)
        more = f" (and {len(rest)} more)" if rest else ""
        raise ValueError(f"{format_loc(loc) or 'the document'}: {msg}{more}") from None
    by_option: dict[str, CliAction] = {}
    for action in doc.actions:
        for option in action.option_strings:
            by_option[option] = action  # a later registration replaces, as in argparse
    unknown = {a.type for a in doc.actions} - set(TYPES)
    if unknown and not allow_unknown_types:
        raise ValueError(
            f"CLI table uses type functions this parser does not know: {sorted(map(str, unknown))}"
        )
    return CliTable(
        sglang_version=doc.sglang_version,
        prog=doc.parser.prog,
        allow_abbrev=doc.parser.allow_abbrev,
        prefix_chars=doc.parser.prefix_chars,
        parser_defaults=dict(doc.parser.defaults),
        actions=doc.actions,
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
    except ValueError as exc:  # not JSON, or not a table
        raise InputError(where, f"not a valid SGLang CLI table: {exc}") from None
