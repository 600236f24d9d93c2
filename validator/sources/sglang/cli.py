"""SGLang's server-argument parsing, replayed from a table instead of imported: ``parse_argv`` and
``parse_server_args``.

Preflight must accept and reject exactly what ``prepare_server_args`` does, without importing torch. Runs
``sglang.cli_table``, ``sglang.arg_types``, ``sglang.parser`` and ``sglang.config`` in SGLang's order, plus
the refusals after argparse; held to the real parser by ``tests/test_sglang_parity.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from validator.errors import InputError
from validator.sources.sglang.cli_table import CliTable, chosen, load_table
from validator.sources.sglang.config import merge_config
from validator.sources.sglang.parser import ArgparseExit, HelpRequested, ParsedArgs, parse_with_table

# logging's level names (getattr(logging, NAME) is the level's number, which setLevel accepts)
# the most server arguments parsed: Python's argparse takes time quadratic in the option words (each one
# searches the indices of all the others), and a real launch has a few hundred at most
MAX_SERVER_ARGS = 4096
_LOGGING_LEVELS = frozenset({"CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET"})


class ArgumentsRefused(InputError):
    """SGLang refuses the server's words themselves (argparse's ``parser.error``, which exits 2, or
    ``prepare_server_args``' log level) before it serves: such a command never starts a server. A file the
    words name (``--config``) that cannot be read is an ``InputError`` of its own."""


class ArgparseRefusal(ArgumentsRefused):
    """SGLang's argparse, replayed over the chosen table, refuses the words (an unknown, ambiguous or
    ill-typed option): a refusal of that table's version, which another version may not make."""


def _check_log_level(value: object, origin: str) -> None:
    """Refuse a ``--log-level`` that ``prepare_server_args``'s ``getattr(logging, level.upper())`` or
    ``basicConfig`` would refuse, with the same error, instead of passing a command that never starts."""
    if not isinstance(value, str) or value.upper() in _LOGGING_LEVELS:
        return

    try:
        level = getattr(logging, value.upper())
        logging.getLogger("spark_validate.log_level_check").setLevel(level)
    except (AttributeError, ValueError, TypeError) as exc:
        raise ArgumentsRefused(origin, str(exc)) from None


def parse_argv(
    argv: list[str],
    *,
    origin: str,
    base_dir: Path | None = None,
    table: CliTable | None = None,
    config_at: Callable[[str], Path] | None = None,
) -> ParsedArgs:
    """Parse server arguments (after ``python -m sglang.launch_server`` / ``sglang serve``) as
    ``prepare_server_args`` would; any refusal raises InputError(origin, <argparse's message>).
    Inside ``parsing_with``, that table (and its leniency) is used unless ``table`` is given."""
    choice = chosen() if table is None else None
    table = table or (choice.table if choice is not None else load_table())
    lenient = choice is not None and choice.lenient
    if len(argv) > MAX_SERVER_ARGS:  # before a --config file adds its own, and after (below)
        raise InputError(origin, f"{len(argv)} server arguments, more than the {MAX_SERVER_ARGS} read")
    merged, config_file = merge_config(
        list(argv), origin=origin, base_dir=base_dir, table=table, config_at=config_at
    )
    if len(merged) > MAX_SERVER_ARGS:
        raise InputError(
            origin,
            f"{len(merged)} server arguments with the --config file's, more than the {MAX_SERVER_ARGS} read",
        )
    try:
        parsed = parse_with_table(table, merged, lenient=lenient)
    except ArgparseExit as exc:
        raise ArgparseRefusal(origin, str(exc)) from None
    except HelpRequested:
        raise ArgumentsRefused(
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


def parse_server_args(argv: list[str], *, origin: str) -> tuple[dict[str, Any], set[str]]:
    """(argparse dest -> value with defaults filled in, dests given on the command line or in --config)."""
    parsed = parse_argv(argv, origin=origin)
    return parsed.args, parsed.explicit
