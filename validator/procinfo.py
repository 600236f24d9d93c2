"""Process identity read from /proc: a PID's start time, parent and effective UID.

A PID alone cannot tell a new server from a previous one (PIDs are reused); the PID together with the
kernel's record of when that process started can. The in-server plugin records its own start time with
this module and the readers (the attestation's trust, the listening-socket owner lookup) compare against
it, so it sits outside ``validator.plugin``: readers never import the in-server package. Standard library
only, so the plugin adds nothing to the server's environment and the CLI stays light.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def boot_time(proc: Path = PROC) -> float | None:
    """``btime`` of ``/proc/stat``: the epoch second the host booted (None: unreadable)."""
    try:
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def stat_fields(pid: int, proc: Path = PROC) -> list[str] | None:
    """Fields 3 onwards of ``/proc/<pid>/stat`` (state, ppid, ...), or None when the process is gone or
    the file is unreadable or malformed. Field 2 (comm) may hold spaces and parentheses: the split is after
    its last ')'."""
    try:
        raw = (proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    try:
        fields = raw[raw.rindex(")") + 2 :].split()
    except ValueError:
        return None
    return fields if len(fields) >= 20 else None


def start_ticks(pid: int, proc: Path = PROC) -> int | None:
    """Field 22 of ``/proc/<pid>/stat``: when ``pid`` started, in clock ticks since boot (what a restart or a
    reused PID changes); None when the process is gone or the file unreadable."""
    fields = stat_fields(pid, proc)
    return int(fields[19]) if fields is not None and fields[19].isdigit() else None


def process_start_time(pid: int, proc: Path = PROC) -> float | None:
    """Epoch seconds at which ``pid`` started (to one clock tick: callers compare with a tolerance), or
    None when the process does not exist or /proc is absent."""
    ticks = start_ticks(pid, proc)
    boot = boot_time(proc) if ticks is not None else None
    if ticks is None or boot is None:
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return boot + ticks / hz


def parent_pid(pid: int, proc: Path = PROC) -> int | None:
    """The parent of ``pid`` (field 4 of its stat), or None when the process is gone or unreadable. PID 0
    is the parent of init and of kernel threads."""
    fields = stat_fields(pid, proc)
    if fields is None:
        return None
    try:
        return int(fields[1])
    except ValueError:
        return None


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
