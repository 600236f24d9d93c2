"""A running process as evidence: what the kernel says it was started with, from ``/proc/PID``.

A unit or script says what *will* run; ``cmdline``, ``environ``, ``exe``, ``cgroup`` and ``stat``'s start
time say what runs. Every read is bounded (``CMDLINE_CAP``, ``ENVIRON_CAP``) and every failure typed:
``ProcessGone``, or one part unreadable (another user's ``environ``, ``hidepid``) in its ``*_error`` field.
``proc_root`` reads another ``/proc`` mount.
"""

from __future__ import annotations

import errno
import os
import pwd
import re
from dataclasses import dataclass, field
from pathlib import Path

from validator.errors import UnavailableError
from validator.procinfo import PROC, boot_time

CMDLINE_CAP = 256 * 1024  # Linux caps one argument at 128 KiB; a launch command is a few hundred bytes
ENVIRON_CAP = 1024 * 1024
CGROUP_CAP = 64 * 1024
_CONTAINER_ID = re.compile(
    r"(?:docker|libpod|cri-containerd|crio|containerd)?[-/:]?([0-9a-f]{64})(?:\.scope)?$"
)
_UNIT = re.compile(r"[^/]+\.(?:service|scope)\Z")


class ProcessGone(UnavailableError):
    """The process exited (or its PID left this namespace) while it was being read."""


@dataclass
class ProcessFacts:
    """One process as ``/proc`` shows it; a part that could not be read is None with its reason."""

    pid: int
    argv: list[str]
    env: dict[str, str] | None  # None: not readable (see env_error)
    env_error: str | None = None
    exe: str | None = None  # the program the kernel loaded; None when hidden (see exe_error)
    exe_deleted: bool = False  # the file was replaced or removed since the process started
    exe_error: str | None = None
    cwd: Path | None = None
    cwd_error: str | None = None
    uid: int | None = None
    user: str | None = None
    # from /proc/PID/status: (real, effective, saved, filesystem) UIDs and GIDs, and the supplementary
    # groups: who the process is, for the trust rule and for running its interpreter as it (never as more)
    uids: tuple[int, ...] = ()
    gids: tuple[int, ...] = ()
    groups: tuple[int, ...] = ()
    # /proc/PID/ns/mnt ("mnt:[4026531841]"): a process in another mount namespace (a container) sees other
    # files under the same paths; None where it cannot be read (another user's, without root)
    mnt_ns: str | None = None
    ppid: int | None = None
    comm: str | None = None
    start_ticks: int | None = None  # /proc/PID/stat field 22: what a restart (or a reused PID) changes
    start_time: float | None = None  # the same as seconds since the epoch
    cgroup: list[str] = field(default_factory=list)  # the cgroup paths, one per hierarchy
    systemd_unit: str | None = None  # "sglang.service": the log is then journal:sglang.service
    user_unit: bool = False  # the unit is a user manager's (journalctl --user-unit)
    container_id: str | None = None  # Docker, Podman, containerd/CRI-O: the 64-hex container ID
    argv_truncated: bool = False
    env_truncated: bool = False

    @property
    def identity(self) -> tuple[int, int | None]:
        """(PID, start ticks): equal only for the same process, even when a PID is reused."""
        return self.pid, self.start_ticks


def _read_capped(path: Path, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of a /proc file, and whether there was more."""
    with open(path, "rb", buffering=0) as fh:
        data = fh.read(cap + 1)
    return data[:cap], len(data) > cap


def _why(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or type(exc).__name__


def _nul_split(data: bytes) -> list[str]:
    if data.endswith(b"\0"):
        data = data[:-1]
    return [w.decode("utf-8", "surrogateescape") for w in data.split(b"\0")] if data else []


def parse_stat(text: str) -> tuple[str, int, int]:
    """``/proc/PID/stat`` -> (comm, ppid, start ticks). The command name is in parentheses and may
    itself hold spaces and ``)``: the fields after it start at the *last* ``)``."""
    open_at, close_at = text.find("("), text.rfind(")")
    if open_at < 0 or close_at < open_at:
        raise ValueError("no (comm) field")
    rest = text[close_at + 2 :].split()
    # rest[0] is field 3 (state): ppid is field 4, starttime field 22
    return text[open_at + 1 : close_at], int(rest[1]), int(rest[19])


def parse_cgroup(text: str) -> tuple[list[str], str | None, bool, str | None]:
    """``/proc/PID/cgroup`` -> (paths, systemd unit, a user manager's unit?, container ID): the innermost
    ``*.service``/``*.scope``; a container's 64-hex ID from its scope or directory, whose scope is not the
    server's unit."""
    paths: list[str] = []
    unified: list[str] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[2] not in paths:
            paths.append(parts[2])
        if parts[0] == "0" or parts[1] == "name=systemd":
            unified.append(parts[2])
    unit: str | None = None
    user_unit = False
    container: str | None = None
    for path in unified or paths:  # the unified hierarchy (v2) or v1's name=systemd: systemd's own tree
        parts = [p for p in path.split("/") if p]
        for part in reversed(parts):
            m = _CONTAINER_ID.search(part)
            if m is not None:
                container = m.group(1)
                break
        if container is None:
            for i in range(len(parts) - 1, -1, -1):
                if _UNIT.match(parts[i]):
                    unit = parts[i]
                    user_unit = any(p.startswith("user@") and p.endswith(".service") for p in parts[:i])
                    break
        if unit is not None or container is not None:
            break
    return paths, unit, user_unit, container


def user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def read_process(pid: int, proc_root: Path = PROC) -> ProcessFacts:
    """Everything ``/proc/PID`` shows of ``pid``. Raises ``ProcessGone`` when the process is not there
    (or exited during the read) and ``UnavailableError`` when its directory is hidden (``hidepid``)."""
    base = proc_root / str(pid)
    where = f"process {pid}"
    try:
        stat_text = _read_capped(base / "stat", 4096)[0].decode("utf-8", "surrogateescape")
        comm, ppid, ticks = parse_stat(stat_text)
    except FileNotFoundError:
        raise ProcessGone(f"{where}: exited (no {base})") from None
    except ProcessLookupError:
        raise ProcessGone(f"{where}: exited while it was read") from None
    except OSError as exc:
        raise UnavailableError(f"{where}: cannot read {base}/stat: {_why(exc)}") from None
    except (ValueError, IndexError):
        raise UnavailableError(f"{where}: {base}/stat is not in the kernel's format") from None
    try:
        data, truncated = _read_capped(base / "cmdline", CMDLINE_CAP)
    except OSError as exc:
        if not base.exists() or exc.errno == errno.ESRCH:
            raise ProcessGone(f"{where}: exited while it was read") from None
        raise UnavailableError(f"{where}: cannot read its command line: {_why(exc)}") from None
    argv = _nul_split(data)
    facts = ProcessFacts(pid=pid, argv=argv, env=None, ppid=ppid, comm=comm, start_ticks=ticks)
    facts.argv_truncated = truncated
    try:
        facts.uid = os.stat(base).st_uid
        facts.user = user_name(facts.uid)
    except OSError:
        pass
    facts.uids, facts.gids, facts.groups = read_ids(pid, proc_root)
    try:
        facts.mnt_ns = os.readlink(base / "ns" / "mnt")
    except OSError:
        facts.mnt_ns = None
    btime = boot_time(proc_root)
    if btime is not None:
        facts.start_time = btime + ticks / os.sysconf("SC_CLK_TCK")
    _read_environ(facts, base)
    try:
        target = os.readlink(base / "exe")
        facts.exe_deleted = target.endswith(" (deleted)")
        facts.exe = target.removesuffix(" (deleted)")
    except OSError as exc:
        facts.exe_error = f"cannot read {base}/exe: {_why(exc)}" + _owner_hint(facts)
    try:
        facts.cwd = Path(os.readlink(base / "cwd"))
    except OSError as exc:
        facts.cwd_error = f"cannot read {base}/cwd: {_why(exc)}" + _owner_hint(facts)
    try:
        text = _read_capped(base / "cgroup", CGROUP_CAP)[0].decode("utf-8", "replace")
        facts.cgroup, facts.systemd_unit, facts.user_unit, facts.container_id = parse_cgroup(text)
    except OSError:
        pass
    # the PID may have been reused while it was read: the start time says whether it is one process
    try:
        again = parse_stat(_read_capped(base / "stat", 4096)[0].decode("utf-8", "surrogateescape"))
    except (OSError, ValueError, IndexError):
        raise ProcessGone(f"{where}: exited while it was read") from None
    if again[2] != ticks:
        raise ProcessGone(f"{where}: exited while it was read (its PID now names another process)")
    return facts


def read_ids(pid: int, proc_root: Path = PROC) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(UIDs, GIDs, supplementary groups) of ``pid`` from ``/proc/PID/status`` (readable by every user);
    empty tuples where the file is gone or not in the kernel's format."""
    try:
        text = _read_capped(proc_root / str(pid) / "status", 64 * 1024)[0].decode("ascii", "replace")
    except OSError:
        return (), (), ()
    found: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Uid", "Gid", "Groups"):
            try:
                found[key] = tuple(int(v) for v in value.split())
            except ValueError:
                return (), (), ()
    uids, gids = found.get("Uid", ()), found.get("Gid", ())
    if len(uids) != 4 or len(gids) != 4:
        return (), (), ()
    return uids, gids, found.get("Groups", ())


def _owner_hint(facts: ProcessFacts) -> str:
    if facts.uid is None or facts.uid == os.geteuid() or os.geteuid() == 0:
        return ""
    who = facts.user or f"uid {facts.uid}"
    return f" (it runs as {who}: run spark-validate as root or as {who})"


def _read_environ(facts: ProcessFacts, base: Path) -> None:
    """The environment the process was exec'd with. The kernel lets only the same user (of a dumpable
    process) or root (``CAP_SYS_PTRACE``) read it; anyone else gets EACCES, which is said, not guessed
    around: the checks that read the environment are then not proven."""
    try:
        data, truncated = _read_capped(base / "environ", ENVIRON_CAP)
    except OSError as exc:
        facts.env_error = f"cannot read {base}/environ: {_why(exc)}" + _owner_hint(facts)
        return
    env: dict[str, str] = {}
    for item in _nul_split(data):
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    if not data and facts.uid is not None and facts.uid != os.geteuid() and os.geteuid() != 0:
        # a kernel that hides another user's environment may answer with nothing instead of EACCES
        facts.env_error = f"{base}/environ is empty to this user" + _owner_hint(facts)
        return
    facts.env = env
    facts.env_truncated = truncated


def list_pids(proc_root: Path = PROC, limit: int = 1 << 17) -> tuple[list[int], bool]:
    """The PIDs visible in ``proc_root`` (at most ``limit``), and whether there were more."""
    pids: list[int] = []
    try:
        with os.scandir(proc_root) as it:
            for entry in it:
                if entry.name.isdigit():
                    if len(pids) >= limit:
                        return pids, True
                    pids.append(int(entry.name))
    except OSError as exc:
        raise UnavailableError(f"cannot list {proc_root}: {_why(exc)}") from None
    return pids, False


def read_cmdline(pid: int, proc_root: Path = PROC) -> list[str] | None:
    """Only the argv of ``pid`` (None when it exited or is hidden): the cheap first pass of discovery."""
    try:
        data, _ = _read_capped(proc_root / str(pid) / "cmdline", CMDLINE_CAP)
    except OSError:
        return None
    return _nul_split(data)
