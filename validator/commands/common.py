"""Options every command shares, and how a report leaves the process (format, file, exit code)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from validator.errors import ExitCode, InputError
from validator.report import Report, Verdict
from validator.rulepack import LoadedPack, load_pack


def add_common(parser: argparse.ArgumentParser, *, report: bool = True) -> None:
    """``--rules`` and ``--strict``; with ``report`` also ``--format`` and ``--output`` (``serve`` has no
    report to write: its findings go to ``/report``, ``/readyz`` and ``/metrics``)."""
    from validator.outputs import formats

    g = parser.add_argument_group("report")
    g.add_argument(
        "--rules",
        metavar="NAME|PATH",
        default=None,
        help=(
            "rule pack: a built-in name, a YAML file, or 'auto' (the shipped pack whose recipe the launch "
            "command follows; default: ling-3.0-flash-dgx-spark)"
        ),
    )
    if report:
        known = formats()
        g.add_argument(
            "--format",
            choices=list(known),
            default="text",
            help="report format: " + "; ".join(f"{f.name}: {f.description}" for f in known.values()),
        )
        g.add_argument(
            "--output",
            metavar="FILE",
            type=Path,
            default=None,
            help="write the report here instead of stdout",
        )
    g.add_argument("--strict", action="store_true", help="warnings fail the verdict too")
    g.add_argument(
        "--allow-partial",
        action="store_true",
        help="accept critical checks whose evidence could not be gathered: the verdict can then pass, "
        'with "partial": true and every unproven invariant listed (without it, that is inconclusive)',
    )


def add_preflight_inputs(parser: argparse.ArgumentParser, *, with_command: bool = True) -> None:
    g = parser.add_argument_group("preflight inputs")
    if with_command:
        g.add_argument("--launch-cmd", metavar="STRING", help="the server's launch command, as one string")
        g.add_argument(
            "--launch-args-file",
            metavar="FILE",
            type=Path,
            help="a file holding the launch command or only its arguments",
        )
        g.add_argument(
            "--unit",
            metavar="FILE",
            type=Path,
            help="a systemd unit: ExecStart, Environment=, EnvironmentFile=",
        )
        g.add_argument(
            "--script",
            metavar="FILE",
            type=Path,
            help="a launcher shell script (start.sh), read statically, never run",
        )
        g.add_argument(
            "--docker-cmd",
            metavar="STRING",
            help="a `docker run ...` (or podman run) command line: its command, -e, --env-file, -v",
        )
        g.add_argument(
            "--compose",
            metavar="FILE",
            type=Path,
            help="a Compose file: the server's service (command, environment, env_file, volumes)",
        )
        g.add_argument("--service", metavar="NAME", help="the Compose service that runs the server")
    g.add_argument(
        "--env-file",
        metavar="FILE",
        type=Path,
        action="append",
        default=[],
        help="systemd EnvironmentFile syntax; repeatable (the process environment counts too); with --unit, "
        "read in place of the unit's EnvironmentFile= (to check a unit before installing its file)",
    )
    g.add_argument("--model-dir", metavar="DIR", type=Path, help="the checkpoint directory")
    g.add_argument(
        "--sglang-root",
        metavar="DIR",
        type=Path,
        help="read this sglang package directory instead of locating the launch command's",
    )
    g.add_argument("--service-user", metavar="USER", help="the user the server runs as (cache writability)")
    g.add_argument(
        "--kube-manifest",
        metavar="FILE",
        type=Path,
        help="a Kubernetes manifest whose startupProbe bounds the server's start (host.start_budget)",
    )
    g.add_argument("--kube-container", metavar="NAME", help="the SGLang container in --kube-manifest")


def pack_from(args: argparse.Namespace) -> LoadedPack | None:
    """The pack ``--rules`` names; None for ``--rules auto`` (the job picks it from what it reads)."""
    if args.rules == "auto":
        return None
    return load_pack(args.rules)


def use_color(stream: object) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def emit(report: Report, args: argparse.Namespace, loaded: LoadedPack) -> int:
    """Render the report in the chosen format to stdout or --output, and return the exit code."""
    from validator.outputs import render

    out = args.output
    color = out is None and args.format == "text" and use_color(sys.stdout)
    text = render(report, args.format, color=color, secrets=loaded.pack.secrets)
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_atomically(out, text)
    return int(exit_code(report))


def write_atomically(out: Path, text: str) -> None:
    """Write ``out`` through an unpredictable temporary file in its own directory, then rename it over.

    ``mkstemp`` creates the temporary with ``O_CREAT | O_EXCL`` (a planted file or symlink of that name
    cannot exist), and the rename replaces ``out`` itself: a symlink planted at ``out`` is replaced, the
    file it pointed to is never written (a fixed ``FILE.tmp`` let anyone who can write the directory make
    root overwrite any file). The report is readable as a plain ``open()`` would have made it (umask)."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            mask = os.umask(0)
            os.umask(mask)
            os.fchmod(fh.fileno(), 0o666 & ~mask)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def exit_code(report: Report) -> ExitCode:
    return {
        Verdict.PASS: ExitCode.OK,
        Verdict.FAIL: ExitCode.CONFIG,
        Verdict.INCONCLUSIVE: ExitCode.UNAVAILABLE,
    }[report.verdict]
