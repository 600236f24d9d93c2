"""An input's command-line option declared as field metadata, so that one dataclass field is both the
option (flag, metavar, help) and the value it fills: the parser is built from the fields and read back
into them by name. ``PreflightInputs`` and ``LiveInputs`` both declare their options so.

Standard library only: the CLI builds every sub-parser at start-up.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class CliOption:
    """How one input is given on the command line. ``dest`` is the field's name."""

    flag: str
    metavar: str | None
    help: str
    group: str
    type: Callable[[str], object] | None = str
    repeat: bool = False  # append: the option may be given several times, in order
    action: str | None = None  # store_true / store_false: a switch (no type, no metavar)
    default: object = None  # the parser's default, when the option is not given
    # the parsed value to the field's, at build time: may read a file or raise UsageError on a bad value
    read: Callable[[Any], object] | None = None
    late: bool = False  # read after the others (it reads a file): a bad value elsewhere is reported first


def option(
    flag: str,
    metavar: str | None,
    help: str,
    group: str,
    type: Callable[[str], object] | None = str,
    *,
    repeat: bool = False,
    action: str | None = None,
    default: object = None,
    parsed_default: object = None,
    read: Callable[[Any], object] | None = None,
    late: bool = False,
) -> Any:
    """A dataclass field carrying its option: ``default`` is the field's, ``parsed_default`` the parser's
    (a repeated option's is always an empty list, its field's too unless ``default`` is given)."""
    opt = CliOption(flag, metavar, help, group, type, repeat, action, parsed_default, read, late)
    meta = {"cli": opt}
    if repeat and default is None:
        return field(default_factory=list, metadata=meta)
    return field(default=default, metadata=meta)


def cli_options(cls: type[Any], *groups: str) -> Iterator[tuple[str, CliOption]]:
    """(field name, option) of every command-line input of the dataclass ``cls``, in declaration order
    (the order of --help), limited to ``groups`` when given."""
    for f in fields(cls):
        opt = f.metadata.get("cli")
        if isinstance(opt, CliOption) and (not groups or opt.group in groups):
            yield f.name, opt


def add_option(group: argparse._ActionsContainer, name: str, opt: CliOption) -> None:
    """One option on a parser, its ``dest`` the field's name."""
    kwargs: dict[str, Any] = {"dest": name, "help": opt.help}
    if opt.action is not None:
        kwargs["action"] = opt.action
    else:
        kwargs["type"] = opt.type
        if opt.metavar is not None:
            kwargs["metavar"] = opt.metavar
    if opt.repeat:
        kwargs["action"] = "append"
        kwargs["default"] = []
    elif opt.default is not None:
        kwargs["default"] = opt.default
    group.add_argument(opt.flag, **kwargs)


def read_back(cls: type[Any], args: argparse.Namespace, *, late: bool = False) -> dict[str, Any]:
    """The values the parser gave for ``cls``'s options, by field name, each through its ``read``; an
    option this parser does not have is left to the field's default. ``late``: only the options read
    last (the others without it)."""
    values: dict[str, Any] = {}
    for name, opt in cli_options(cls):
        if hasattr(args, name) and opt.late == late:
            value = getattr(args, name)
            values[name] = opt.read(value) if opt.read is not None else value
    return values
