"""The `spark-validate` front door: argument parsing, dispatch, and the exit-code contract.

Each subcommand lives in ``validator/commands/<name>.py`` and exposes ``add_parser(subparsers)`` and
``run(args) -> int``. Command modules import their heavy dependencies inside ``run`` so that
``spark-validate preflight`` starts fast. Anticipated failures are ``ValidatorError``s and end with their
exit code and a one-line message; anything else is a bug (exit 1), still without a traceback unless
``SPARK_VALIDATE_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Protocol

from validator import TOOL_NAME, __version__
from validator.errors import ExitCode, ValidatorError
from validator.redact import neutralize_controls, redact_text

COMMANDS = ("preflight", "launch", "check", "serve", "sim", "demo", "rules", "sglang-table")


class CommandModule(Protocol):
    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 (the contract's usage error) with a one-line message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(redact_text(f"{self.prog}: error: {message}") + "\n")
        raise SystemExit(int(ExitCode.USAGE))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=TOOL_NAME,
        description="Validate an SGLang deployment of Ling-3.0-flash-fp4 on NVIDIA DGX Spark.",
    )
    parser.add_argument("--version", action="version", version=f"{TOOL_NAME} {__version__}")
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_Parser
    )
    sub.required = True
    for name in COMMANDS:
        _module(name).add_parser(sub)
    return parser


def _module(name: str) -> CommandModule:
    module: CommandModule = importlib.import_module(f"validator.commands.{name.replace('-', '_')}")
    return module


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
        return int(_module(args.command).run(args))
    except ValidatorError as exc:
        # exit-65/69 lines quote inputs and server replies: no secret, no terminal control sequence
        sys.stderr.write(neutralize_controls(redact_text(f"{TOOL_NAME}: {exc}")) + "\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except SystemExit as exc:  # argparse inside subcommands
        return exc.code if isinstance(exc.code, int) else int(ExitCode.USAGE)
    except Exception as exc:  # a bug: say so in one line, keep the traceback for debugging
        if os.environ.get("SPARK_VALIDATE_DEBUG"):
            raise
        sys.stderr.write(
            redact_text(f"{TOOL_NAME}: internal error: {type(exc).__name__}: {exc}")
            + " (set SPARK_VALIDATE_DEBUG=1 for a traceback)\n"
        )
        return int(ExitCode.INTERNAL)


def _reader_went_away() -> int:
    """``spark-validate rules list | head -1``: the reader closed the pipe, which is how ``head`` says it
    has enough. End quietly, as a tool killed by SIGPIPE would (exit 128 + 13), with stdout pointed at
    /dev/null so that the interpreter's final flush does not raise again. Python ignores SIGPIPE (so that
    the sidecar survives clients that hang up); restoring it globally would kill the daemon instead."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 128 + 13


if __name__ == "__main__":
    raise SystemExit(main())
