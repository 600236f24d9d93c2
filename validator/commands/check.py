"""`spark-validate check --url URL`: live checks against a running server, with the acceptance probe."""

from __future__ import annotations

import argparse
import json
import pwd
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, TextIO

from validator.commands.common import (
    add_common,
    add_preflight_inputs,
    emit,
    exit_code,
    pack_from,
    selection_of,
    write_out,
)
from validator.errors import ExitCode, UsageError, ValidatorError
from validator.live_inputs import add_live_inputs, live_inputs_from, seconds
from validator.outputs import render
from validator.preflight_inputs import PreflightInputs, given, inputs_from, options
from validator.rulepack import load_pack
from validator.sources.host.server_command import use_stand_ins

if TYPE_CHECKING:
    from validator.sources.host.server_processes import Ignored
    from validator.sources.server.readiness import Progress


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_live_inputs(p)
    g = p.add_argument_group(
        "running servers",
        "With no --url, the SGLang servers running on this host are found from /proc and each is judged by "
        "its real argv and environment as well as over HTTP (one report each). The preflight inputs below "
        "then add what the process does not show (--model-dir, --sglang-root), and a declaration (--unit, "
        "--script, --compose, --docker-cmd, --launch-cmd) is compared with what runs (launch.drift).",
    )
    g.add_argument("--pid", type=_pid, metavar="PID", help="judge this server process (or the one above it)")
    g.add_argument(
        "--deadline",
        type=seconds,
        metavar="SECONDS",
        help="judge the servers at once and answer within this long: a server not judged by then is "
        "inconclusive, a failure found is still exit 78 (default: one live check's deadline plus 30 s)",
    )
    add_preflight_inputs(p)
    add_common(p)


def _pid(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a process ID, got {value!r}")
    return int(value)


class TerminalProgress:
    """A live status line on a terminal; a line per phase change otherwise (logs)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream  # at the call: a caller may have redirected it
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.dirty = False

    def __call__(self, progress: Progress) -> None:
        from validator.sources.server.readiness import format_progress

        line = format_progress(progress)
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
            self.dirty = True
        elif progress.changed:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.dirty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    # here: the live job, with httpx and asyncio (launch imports this module)
    import asyncio

    from validator.live import run_live

    process_inputs = given(args)
    if args.url is None or args.pid is not None:
        return _run_processes(args)
    if args.deadline is not None:
        raise UsageError("check: --deadline bounds the judging of running servers: leave out --url")
    if process_inputs:
        flag = process_inputs[0]
        raise UsageError(
            f"check: {flag} describes a running server's process: leave out --url (or add --pid)"
        )
    loaded = pack_from(args)
    selection = selection_of(args, loaded)
    progress = TerminalProgress()
    inputs = live_inputs_from(args, on_progress=progress, selection=selection)
    try:
        result = asyncio.run(run_live(inputs, loaded, strict=args.strict, pack_dirs=args.rules_dir))
    finally:
        progress.done()
    assert result.pack is not None
    return emit(result.report, args, result.pack)


MAX_IGNORED_SHOWN = 20


def _declared_user(declared: PreflightInputs | None) -> int | None:
    """The UID a declaration says the server runs as (a unit's ``User=``, read through the trusted-file
    rule): the declared server user, whose processes are judged as ``--server-user`` would make them.
    None when nothing is declared, it names no user, or it cannot be read (``launch.drift`` says why)."""
    if declared is None:
        return None
    from validator.sources.launch.source import read_launcher  # the launch readers: only with a declaration

    try:
        name = read_launcher(replace(declared, base_env={}))[0].parsed().user
    except ValidatorError:
        return None
    if not name:
        return None
    try:
        return int(name) if name.isascii() and name.isdigit() else pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def _say_ignored(ignored: list[Ignored]) -> None:
    """One stderr line per process that looks like a server and is not judged, with why."""
    for item in ignored[:MAX_IGNORED_SHOWN]:
        sys.stderr.write(f"check: ignored {item.describe()}\n")
    if len(ignored) > MAX_IGNORED_SHOWN:  # a host full of look-alikes must not flood the operator's terminal
        sys.stderr.write(
            f"check: ignored {len(ignored) - MAX_IGNORED_SHOWN} more processes that look like servers\n"
        )
    sys.stderr.flush()


def _run_processes(args: argparse.Namespace) -> int:
    """No ``--url`` (or ``--pid``): the servers running here, one report each."""
    import asyncio

    from validator.running import RunningInputs, judge_all

    use_stand_ins()  # a process standing in for SGLang is judged as the server it stands in for
    loaded = pack_from(args) or load_pack(None)
    if args.rules == "auto":
        raise UsageError(
            "check: --rules auto judges one server over --url; name the pack for running servers"
        )
    declared: PreflightInputs | None = None
    if given(args, "command"):
        built = inputs_from(args)
        declared = replace(built, model_dir=None, sglang_root=None, kube_manifest=None)
    host = inputs_from(argparse.Namespace(**{n: getattr(args, n) for n, _ in options("host")}))
    # url "" unless given: each server's own (--url with --pid: that)
    live = live_inputs_from(args, selection=selection_of(args, loaded))
    declared_user = _declared_user(declared)
    if declared_user is not None and declared_user not in live.server_uids:
        live = replace(live, server_uids=(*live.server_uids, declared_user))
    inputs = RunningInputs(live=live, host=host, declared=declared)
    results = asyncio.run(
        judge_all(
            inputs,
            loaded,
            pid=args.pid,
            strict=args.strict,
            allow_partial=args.allow_partial,
            deadline_s=args.deadline,
            on_ignored=_say_ignored,
        )
    )
    reports = [r.report for r in results]
    if len(reports) > 1 and args.format not in ("text", "json"):
        raise UsageError(
            f"check: {len(reports)} servers are running; --format {args.format} holds one report: pick one "
            "with --pid (" + ", ".join(r.report.target or "" for r in results) + ")"
        )
    if args.format == "json" and len(reports) > 1:
        parts = [json.loads(render(r, "json", secrets=loaded.pack.secrets)) for r in reports]
        text = json.dumps(parts, indent=2) + "\n"
    else:
        text = "\n".join(render(r, args.format, secrets=loaded.pack.secrets) for r in reports)
    write_out(args.output, text)
    codes = [exit_code(r) for r in reports]
    return int(next((w for w in (ExitCode.CONFIG, ExitCode.UNAVAILABLE) if w in codes), ExitCode.OK))
