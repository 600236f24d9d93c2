"""`spark-validate launch [preflight options] -- CMD...`: preflight exactly CMD, then exec it.

exec keeps the PID, so systemd and Kubernetes supervise the server itself, and the configuration that
was checked is the one that runs. A failed critical check exits 78 without exec (use
RestartPreventExitStatus=78); an inconclusive verdict (evidence unreadable) also refuses to start.
"""

from __future__ import annotations

import argparse
import os
import sys

from validator.commands.common import add_common, add_preflight_inputs


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "launch",
        help="preflight exactly CMD, then exec it (same PID)",
        description="Preflight exactly CMD and its environment, then exec it; exit 78 without exec "
        "when a critical check fails.",
    )
    add_preflight_inputs(p, with_command=False)
    add_common(p)
    p.add_argument(
        "--report-to",
        choices=("stderr", "none"),
        default="stderr",
        help="where the report goes when --output is not given (stdout belongs to the server)",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the server command")


def run(args: argparse.Namespace) -> int:
    from validator.commands.common import exit_code, pack_from, use_color
    from validator.commands.preflight import inputs_from
    from validator.errors import UsageError
    from validator.outputs import render
    from validator.preflight import PreflightInputs, run_preflight
    from validator.report import Verdict

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("launch needs the server command after '--'")
    loaded = pack_from(args)
    inputs = inputs_from(args, argv=cmd)
    assert isinstance(inputs, PreflightInputs)
    run = run_preflight(inputs, loaded, strict=args.strict)
    report = run.report
    if args.output is not None:
        from validator.commands.common import emit

        emit(report, args, loaded)
    elif args.report_to == "stderr":
        sys.stderr.write(
            render(report, args.format, color=use_color(sys.stderr), secrets=loaded.pack.secrets)
        )
        sys.stderr.flush()
    if run.malformed is not None:
        raise run.malformed
    if report.verdict is not Verdict.PASS:
        return int(exit_code(report))
    launch, program = run.facts.launch, run.facts.program
    if launch is None or program is None or program.path is None:  # launch.program would have failed
        raise UsageError(f"cannot exec {cmd[0]}: preflight did not resolve it")
    sys.stdout.flush()
    try:
        # exactly what preflight approved: the program as it resolved it, the words after any env
        # prefix, and the environment it checked
        os.execve(program.path, launch.command, launch.env)
    except OSError as exc:
        raise UsageError(f"cannot exec {program.path}: {exc.strerror or exc}") from None
    return 0  # not reached
