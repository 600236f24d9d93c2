"""`spark-validate launch [preflight options] -- CMD...`: preflight exactly CMD, then exec it.

exec keeps the PID, so systemd and Kubernetes supervise the server itself, and the configuration that
was checked is the one that runs. A failed critical check exits 78 without exec (use
RestartPreventExitStatus=78); an inconclusive verdict (evidence unreadable) also refuses to start.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from validator.commands.common import (
    add_common,
    add_preflight_inputs,
    emit,
    exit_code,
    pack_from,
    selection_of,
    use_color,
)
from validator.errors import UsageError, ValidatorError
from validator.outputs import render
from validator.preflight import run_preflight
from validator.preflight_inputs import inputs_from
from validator.redact import collect_secrets, redact_text
from validator.report import CheckResult, Report, Severity, Status, Verdict
from validator.sources.host.server_command import use_stand_ins
from validator.sources.launch.state import LaunchState, state_path, write_state
from validator.sources.run_as import of_files
from validator.validation import dump


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_preflight_inputs(p, with_command=False)
    add_common(p)
    p.add_argument(
        "--report-to",
        choices=("stderr", "none"),
        default="stderr",
        help="where the report goes when --output is not given (stdout belongs to the server)",
    )
    p.add_argument(
        "--termination-log",
        metavar="FILE",
        help="when refusing to start, write the blocking findings here, failing checks first, within 4 KB "
        "(Kubernetes: /dev/termination-log, shown by kubectl describe pod)",
    )
    p.add_argument(
        "--state-file",
        metavar="FILE",
        help="write this launch's verdict here every time (exec'd, or refused with its exit code), for the "
        "sidecar to export (serve --launch-state); default $SPARK_VALIDATE_LAUNCH_STATE, else none",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the server command")


TERMINATION_CAP = 4096  # the kubelet keeps at most 4096 bytes of a termination message


def termination_message(report: Report, secret_keys: Iterable[str], malformed: str | None = None) -> str:
    """Why the server was not started, shortest first: the verdict naming each blocking check, then each
    one's finding and remedy. A log tail (FallbackToLogsOnError keeps the last 2 KB) cuts the failing lines
    off a full report; this fits them in the kubelet's 4 KB."""
    secrets = collect_secrets(dump(report), secret_keys)
    # failures before what could not be proven
    blocking = sorted(_blocking(report), key=lambda c: c.status is not Status.FAIL)
    names = ", ".join(f"{c.id} ({c.status.value})" for c in blocking) or "no critical check blocked"
    lines = [f"spark-validate refused to start the server: {report.verdict.value.upper()}: {names}"]
    if malformed:
        lines.append(f"malformed input: {malformed}")
    for c in blocking:
        lines.append(f"{c.id}: {c.message}" + (f" Remedy: {c.remedy}" if c.remedy else ""))
    data = redact_text("\n".join(lines) + "\n", secrets).encode("utf-8")
    if len(data) > TERMINATION_CAP:
        data = data[: TERMINATION_CAP - 4] + b"...\n"
    return data.decode("utf-8", "ignore")


def _blocking(report: Report) -> list[CheckResult]:
    """The critical checks that failed or could not be proven, unwaived: what refuses the start."""
    return [
        c
        for c in report.checks
        if c.severity is Severity.CRITICAL and c.status in (Status.FAIL, Status.ERROR) and c.waived is None
    ]


def _write_termination_log(path: str, text: str) -> None:
    """Written in place: /dev/termination-log is a file the kubelet bind-mounts, not a directory entry
    that a rename could replace. A failure to write it must not hide the refusal itself."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        sys.stderr.write(f"spark-validate: cannot write --termination-log {path}: {exc.strerror or exc}\n")


def _record(args: argparse.Namespace, verdict: str, code: int, report: Report | None, reason: str) -> None:
    """The launch state file (``sources/launch/state``), when one is configured; a failure to write it is
    one line on stderr, never a reason to refuse or a hidden refusal."""
    path = state_path(getattr(args, "state_file", None))
    if path is None:
        return
    blocking: tuple[str, ...] = ()
    if report is not None and code != 0:  # a start that went ahead (--allow-partial) was blocked by nothing
        blocking = tuple(c.id for c in _blocking(report))
    pack = report.rule_pack if report is not None else None
    state = LaunchState(time.time(), verdict, code, code == 0, blocking, pack, reason.splitlines()[0][:1000])
    problem = write_state(path, state)
    if problem is not None:
        sys.stderr.write(f"spark-validate: {problem}\n")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ValidatorError as exc:  # malformed input (65), an exec that cannot happen (2): still a refusal
        _record(args, "error", int(exc.exit_code), None, str(exc) or type(exc).__name__)
        raise


def _refuse_others_program(
    path: Path, interpreter: str | None, env: Mapping[str, str], cwd: Path | None
) -> None:
    """``launch`` execs the server as whoever runs it: never another user's program (or interpreter, or
    what its PYTHONPATH/LD_PRELOAD names) with this user's privileges. Run ``launch`` as that user (the
    unit's ``User=``), or own the files (SECURITY.md, "Processes the tool runs")."""
    who = of_files([path, interpreter, cwd], env, cwd)
    if who is None or (not isinstance(who, str) and who.is_me()):
        return
    why = who if isinstance(who, str) else f"{path} runs files of {who.name} (UID {who.uid})"
    raise UsageError(
        f"launch: not exec'ing {path} as UID {os.geteuid()}: {why}; run launch as that user (the unit's "
        "User=) or keep the program's files root's or this user's"
    )


def _run(args: argparse.Namespace) -> int:
    use_stand_ins()  # `launch -- CMD` may exec a program standing in for SGLang
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else list(args.cmd)
    if not cmd:
        raise UsageError("launch needs the server command after '--'")
    loaded = pack_from(args)
    inputs = inputs_from(args, argv=cmd, selection=selection_of(args, loaded))
    run = run_preflight(
        inputs, loaded, strict=args.strict, allow_partial=args.allow_partial, pack_dirs=args.rules_dir
    )
    report = run.report
    loaded = run.pack
    if args.output is not None:
        emit(report, args, loaded)
    elif args.report_to == "stderr":
        sys.stderr.write(
            render(report, args.format, color=use_color(sys.stderr), secrets=loaded.pack.secrets)
        )
        sys.stderr.flush()
    if args.termination_log and (run.malformed is not None or report.verdict is not Verdict.PASS):
        malformed = str(run.malformed) if run.malformed is not None else None
        _write_termination_log(
            args.termination_log, termination_message(report, loaded.pack.secrets, malformed)
        )
    if run.malformed is not None:
        raise run.malformed
    if report.verdict is not Verdict.PASS:
        code = int(exit_code(report))
        _record(args, report.verdict.value, code, report, termination_message(report, loaded.pack.secrets))
        return code
    launch, program = run.facts.launch, run.facts.program
    if launch is None or program is None or program.path is None:  # launch.program would have failed
        raise UsageError(f"cannot exec {cmd[0]}: preflight did not resolve it")
    _refuse_others_program(program.path, program.interpreter, launch.env, launch.working_directory)
    _record(args, report.verdict.value, 0, report, "started")
    sys.stdout.flush()
    try:
        # exactly what preflight approved: the program as it resolved it, the words after any env
        # prefix, and the environment it checked
        os.execve(program.path, launch.command, launch.env)
    except OSError as exc:
        raise UsageError(f"cannot exec {program.path}: {exc.strerror or exc}") from None
    return 0  # not reached
