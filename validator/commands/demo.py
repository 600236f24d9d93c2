"""`spark-validate demo`: the whole pipeline in a few seconds, with no GPU, no model and no network.

Starts the simulator in-process, healthy and with the integration trap, checks both with the real live
checks and probe, and shows them side by side. Exit 0 when the healthy server passes and each scenario is
judged as the scenario table says (``flaky-5xx``, transport trouble only, is never failed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from validator.commands.common import exit_code, use_color
from validator.errors import ExitCode
from validator.outputs import render
from validator.report import Report, Verdict
from validator.rulepack import load_pack
from validator.sim.extra import require_server

# Simulator scenarios to contrast with healthy. All but the transport faults (TRANSPORT) are
# misconfigurations or misbehaviour the validator must not pass.
TRANSPORT = frozenset({"flaky-5xx"})
FAULTS = (
    "draft-head-weight-only",
    "backend-auto",
    "fp32-head",
    "fp8-and-fp32",
    "fp8-ignored",
    "no-spec",
    "degenerate-output",
    "crash-after-ready",
    "flaky-5xx",
    "malformed-json",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broken",
        default="draft-head-weight-only",
        choices=FAULTS,
        metavar="SCENARIO",
        help=f"the faulty scenario to contrast with healthy: {', '.join(FAULTS)} (default: %(default)s)",
    )
    p.add_argument("--speed", type=float, default=20.0, help="simulator speed-up factor (default 20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the two runs side by side; json: both reports, as --format json renders each",
    )


def run(args: argparse.Namespace) -> int:
    require_server("demo")
    # here: the live side (httpx) and the simulator (starlette, uvicorn, pydantic), which `--help` need not
    # load
    import asyncio
    import logging

    from validator.live import LiveInputs, run_live
    from validator.sim.runner import SimServer

    # The in-process simulator's web server logs a traceback when a crashed scenario is shut down;
    # the demo shows the validator's view, not the simulator's internals.
    logging.getLogger("uvicorn.error").addFilter(lambda record: record.levelno < logging.ERROR)
    loaded = load_pack(None)
    reports: dict[str, Report] = {}
    with tempfile.TemporaryDirectory(prefix="spark-validate-demo-", dir=_private_base()) as tmp:
        for scenario in ("healthy", args.broken):
            att = Path(tmp) / f"{scenario}.attestation.json"
            log = Path(tmp) / f"{scenario}.log"
            with SimServer(
                scenario,
                seed=args.seed,
                speed=args.speed,
                startup_seconds=1.0,
                log_path=log,
                attestation_path=att,
            ) as sim:
                inputs = LiveInputs(url=sim.url, attestation=att, log=log, wait_s=30.0)
                reports[scenario] = asyncio.run(run_live(inputs, loaded)).report
    healthy, broken = reports["healthy"], reports[args.broken]
    if args.format == "json":
        both = {k: json.loads(render(v, "json", secrets=loaded.pack.secrets)) for k, v in reports.items()}
        sys.stdout.write(json.dumps(both, indent=2) + "\n")
    else:
        sys.stdout.write(_side_by_side(healthy, broken, args.broken, use_color(sys.stdout)))
    if healthy.verdict is not Verdict.PASS:
        return int(exit_code(healthy))
    if args.broken in TRANSPORT:
        if broken.verdict is Verdict.FAIL:  # transient 503s blamed on the configuration: a bug
            sys.stderr.write(f"spark-validate demo: {args.broken} was failed for the server's 503s\n")
            return int(ExitCode.INTERNAL)
        return int(ExitCode.OK)
    if broken.verdict is Verdict.PASS:  # the fault went unnoticed: a bug in spark-validate
        sys.stderr.write(f"spark-validate demo: {args.broken} was not caught\n")
        return int(ExitCode.INTERNAL)
    return int(ExitCode.OK)


def _private_base() -> str:
    """Where the demo's attestation can be trusted: a directory chain no other user can write
    (``attestation.trust`` refuses anything under a world-writable ``/tmp``, sticky or not). The user's
    runtime directory where there is one, else their cache directory."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir() and not Path(runtime).stat().st_mode & 0o022:
        return runtime
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spark-validate"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(base)


def _side_by_side(healthy: Report, broken: Report, broken_name: str, color: bool) -> str:
    paint = {"pass": "32", "fail": "1;31", "warn": "33", "skip": "2", "error": "35", "info": "36"}

    def cell(status: str) -> str:
        text = f"{status.upper():<6}"
        return f"\x1b[{paint[status]}m{text}\x1b[0m" if color else text

    width = max(len(c.id) for c in healthy.checks)
    out = [
        "spark-validate demo: the bundled SGLang simulator, checked twice (no GPU, no model, no network)",
        "",
        f"  {'check':<{width}}  {'healthy':<8}{broken_name}",
    ]
    broken_by_id = {c.id: c for c in broken.checks}
    for c in healthy.checks:
        b = broken_by_id.get(c.id)
        out.append(f"  {c.id:<{width}}  {cell(c.status.value)}  {cell(b.status.value) if b else '-'}")
    for name, rep in (("healthy", healthy), (broken_name, broken)):
        p = rep.probe
        if p is not None and p.accept_length is not None:
            ci = f" [{p.accept_length_ci[0]:.2f}, {p.accept_length_ci[1]:.2f}]" if p.accept_length_ci else ""
            out.append(
                f"  {name}: accept length {p.accept_length:.2f}{ci} from {p.completion_tokens} tokens "
                f"in {p.requests} request(s); decided by {p.decided_by}"
            )
    out.append("")
    out.append(f"What the validator found on {broken_name}:")
    for c in broken.checks:
        if c.status.value in ("fail", "error"):
            out.append(f"  {c.id}: {c.message}")
            if c.why:
                out.append(f"      why:    {c.why}")
            if c.remedy:
                out.append(f"      remedy: {c.remedy}")
    if broken_name in TRANSPORT:
        out.append("")
        out.append(
            f"{broken_name} answers transient 503s; its configuration is the healthy one. The checks retry "
            "(--retries), so a pass is right, and so is inconclusive when a retry budget runs out; a fail "
            "would blame the configuration for the server's trouble."
        )
    out.append("")
    out.append(
        f"verdicts: healthy {healthy.verdict.value.upper()}, {broken_name} {broken.verdict.value.upper()}"
    )
    return "\n".join(out) + "\n"
