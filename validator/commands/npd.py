"""`spark-validate npd`: a node-problem-detector custom plugin, so a failed invariant becomes a NodeCondition.

NPD (pkg/custompluginmonitor/plugin/plugin.go) kills the plugin after ``timeout``, keeps at most
``max_output_length`` bytes and maps exit 0 OK, 1 problem, else unknown. So: judge the running servers as
``check`` with no ``--url`` does, with no probe and no waiting; print one ASCII line, failures first; exit
0 when all pass (unproven accepted unless ``--require-proof``), 1 when a critical check fails anywhere
(never lost to a deadline), 2 when nothing was found or judged; the timeout is enforced below NPD's.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from validator.commands.common import add_common, pack_from
from validator.errors import UsageError, ValidatorError
from validator.live_inputs import add_server_user, live_inputs_from, seconds
from validator.preflight_inputs import PreflightInputs
from validator.redact import neutralize_controls, redact_text
from validator.report import Report, Severity, Status, Verdict
from validator.rulepack import load_pack
from validator.sources.host.server_command import use_stand_ins

if TYPE_CHECKING:  # the live side loads in the worker, within --timeout (_judge)
    from validator.commands.npd_state import ProgressStore
    from validator.live import LiveResult
    from validator.sources.host.server_processes import Ignored, ServerProcess

OK, PROBLEM, UNKNOWN = 0, 1, 2
NPD_MAX_OUTPUT = 80  # NPD's default max_output_length


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("node-problem-detector")
    g.add_argument("--pid", type=int, metavar="PID", help="judge this server process only")
    g.add_argument(
        "--timeout",
        type=seconds,
        default=4.0,
        metavar="SECONDS",
        help="finish within this long, exit 2 otherwise (default 4: under NPD's default 5 s timeout)",
    )
    g.add_argument(
        "--max-output-length",
        type=int,
        default=NPD_MAX_OUTPUT,
        metavar="N",
        help="the message's length in bytes: the pluginConfig's max_output_length (default 80)",
    )
    g.add_argument(
        "--require-proof",
        action="store_true",
        help="a critical check whose evidence could not be gathered is unknown (exit 2), not OK",
    )
    g.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="keep each server's last /metrics reading here between runs, so that two runs tell a stall "
        "(default $STATE_DIRECTORY/npd, else /var/lib/spark-validate/npd as root, else "
        "$XDG_STATE_HOME/spark-validate/npd); a directory of this user's, mode 0700",
    )
    g.add_argument("--no-state", action="store_true", help="keep nothing between runs (a stall is not seen)")
    g.add_argument(
        "--stall-after",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="server.progress: work waiting with nothing completed over runs this far apart is a stall "
        "(default 30)",
    )
    add_server_user(g)
    add_common(p, report=False, auto=False)


def _fit(text: str, limit: int) -> str:
    """One printable ASCII line of at most ``limit`` bytes, cut with ``...`` when longer."""
    line = "".join(c if 32 <= ord(c) < 127 else " " for c in text)
    line = " ".join(line.split())
    limit = max(limit, 8)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _pid_of(target: str) -> str:
    return target.split(" ", 2)[1] if target.startswith("PID ") else "?"


def summarize(
    reports: list[Report], unfinished: Sequence[str] = (), timeout_s: float = 0.0
) -> tuple[int, str]:
    """(exit status, message) for the reports of the servers judged; ``unfinished``: the PIDs of servers
    whose check did not finish within ``timeout_s``. A failure found is a problem (1) whatever did not
    finish: a server that never answers cannot hide another's failure."""
    failed: list[str] = []
    unknown: list[str] = []
    for report in reports:
        pid = _pid_of(str(report.target or ""))
        critical = [c for c in report.checks if c.severity is Severity.CRITICAL and c.waived is None]
        failed += [f"{c.id}@{pid}" for c in critical if c.status is Status.FAIL]
        if report.verdict is Verdict.INCONCLUSIVE:
            unknown += [f"{c.id}@{pid}" for c in critical if c.status is Status.ERROR]
    late = f"; {len(unfinished)} did not finish within {timeout_s:g} s" if unfinished else ""
    if failed:
        return PROBLEM, "FAIL " + " ".join(dict.fromkeys(failed)) + late
    if unfinished:
        return UNKNOWN, f"UNKNOWN did not finish within {timeout_s:g} s: PID " + ", ".join(unfinished)
    if unknown:
        return UNKNOWN, "UNKNOWN not proven: " + " ".join(dict.fromkeys(unknown))
    partial = sum(len(r.coverage.not_proven) for r in reports if r.coverage is not None)
    note = f" ({partial} critical unproven)" if partial else ""
    return OK, f"OK {len(reports)} server(s) pass{note}"


class _Progress:
    """What the worker has found so far, read by the main thread at the deadline: the servers whose
    checks started, the reports of those that finished, or the error that ended the run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers: list[str] = []  # PIDs, in discovery order
        self.reports: dict[str, Report] = {}  # PID -> report
        self.error: tuple[int, str] | None = None
        self.ignored: list[Ignored] = []  # processes that look like servers and are not judged, with why

    def ignore(self, items: list[Ignored]) -> None:
        with self.lock:
            self.ignored.extend(items)

    def started(self, server: ServerProcess) -> None:
        with self.lock:
            self.servers.append(str(server.process.pid))

    def finished(self, server: ServerProcess, result: LiveResult) -> None:
        with self.lock:
            self.reports[str(server.process.pid)] = result.report

    def outcome(self, timeout_s: float) -> tuple[int, str]:
        with self.lock:
            if self.error is not None:
                return self.error
            if not self.servers:
                return UNKNOWN, f"UNKNOWN did not finish within {timeout_s:g} s"
            late = [pid for pid in self.servers if pid not in self.reports]
            done = [self.reports[pid] for pid in self.servers if pid in self.reports]
            status, message = summarize(done, late, timeout_s)
            if self.ignored:  # another user's, or not listening on its port: never judged
                pids = " ".join(f"PID {i.pid}" for i in self.ignored[:3])
                message += f" ({len(self.ignored)} ignored: {pids})"
            return status, message


def _judge(args: argparse.Namespace, progress: _Progress, store: ProgressStore | None = None) -> None:
    # here, in the worker: the live side (httpx, asyncio) loads within --timeout, which the main thread
    # enforces from the moment it starts this thread
    import asyncio

    from validator.running import RunningInputs, judge_all

    try:
        use_stand_ins()
        loaded = pack_from(args) or load_pack(None)
        budget = max(0.5, args.timeout)
        live = live_inputs_from(  # --server-user from the command line; the rest decided here
            args,
            url="",
            wait_s=0.0,
            probe=False,
            retries=0,
            connect_timeout=min(1.0, budget / 4),
            read_timeout=budget / 2,
            allow_partial=not args.require_proof,
        )
        inputs = RunningInputs(
            live=live, host=PreflightInputs(), watch_for=store.watch_for if store is not None else None
        )
        asyncio.run(
            judge_all(
                inputs,
                loaded,
                pid=args.pid,
                strict=args.strict,
                allow_partial=not args.require_proof,
                deadline_s=budget,  # the main thread answers at --timeout with what finished by then
                on_server=progress.started,
                on_result=progress.finished,
                on_ignored=progress.ignore,
            )
        )
    except ValidatorError as exc:
        progress.error = (UNKNOWN, f"UNKNOWN {exc}")
    except Exception as exc:  # a bug: NPD's unknown, never a traceback in the node's condition
        progress.error = (UNKNOWN, f"UNKNOWN internal error: {type(exc).__name__}: {exc}")


def _store(args: argparse.Namespace) -> ProgressStore | None:
    """The state kept between runs (``npd_state``), loaded; None with ``--no-state`` or nowhere to keep
    it. A file refused is said on stderr (NPD keeps only stdout) and this run's replaces it."""
    from validator.commands.npd_state import ProgressStore, default_dir

    if not args.stall_after > 0:
        raise UsageError("npd: --stall-after must be a positive number of seconds")
    if args.no_state:
        return None
    directory = args.state_dir or default_dir()
    if directory is None:
        sys.stderr.write("spark-validate npd: no state directory (give --state-dir): a stall is not seen\n")
        return None
    store = ProgressStore(directory.absolute(), args.stall_after)
    if (why := store.load()) is not None:
        _said(why)
    return store


def _said(why: str) -> None:
    """One stderr line, whatever a path or an error in it holds."""
    sys.stderr.write(f"spark-validate npd: {neutralize_controls(why)}\n")


def run(args: argparse.Namespace) -> int:
    """Judge the servers at once in a worker thread and answer at ``--timeout`` at the latest: a check
    that cannot finish (a server that accepts and never answers, a slow disk) must not outlive the
    plugin's budget, and must not hide what the other servers' checks found by then. Out of time, the
    line says which did not finish and the process exits at once, without waiting for the thread."""
    progress = _Progress()
    store = _store(args)
    worker = threading.Thread(target=_judge, args=(args, progress, store), daemon=True, name="npd")
    worker.start()
    worker.join(max(0.1, args.timeout))
    status, message = progress.outcome(args.timeout)
    if store is not None and (why := store.save()) is not None:
        _said(why)
    sys.stdout.write(_fit(redact_text(message), args.max_output_length) + "\n")
    sys.stdout.flush()
    if worker.is_alive():
        os._exit(status)  # the unfinished check's threads are not waited for
    return int(status)
