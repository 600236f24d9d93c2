"""The `spark-validate` front door: argument parsing, dispatch, and the exit-code contract.

Each subcommand is a line of ``COMMANDS`` (its help texts) and a module ``validator/commands/<name>.py``
exposing ``add_arguments(parser)`` and ``run(args) -> int``; every sub-parser is made here, by one loop.
Command modules import their heavy dependencies inside ``run`` so that ``spark-validate preflight`` starts
fast. Anticipated failures are ``ValidatorError``s and end with their exit code and a one-line message;
anything else is a bug (exit 1), still without a traceback unless ``SPARK_VALIDATE_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Protocol

from validator import TOOL_NAME, __version__
from validator.errors import ExitCode, InputError, ValidatorError
from validator.redact import neutralize_controls, redact_text

# Every command: the line `spark-validate --help` shows, and the paragraph under `spark-validate CMD --help`
# (None: the line is enough). Its options are its module's ``add_arguments``.
COMMANDS: dict[str, tuple[str, str | None]] = {
    "preflight": (
        "static checks of a launch command, its environment, SGLang, checkpoint, host",
        "Static checks before the server starts: no server, no GPU, no torch import.",
    ),
    "launch": (
        "preflight exactly CMD, then exec it (same PID)",
        "Preflight exactly CMD and its environment, then exec it; exit 78 without exec "
        "when a critical check fails.",
    ),
    "check": (
        "live checks against a running server, with the acceptance probe",
        "Wait until the server is ready, read its state, the attestation and the log, "
        "and run the acceptance probe.",
    ),
    "serve": (
        "the sidecar daemon: /readyz, /livez, /metrics, /report, and a status page at /",
        "Verify the running server at start-up and keep verifying it; serve the "
        "verdict to readiness probes, systemd and Prometheus.",
    ),
    "sim": (
        "run a simulated SGLang 0.5.23 server (no GPU) with a chosen failure scenario",
        "Serve SGLang 0.5.23's HTTP API for Ling-3.0-flash-fp4 as a chosen scenario would.",
    ),
    "demo": ("simulate a healthy and a broken server and show `check` catching the fault", None),
    "rules": ("list, show and lint rule packs", None),
    "npd": (
        "a node-problem-detector custom plugin: judge this node's servers, exit 0 OK, 1 problem, 2 unknown",
        "Judge the SGLang servers running on this node (as `check` with no --url, without the acceptance "
        "probe), within --timeout, and print one line within NPD's message limit: exit 0 OK, 1 a critical "
        "check failed, 2 unknown (nothing found, not provable, or out of time).",
    ),
    "sglang-table": (
        "generate and cache the flag table of the installed SGLang build (run on the server host)",
        "Runs SGLang's own argument parser inside PY (the server's interpreter: it must import "
        "sglang.srt.server_args, so torch too) and caches the table by build, for preflight and launch.",
    ),
}


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 (the contract's usage error) with a one-line message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(redact_text(f"{self.prog}: error: {message}") + "\n")
        raise SystemExit(int(ExitCode.USAGE))


class _Version(argparse.Action):
    """``--version``: the version and the build's commit (``validator.build_id``), worked out only when
    asked, so that building the parser costs every other command nothing."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help"))  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        from validator.build_id import version_line

        sys.stdout.write(version_line(TOOL_NAME, __version__) + "\n")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, just that command's part. Building every command's options
    imports every command module, which costs preflight (run before each start of the server) more
    than it needs: ``main`` builds the one command named, and everything for anything else (``--help``,
    a typo, no command)."""
    parser = _Parser(
        prog=TOOL_NAME,
        description="Validate an SGLang deployment of Ling-3.0-flash-fp4 on NVIDIA DGX Spark.",
    )
    parser.add_argument("--version", action=_Version, help="show the version and the build's commit; exit")
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_Parser
    )
    sub.required = True
    for name, (help_line, description) in COMMANDS.items():
        if only is None or name == only:
            _module(name).add_arguments(sub.add_parser(name, help=help_line, description=description))
    return parser


def _module(name: str) -> CommandModule:
    module: CommandModule = importlib.import_module(f"validator.commands.{name.replace('-', '_')}")
    return module


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its output is flushed here, so that a reader that went away (``| head -1``) is
    noticed while it can still be handled, not in the interpreter's final flush (exit 120 and a
    traceback-like line on stderr when output is buffered)."""
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        return _reader_went_away()
    return code


def _said(exc: ValidatorError) -> str:
    """The error's line, redacted: an input error's parts each alone (file, field, reason), so that a
    field named like a secret (``recipe.api_key``) does not make the reason after it read as its value."""
    if isinstance(exc, InputError) and exc.field is not None:
        return f"{TOOL_NAME}: " + ": ".join(redact_text(part) for part in exc.parts())
    return redact_text(f"{TOOL_NAME}: {exc}")


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    named = args_list[0] if args_list and args_list[0] in COMMANDS else None
    parser = build_parser(only=named)
    try:
        args = parser.parse_args(args_list)
        return int(_module(args.command).run(args))
    except ValidatorError as exc:
        # exit-65/69 lines quote inputs and server replies: no secret, no terminal control sequence
        said = _said(exc)
        sys.stderr.write(neutralize_controls(said) + "\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except SystemExit as exc:  # argparse inside subcommands
        return exc.code if isinstance(exc.code, int) else int(ExitCode.USAGE)
    except PermissionError as exc:  # a path this user may not read, outside any source's own answer
        where = exc.filename if exc.filename is not None else "a file"
        sys.stderr.write(
            neutralize_controls(
                redact_text(f"{TOOL_NAME}: cannot access {where}: permission denied (run as a user who may)")
            )
            + "\n"
        )
        return int(ExitCode.UNAVAILABLE)
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
