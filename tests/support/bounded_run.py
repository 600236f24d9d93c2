"""Run ``python -m validator ...`` as a real subprocess under a memory limit and a wall-clock deadline, and
measure what it really used (peak RSS from ``wait4``, the time to its exit).

Why a helper: the hostile-input tests assert bounds (``/dev/zero`` as an input file, an endless body), so
the process must be stopped by its own limits and not take the CI host down with it: ``RLIMIT_AS`` makes an
unbounded read fail fast with ``MemoryError`` (which the test then sees as exit 1 and a traceback) instead
of swapping, and the deadline kills a process that blocks. ``wait4`` gives this child's own peak RSS, not
the maximum over every child the test process ever reaped.

Peak RSS is the child's own ``VmHWM`` after ``exec``, written by the child at exit (``_PROBE``): the kernel's
``ru_maxrss`` also counts the memory image the child inherited at ``fork`` (the whole pytest process, 200 MB
and more once torch is imported), which made a 40 MB ``preflight`` look like 206 MB. ``ru_maxrss`` is only
the fallback when the child died before it could report.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Address space, not RSS: Python plus pydantic/httpx/structlog map ~400 MB of virtual memory at import
# (thread stacks, arenas); 1 GiB still stops a runaway read within a second.
DEFAULT_AS_LIMIT = 1 << 30

# Runs MODULE as ``python -m MODULE`` would, and at exit writes this process's own peak RSS (kB) to the fd
# named by its first argument.
_PROBE = """
import atexit, os, runpy, sys
def _report():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    os.write(fd, line.split()[1].encode())
    except OSError:
        pass
fd = int(sys.argv[1])
atexit.register(_report)
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@dataclass
class Bounded:
    rc: int  # negative: killed by that signal (the deadline sends SIGKILL)
    stdout: str
    stderr: str
    peak_rss_mb: float
    wall_s: float
    timed_out: bool


def run_bounded(
    args: list[str],
    *,
    timeout: float = 60.0,
    as_limit: int = DEFAULT_AS_LIMIT,
    env: dict[str, str] | None = None,
    module: str = "validator",
    cwd: Path | None = None,
) -> Bounded:
    """``python -m MODULE ARGS`` with ``RLIMIT_AS`` = ``as_limit``; killed (``timed_out``) at ``timeout``."""
    full_env = {k: v for k, v in os.environ.items() if k != "SPARK_VALIDATE_API_KEY"}
    full_env.update({"PYTHONPATH": str(REPO), "NO_COLOR": "1"})
    full_env.update(env or {})

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as rss:
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", _PROBE, str(rss.fileno()), module, *args],
            cwd=cwd or REPO,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            preexec_fn=limit,
            pass_fds=(rss.fileno(),),
        )
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                timed_out = True
                os.kill(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        rss.seek(0)
        reported = rss.read().decode("ascii", "replace").strip()
        peak_kb = int(reported) if reported.isdigit() else usage.ru_maxrss
        return Bounded(
            rc=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            peak_rss_mb=peak_kb / 1024,
            wall_s=wall,
            timed_out=timed_out,
        )
