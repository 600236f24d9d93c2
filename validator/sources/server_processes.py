"""The SGLang servers running on this host: processes whose argv starts a server, and the port each serves.

Why: "is the server that runs right now configured right?" is answered from what the kernel says runs,
with no flag to name it. Each visible process's ``/proc/PID/cmdline`` is read (a few hundred bytes each,
bounded in count and time) and kept when it is

- ``python [opts] -m sglang.launch_server ...`` or ``sglang serve ...`` (also behind ``python
  /venv/bin/sglang``, as a console script's ``#!`` line leaves it),
- ``spark-validate launch [opts] -- CMD...`` still in its preflight (it ``exec``s CMD, keeping the PID),
- the simulator (``spark-validate sim``, ``python -m validator sim``, ``python -m validator.sim``): it
  stands in for ``python -m sglang.launch_server`` with the arguments its scenario simulates, plus those
  after ``--``, so that the tests judge a real process.

Each server's listening TCP sockets come from its own ``/proc/PID/fd`` matched against its network
namespace's socket table (``validator.sources.listening``); the one on the argv's ``--port`` (SGLang's
default 30000) is its HTTP port. A worker of a multi-node launch (``--node-rank`` >= 1) serves no HTTP: it is
found by its argv alone. A descendant of a found server that matches too (``sglang serve`` re-running
itself) is the same server, reported once.

When nothing is found, :func:`nothing_found` says what was looked for, and which listening sockets have
an owner this user cannot see (``hidepid``, another user's descriptors, another PID namespace).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from validator.errors import UnavailableError
from validator.procinfo import parent_pid
from validator.sources.listening import ListeningError, listening_sockets, proc_root, socket_owners
from validator.sources.process import ProcessFacts, ProcessGone, list_pids, read_cmdline, read_process
from validator.sources.server_command import Kind, classify

DEFAULT_PORT = 30000  # SGLang's --port default
MAX_PROCESSES = 100_000
DEADLINE_S = 10.0
MAX_FDS = 65_536  # descriptors read per server process


@dataclass(frozen=True)
class Endpoint:
    address: str
    port: int


@dataclass
class ServerProcess:
    """One running server: the process, the SGLang command it runs, and where it serves HTTP."""

    process: ProcessFacts
    kind: Kind
    command: list[str]  # the SGLang launch command to judge (python -m sglang.launch_server ARGS)
    listening: list[Endpoint] = field(default_factory=list)
    sockets_error: str | None = None  # why its descriptors could not be read
    http: Endpoint | None = None  # the listening socket on the argv's --port
    argv_port: int = DEFAULT_PORT
    argv_host: str = "127.0.0.1"
    node_rank: int = 0
    nnodes: int = 1

    @property
    def role(self) -> Literal["head", "worker", "single"]:
        if self.nnodes <= 1:
            return "single"
        return "head" if self.node_rank == 0 else "worker"

    @property
    def url(self) -> str | None:
        """Where the live checks reach it: its HTTP socket (a wildcard bind is reached on loopback);
        before it listens, the argv's host and port. None for a worker (it serves no HTTP)."""
        if self.role == "worker":
            return None
        host, port = (self.http.address, self.http.port) if self.http else (self.argv_host, self.argv_port)
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def describe(self) -> str:
        where = self.url or f"worker rank {self.node_rank} of {self.nnodes}, no HTTP"
        return f"PID {self.process.pid} ({where})"


def _flag(command: list[str], name: str) -> str | None:
    """The last value of ``--name V`` / ``--name=V`` in ``command`` (argparse keeps the last)."""
    value: str | None = None
    for i, word in enumerate(command):
        if word == name and i + 1 < len(command):
            value = command[i + 1]
        elif word.startswith(name + "="):
            value = word.split("=", 1)[1]
    return value


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _socket_inodes(pid: int, proc: Path) -> set[int]:
    inodes: set[int] = set()
    with os.scandir(proc / str(pid) / "fd") as it:
        for n, entry in enumerate(it):
            if n >= MAX_FDS:
                break
            try:
                target = os.readlink(entry.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def _attach_sockets(server: ServerProcess, proc: Path) -> None:
    """The server's listening sockets: its descriptors' inodes in its own network namespace's tables."""

    pid = server.process.pid
    try:
        inodes = _socket_inodes(pid, proc)
    except FileNotFoundError:
        raise ProcessGone(f"process {pid}: exited while it was read") from None
    except OSError as exc:
        server.sockets_error = (
            f"cannot read {proc}/{pid}/fd ({exc.strerror or exc}): its listening sockets are not visible to "
            "this user; the HTTP port is taken from its argv"
        )
        return
    try:
        table = listening_sockets(proc=proc / str(pid))
    except ListeningError as exc:
        server.sockets_error = str(exc)
        return
    server.listening = [Endpoint(s.address, s.port) for s in table if s.inode in inodes]
    for ep in server.listening:
        if ep.port == server.argv_port:
            server.http = ep
            break


@dataclass
class Discovery:
    """What one scan found, and what it could not see (for the report when nothing was found)."""

    servers: list[ServerProcess]
    processes: int  # PIDs visible in /proc
    truncated: bool = False  # more processes than MAX_PROCESSES, or the deadline passed
    errors: list[str] = field(default_factory=list)  # one line per process that could not be read


def discover(
    proc: Path | None = None, *, deadline_s: float = DEADLINE_S, limit: int = MAX_PROCESSES
) -> Discovery:
    """Every SGLang server process visible in ``proc``, bounded in processes and seconds."""

    proc = proc_root() if proc is None else proc
    pids, truncated = list_pids(proc, limit)
    if truncated:
        errors_head = [f"{proc}: more than {limit} processes; only the first {limit} were read"]
    else:
        errors_head = []
    end = time.monotonic() + deadline_s
    me = os.getpid()
    found: dict[int, ServerProcess] = {}
    errors: list[str] = errors_head
    for pid in sorted(pids):
        if time.monotonic() > end:
            truncated = True
            errors.append(f"{proc}: scanning {len(pids)} processes took over {deadline_s:g} s; stopped")
            break
        if pid == me:
            continue
        argv = read_cmdline(pid, proc)
        if not argv:
            continue  # exited, hidden, or a kernel thread
        try:
            kind_command = classify(argv)
        except UnavailableError as exc:
            errors.append(f"process {pid}: {exc}")
            continue
        if kind_command is None:
            continue
        kind, command = kind_command
        try:
            facts = read_process(pid, proc)
        except ProcessGone:
            continue  # it exited between the two reads: not running
        except UnavailableError as exc:
            errors.append(str(exc))
            continue
        server = ServerProcess(
            process=facts,
            kind=kind,
            command=command,
            argv_port=_int(_flag(command, "--port"), DEFAULT_PORT),
            argv_host=_flag(command, "--host") or "127.0.0.1",
            node_rank=_int(_flag(command, "--node-rank"), 0),
            nnodes=_int(_flag(command, "--nnodes"), 1),
        )
        try:
            _attach_sockets(server, proc)
        except ProcessGone:
            continue
        found[pid] = server
    # a found server's descendant that matches too is that server (one report each)
    servers = [s for s in found.values() if not _below_another(s, found, proc)]
    return Discovery(servers=servers, processes=len(pids), truncated=truncated, errors=errors)


def _below_another(server: ServerProcess, found: dict[int, ServerProcess], proc: Path) -> bool:

    parent: int | None = server.process.ppid
    for _ in range(64):  # bounded: a loop in a hostile /proc tree cannot hold the scan
        if parent is None or parent <= 1:
            return False
        if parent in found:
            return True
        parent = parent_pid(parent, proc)
    return False


def nothing_found(discovery: Discovery, proc: Path | None = None) -> str:
    """Why no server was found, in one paragraph: what was looked for, and what could not be seen."""

    proc = proc_root() if proc is None else proc
    lines = [
        f"no SGLang server process found among the {discovery.processes} processes visible in {proc} "
        "(looked for python -m sglang.launch_server, sglang serve, spark-validate launch -- ..., "
        "spark-validate sim)"
    ]
    try:
        sockets = listening_sockets(proc=proc)
        scan = socket_owners({s.inode for s in sockets}, proc=proc)
        hidden = sorted({(s.port, s.uid) for s in sockets if not scan.owners.get(s.inode)})
        if hidden:
            shown = ", ".join(f"{port} (UID {uid})" for port, uid in hidden[:8])
            more = f" and {len(hidden) - 8} more" if len(hidden) > 8 else ""
            why = (
                f"/proc is mounted with hidepid={scan.hidepid}"
                if scan.hidepid
                else "their processes are another user's or in another PID namespace"
            )
            lines.append(f"listening ports whose process this user cannot see ({why}): {shown}{more}")
    except ListeningError as exc:
        lines.append(str(exc))
    lines.extend(discovery.errors[:5])
    lines.append("run as root or as the server's user on its host, or give --url (and --pid)")
    return "; ".join(lines)
