"""`spark-validate sim`: an SGLang-compatible simulated server with the real failure modes.

Thin front door over ``validator.sim``; starlette and uvicorn are imported only when the command runs, so
building the CLI parser stays cheap.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from validator.errors import InputError, UsageError
from validator.sim import scenarios
from validator.sim.extra import require_server
from validator.trusted_files import UnsafeLocation, open_private_dir

if TYPE_CHECKING:
    from validator.sim.runner import SimServer


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", action="append", default=None, metavar="NAME",
                   help="scenario name; repeat or comma-separate to combine (default healthy)")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=30000, help="listen port (default 30000, SGLang's; 0 = free port)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed for acceptance draws and text (default 0)")
    p.add_argument(
        "--speed", type=float, default=1.0, help="divide every simulated delay by this (default 1)"
    )
    p.add_argument(
        "--startup-seconds", type=float, default=3.0, help="length of the start-up phase (default 3)"
    )
    p.add_argument(
        "--api-key-file", type=Path, help="file holding the API key (never pass a key as an argument)"
    )
    p.add_argument("--log", type=Path, help="write a server log in SGLang's format to FILE")
    p.add_argument(
        "--log-style",
        choices=("dict", "dataclass", "dataclass-ranked"),
        default="dict",
        help="the SGLang build family the log imitates: dict (0.5.23's server_args={...}, the default), "
        "dataclass (server_args=ServerArgs(...), decode lines without accept rate, access lines, progress "
        "bars), dataclass-ranked (2026 builds: level and location, DP0 TP0 EP0 tags, --log-requests echoes)",
    )
    p.add_argument("--attestation", type=Path,
                   help="attestation file path (default: $SPARK_VALIDATE_ATTESTATION, else "
                        "attestation.PORT.json where the plugin would write: $RUNTIME_DIRECTORY, "
                        "/run/spark-validate or $XDG_RUNTIME_DIR/spark-validate)")  # fmt: skip
    p.add_argument("--refuse-until-ready", action="store_true",
                   help="refuse TCP connections through the load phase, as a real SGLang launcher does "
                        "(the default; kept for old scripts)")  # fmt: skip
    p.add_argument("--answer-while-loading", action="store_true",
                   help="listen at once and answer 503 until ready, instead of refusing connections "
                        "while loading as a real server does")  # fmt: skip
    p.add_argument(
        "--enable-metrics",
        action="store_true",
        help="serve /metrics, as SGLang's --enable-metrics does (default: /metrics is 404)",
    )
    p.add_argument("--api-style", default="sglang-0.5.23", metavar="FAMILY",
                   help="the HTTP shapes of one SGLang build family: sglang-0.5.23 (default), docs-2026, "
                        "legacy, aliases (see validator/sim/api_style.py)")  # fmt: skip
    p.add_argument("--collapse-after", type=float, default=None, metavar="SECONDS",
                   help="the draft breaks this many seconds after ready: production acceptance drops to "
                        "1.00 while everything else stays healthy")  # fmt: skip
    p.add_argument("--stall-after-requests", type=int, default=None, metavar="N",
                   help="the scheduler stalls once N requests were served after ready: /health 200, "
                        "requests accepted, no token (with --stall-after: the first)")  # fmt: skip
    p.add_argument("--stall-after", type=float, default=None, metavar="SECONDS",
                   help="the scheduler stalls this many seconds after ready")  # fmt: skip
    p.add_argument("--stall-for", type=float, default=None, metavar="SECONDS",
                   help="a stall ends after this many seconds and the held requests complete "
                        "(default: the scenario's; 'stall' never recovers)")  # fmt: skip
    p.add_argument("--idle-metrics-interval", type=float, default=30.0, metavar="SECONDS",
                   help="how often an idle scheduler pushes its gauges (SGLang: 30)")  # fmt: skip
    p.add_argument("--list-scenarios", action="store_true", help="list the scenarios and exit")
    p.add_argument("server_args", nargs=argparse.REMAINDER, metavar="-- SGLANG_ARGS",
                   help="SGLang server arguments added to the scenario's launch command (shown in "
                        "/server_info); with --nnodes N --node-rank R >= 1 the process is a worker node "
                        "and serves no HTTP")  # fmt: skip


def _read_key(path: Path) -> str:
    try:
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(str(path), f"cannot read API key file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(str(path), "API key file is not UTF-8 text") from None
    if not key or any(c.isspace() for c in key):
        raise InputError(str(path), "API key file must hold one non-empty token")
    return key


def run(args: argparse.Namespace) -> int:
    if args.list_scenarios:
        width = max(len(n) for n in scenarios.SCENARIOS)
        for name, entry in scenarios.SCENARIOS.items():
            expect = entry.verdict or "depends"
            if entry.fails:
                expect += " (" + ", ".join(sorted(entry.fails)) + ")"
            sys.stdout.write(f"{name:<{width}}  {entry.text}\n{'':<{width}}  pack {entry.pack}: {expect}\n")
        return 0
    if not 0 <= args.port <= 65535:
        raise UsageError(f"sim: --port {args.port} is out of range")
    if args.refuse_until_ready and args.answer_while_loading:
        raise UsageError("sim: --refuse-until-ready and --answer-while-loading contradict each other")
    if args.collapse_after is not None and not args.collapse_after >= 0:
        raise UsageError("sim: --collapse-after must be a number of seconds >= 0")
    for name in ("stall_after", "stall_for", "stall_after_requests"):
        value = getattr(args, name)
        if value is not None and not (value >= 0 and math.isfinite(value)):
            raise UsageError(f"sim: --{name.replace('_', '-')} must be a number >= 0")
    if not (args.idle_metrics_interval > 0 and math.isfinite(args.idle_metrics_interval)):
        raise UsageError("sim: --idle-metrics-interval must be a positive number of seconds")
    attestation = args.attestation  # None: the plugin's own location rules (validator.attestation.location)
    if attestation is not None:
        _refuse_unsafe_directory(attestation)

    require_server("sim")
    # here: the simulator's server (uvicorn, starlette, asyncio), which `--help` need not load
    from validator.sim.runner import map_library, serve_forever, serve_worker, worker_rank

    # NCCL is what torch maps at start; the simulator maps the file named here so that the NCCL a
    # process really loaded is read from /proc/PID/maps, as for a real server
    nccl = os.environ.get("SPARK_VALIDATE_SIM_NCCL")
    mapped = map_library(nccl) if nccl else None
    rank = worker_rank(server_args_of(args))
    if rank is not None:
        sys.stderr.write(f"spark-validate sim: worker node rank {rank}, serving no HTTP\n")
        return serve_worker()

    sim = simulator(args)
    sys.stderr.write(f"spark-validate sim: scenario {sim.scenario.name} on {args.host}:{args.port}\n")
    try:
        return serve_forever(sim)
    finally:
        del mapped


def server_args_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The SGLang arguments after ``--``, as the simulated server reports them."""
    return tuple(args.server_args[1:] if args.server_args[:1] == ["--"] else args.server_args)


def simulator(args: argparse.Namespace) -> SimServer:
    """The simulated server the parsed ``sim`` options describe, not yet started: ``run`` serves it in the
    foreground; the tests' in-process harness (tests/support/in_process.py) drives the same object
    without a socket, so both read one set of options the same way."""
    from validator.sim.runner import SimServer

    return SimServer(
        args.scenario or ["healthy"],
        seed=args.seed,
        speed=args.speed,
        startup_seconds=args.startup_seconds,
        api_key=_read_key(args.api_key_file) if args.api_key_file else None,
        log_path=args.log,
        log_style=args.log_style,
        attestation_path=args.attestation,  # None: the plugin's own location rules (attestation.location)
        host=args.host,
        port=args.port,
        extra_args=server_args_of(args),
        refuse_until_ready=not args.answer_while_loading,
        enable_metrics=args.enable_metrics,
        api_style=args.api_style,
        collapse_after_s=args.collapse_after,
        stall_after_requests=args.stall_after_requests,
        stall_after_s=args.stall_after,
        stall_for_s=args.stall_for,
        idle_metrics_s=args.idle_metrics_interval,
    )


def _refuse_unsafe_directory(attestation: Path) -> None:
    """The attestation is written once the simulated server has loaded, seconds after it listens: a
    directory the private writer refuses (``/tmp``, writable by others) is said now, as a usage error
    naming the path, not later as an internal error from the loading thread."""
    try:
        os.close(open_private_dir(attestation.parent, what="the attestation"))
    except UnsafeLocation as exc:
        raise UsageError(f"sim: --attestation {attestation}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"sim: --attestation {attestation}: {exc.strerror or exc}") from None
