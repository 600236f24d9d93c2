"""Options every command shares, and how a report leaves the process (format, file, exit code)."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path

from validator import preflight_inputs
from validator.checks.registry import builtins
from validator.cli_options import add_option
from validator.errors import ExitCode, InputError, UsageError
from validator.outputs import formats, render
from validator.recipe_match import CHECK_ID as AUTO_CHECK
from validator.report import Report, Verdict
from validator.rulepack import LoadedPack, list_builtin_packs, load_pack
from validator.selection import Selection


def output_file(value: str) -> Path:
    """``--output FILE``: a file whose directory exists and can be written, checked before any work (a
    check may wait minutes for a server before it has a report to write). An unusable path is a usage
    error (exit 2), like any other bad option."""
    path = Path(value)
    with contextlib.suppress(OSError):  # /dev/null, /dev/stdout, a FIFO: written in place, if we may
        if stat.S_ISCHR(path.stat().st_mode) or stat.S_ISFIFO(path.stat().st_mode):
            if not os.access(path, os.W_OK):
                raise argparse.ArgumentTypeError(f"{value!r} is not writable")
            return path
    if not value or value.endswith("/") or path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a directory, not a file")
    parent = path.parent
    if not parent.exists():
        raise argparse.ArgumentTypeError(f"{value!r}: directory {str(parent)!r} does not exist")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{value!r}: directory {str(parent)!r} is not writable")
    return path


def add_common(parser: argparse.ArgumentParser, *, report: bool = True, auto: bool = True) -> None:
    """``--rules`` and ``--strict``; with ``report`` also ``--format`` and ``--output`` (``serve`` has no
    report to write: its findings go to ``/report``, ``/readyz`` and ``/metrics``). ``auto``: the command
    accepts ``--rules auto`` (``serve`` does not: a sidecar judges one recipe for its whole life)."""
    g = parser.add_argument_group("report")
    rules_help = (
        "rule pack: a built-in name, a file (a path: it contains '/' or ends in .yaml), or 'auto' (the "
        "shipped pack whose recipe the launch command follows; default: ling-3.0-flash-dgx-spark); the "
        "current directory is never searched"
        if auto
        else "rule pack: a built-in name or a file (a path: it contains '/' or ends in .yaml; default: "
        "ling-3.0-flash-dgx-spark); 'check --rules auto' tells which shipped pack a server follows"
    )
    g.add_argument("--rules", metavar="NAME|PATH", default=None, help=rules_help)
    if auto:
        g.add_argument(
            "--rules-dir",
            metavar="DIR",
            type=Path,
            action="append",
            default=[],
            help="with --rules auto: also choose among the packs in DIR (repeatable)",
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
            type=output_file,
            default=None,
            help="write the report here instead of stdout",
        )
    g.add_argument(
        "--check",
        metavar="ID",
        action="append",
        dest="only_checks",
        default=[],
        help="judge only this check (repeatable); the others are listed as skipped on request",
    )
    g.add_argument(
        "--skip",
        metavar="ID",
        action="append",
        dest="skip_checks",
        default=[],
        help="leave this check out (repeatable); it is listed as skipped on request, never as passed",
    )
    g.add_argument("--strict", action="store_true", help="warnings fail the verdict too")
    g.add_argument(
        "--allow-partial",
        action="store_true",
        help="accept critical checks whose evidence could not be gathered: the verdict can then pass, "
        'with "partial": true and every unproven invariant listed (without it, that is inconclusive)',
    )


def add_preflight_inputs(parser: argparse.ArgumentParser, *, with_command: bool = True) -> None:
    """The "preflight inputs" group, an option per field of ``PreflightInputs`` (its ``dest`` the field's
    name); ``launch`` leaves out the command sources (its command is its own argv)."""
    group = parser.add_argument_group("preflight inputs")
    for name, opt in preflight_inputs.options():
        if opt.group != "command" or with_command:
            add_option(group, name, opt)


def pack_from(args: argparse.Namespace) -> LoadedPack | None:
    """The pack ``--rules`` names; None for ``--rules auto`` (the job picks it from what it reads)."""
    if args.rules == "auto":
        return None
    if getattr(args, "rules_dir", None):
        raise UsageError("--rules-dir names packs for --rules auto to choose among; it needs --rules auto")
    return load_pack(args.rules)


def selection_of(args: argparse.Namespace, loaded: LoadedPack | None) -> Selection | None:
    """``--check``/``--skip`` (None: every check), every ID checked against the checks that exist (exit 2
    naming an unknown one); the pack in use counts, with ``--rules auto`` every built-in pack does."""
    check, skip = args.only_checks, args.skip_checks
    if not check and not skip:
        return None
    # every check ID a run can have: the builtins, every built-in pack's, and the pack in use's (a pack file
    # may define checks of its own with ``expect``)
    known = set(builtins()) | {AUTO_CHECK} | {c.id for c in (loaded.pack.checks if loaded else ())}
    for path in list_builtin_packs():
        known.update(c.id for c in load_pack(str(path)).pack.checks)
    for flag, ids in (("--check", check), ("--skip", skip)):
        for check_id in ids:
            if check_id not in known:
                raise UsageError(
                    f"{flag} {check_id}: no check has this ID (`spark-validate rules list` lists them)"
                )
    both = sorted(set(check) & set(skip))
    if both:
        raise UsageError(f"--check and --skip both name {', '.join(both)}")
    return Selection(only=frozenset(check) if check else None, skip=frozenset(skip))


def use_color(stream: object) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def emit(report: Report, args: argparse.Namespace, loaded: LoadedPack) -> int:
    """Render the report in the chosen format to stdout or --output, and return the exit code."""
    out = args.output
    color = out is None and args.format == "text" and use_color(sys.stdout)
    write_out(out, render(report, args.format, color=color, secrets=loaded.pack.secrets))
    return int(exit_code(report))


def write_out(out: Path | None, text: str) -> None:
    """The rendered report to stdout, or to ``--output`` (:func:`write_atomically`)."""
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_atomically(out, text)


def write_atomically(out: Path, text: str) -> None:
    """Write ``out`` through an ``mkstemp`` temporary in its own directory, then rename it over: a planted
    file or symlink at ``out`` is replaced, never written through (a fixed ``FILE.tmp`` let anyone who can
    write the directory make root overwrite any file). Mode as a plain ``open()`` would give (umask)."""
    try:
        mode = os.lstat(out).st_mode
    except OSError:
        mode = None
    if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        _write_stream(out, text, follow=False)  # /dev/null, a FIFO: written, never replaced
        return
    if mode is not None and stat.S_ISLNK(mode) and _private_link(out):
        _write_stream(out, text, follow=True)  # /dev/stdout, or a link of one's own: written through
        return
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
        raise UsageError(f"--output {out}: not a regular file (a directory, socket or block device)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:  # the directory went away or became unwritable since the options were read
        raise UsageError(f"--output {out}: cannot write the report: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            mask = os.umask(0)
            os.umask(mask)
            os.fchmod(fh.fileno(), 0o666 & ~mask)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from None
        raise


def _private_link(out: Path) -> bool:
    """A link that only root or this user could have made: its directory is theirs and writable by no one
    else, as ``/dev`` is (``--output /dev/stdout``). It is written through. A link in a directory others
    can write is replaced, never followed: it may have been planted."""
    try:
        parent = os.stat(out.parent)
        os.stat(out)  # a dangling link is replaced
    except OSError:
        return False
    return parent.st_uid in (0, os.geteuid()) and not parent.st_mode & 0o022


def _write_stream(out: Path, text: str, *, follow: bool) -> None:
    """A character device or FIFO named by ``--output`` (or a private link) is written as ``>`` would write
    it: replacing it (as root, ``--output /dev/null``) would turn the device into a regular file for every
    program on the host."""
    flags = os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    flags |= 0 if follow else os.O_NOFOLLOW
    try:
        fd = os.open(out, flags)
    except OSError as exc:  # a FIFO with no reader: ENXIO, rather than waiting for one
        raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.set_blocking(fh.fileno(), True)
            fh.write(text)
    except OSError as exc:
        raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from None


def exit_code(report: Report) -> ExitCode:
    return {
        Verdict.PASS: ExitCode.OK,
        Verdict.FAIL: ExitCode.CONFIG,
        Verdict.INCONCLUSIVE: ExitCode.UNAVAILABLE,
    }[report.verdict]
