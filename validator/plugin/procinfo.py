"""Process identity (PID start time) read from /proc, shared by the plugin and the attestation reader.

A PID alone cannot tell a new server from a previous one (PIDs are reused); the PID together with the
kernel's record of when that process started can. Only the standard library is used, so the plugin adds
nothing to the server's environment and the CLI stays light.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _boot_time(proc: Path) -> float | None:
    try:
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_start_time(pid: int, proc: Path = PROC) -> float | None:
    """Epoch seconds at which ``pid`` started, or None when the process does not exist or /proc is absent.

    Resolution is one clock tick (10 ms on Linux); callers compare with a tolerance.
    """
    try:
        raw = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) may contain spaces and parentheses: split after the last ')'.
    try:
        fields = raw[raw.rindex(")") + 2 :].split()
        ticks = int(fields[19])  # field 22 overall: starttime, in clock ticks since boot
    except (ValueError, IndexError):
        return None
    boot = _boot_time(proc)
    if boot is None:
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return boot + ticks / hz


def process_uid(pid: int, proc: Path = PROC) -> int | None:
    """The effective UID of ``pid`` (``Uid:`` line of /proc/<pid>/status), or None when it cannot be read."""
    try:
        with open(proc / str(pid) / "status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[2])
    except (OSError, ValueError, IndexError):
        return None
    return None
