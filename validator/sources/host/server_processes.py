"""The SGLang servers running on this host: processes proven to serve, and the port each serves.

A *candidate* is ``python -m sglang.launch_server``, ``sglang serve`` (also behind a console script's ``#!``),
``spark-validate launch -- CMD`` in its preflight, or a registered stand-in for one. An argv is no proof, so a
candidate is judged only when (SECURITY.md, "Evidence from /proc"): every UID is the reader's or named by
``--server-user`` (else *ignored*), and it or a descendant holds a listening socket on the port its argv
names, in its own network namespace (unreadable descriptors: a socket of its own UID). No fallback to the
argv's port ("not yet listening"); a multi-node worker is proven by its trusted user alone. A process that
changed between two reads is re-read once, else ignored, never merged; a matching descendant is the same
server. :func:`nothing_found` says what was looked for and ignored, and why.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from validator.errors import UnavailableError
from validator.procinfo import start_ticks
from validator.sources.host.listening import (
    Limits,
    ListeningError,
    ancestors,
    below,
    children,
    listening_sockets,
    proc_root,
    socket_owners,
)
from validator.sources.host.process import (
    ProcessFacts,
    ProcessGone,
    list_pids,
    read_cmdline,
    read_process,
    user_name,
)
from validator.sources.host.server_command import (
    Kind,
    classify,
    stand_in_names,
    stand_ins_not_loaded,
)

DEFAULT_PORT = 30000  # SGLang's --port default
MAX_PROCESSES = 100_000
DEADLINE_S = 10.0
MAX_FDS = 65_536  # descriptors read per server process
MAX_DESCENDANTS = 4_096  # processes below one candidate whose descriptors may prove it serves
MAX_ERROR = 400  # characters of one process's reason in discovery's errors
WAIT_STEP_S = 0.5  # how often discover_listening looks again for a server still starting


@dataclass(frozen=True)
class Endpoint:
    address: str
    port: int


IgnoredKind = Literal["other-user", "not-listening", "changed"]


@dataclass(frozen=True)
class Ignored:
    """A process whose argv looks like a server's but which is not judged, and why (one line)."""

    pid: int
    uid: int | None
    user: str | None
    port: int | None
    kind: IgnoredKind
    reason: str

    def describe(self) -> str:
        who = self.user or (f"UID {self.uid}" if self.uid is not None else "unknown user")
        port = f", --port {self.port}" if self.port is not None else ""
        return f"PID {self.pid} ({who}{port}): {self.reason}"


@dataclass
class ServerProcess:
    """One running server: the process, the SGLang command it runs, and where it serves HTTP."""

    process: ProcessFacts
    kind: Kind
    command: list[str]  # the SGLang launch command to judge (python -m sglang.launch_server ARGS)
    listening: list[Endpoint] = field(default_factory=list)
    sockets_error: str | None = None  # why its descriptors could not be read
    http: Endpoint | None = None  # the listening socket on the argv's --port: the proof that it serves
    argv_port: int = DEFAULT_PORT
    node_rank: int = 0
    nnodes: int = 1
    http_inode: int | None = None  # the inode of the socket behind ``http``
    # why its socket is not reachable from here (it lives in another network namespace): None, it is
    elsewhere: str | None = None

    @property
    def role(self) -> Literal["head", "worker", "single"]:
        if self.nnodes <= 1:
            return "single"
        return "head" if self.node_rank == 0 else "worker"

    @property
    def url(self) -> str | None:
        """Where the live checks reach it: the socket it was proven to hold (a wildcard bind is reached on
        loopback). None for a worker (it serves no HTTP) and for a process not proven to listen: the
        argv's port is never taken on its word. None too for a socket in another network namespace
        (``elsewhere``): the same address here is another socket, or none."""
        if self.role == "worker" or self.http is None or self.elsewhere is not None:
            return None
        host, port = self.http.address, self.http.port
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def describe(self) -> str:
        if self.elsewhere is not None and self.http is not None:
            where = f"port {self.http.port} in another network namespace"
        else:
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
            if target.startswith("socket:[") and target.endswith("]"):
                try:
                    inodes.add(int(target[8:-1]))
                except ValueError:
                    continue
    return inodes


def _attach_sockets(server: ServerProcess, proc: Path) -> None:
    """The server's listening sockets: its descriptors' inodes in its own network namespace's tables.
    ``server.http`` is set only from a socket it holds (or, its descriptors unreadable, one its own UID
    created on its port): the proof that it serves."""

    pid = server.process.pid
    try:
        table = listening_sockets(proc=proc / str(pid))
    except ListeningError as exc:
        if not (proc / str(pid)).exists():
            raise ProcessGone(f"process {pid}: exited while it was read") from None
        server.sockets_error = str(exc)
        return
    try:
        inodes = _socket_inodes(pid, proc)
    except FileNotFoundError:
        raise ProcessGone(f"process {pid}: exited while it was read") from None
    except OSError as exc:
        server.sockets_error = (
            f"cannot read {proc}/{pid}/fd ({exc.strerror or exc}): its descriptors are not visible to this "
            "user; a listening socket on its port created by its own UID is taken as its"
        )
        owner = server.process.uid
        for s in table:
            if s.port == server.argv_port and owner is not None and s.uid == owner:
                server.http = Endpoint(s.address, s.port)
                server.http_inode = s.inode
                server.listening = [server.http]
                break
        return
    held = [s for s in table if s.inode in inodes]
    server.listening = [Endpoint(s.address, s.port) for s in held]
    for s in held:
        if s.port == server.argv_port:
            server.http = Endpoint(s.address, s.port)
            server.http_inode = s.inode
            break


def _descendant_socket(server: ServerProcess, tree: dict[int, tuple[int, ...]], proc: Path) -> None:
    """A descendant of ``server`` holding its port's listening socket proves it (``sglang serve``
    re-running itself, a wrapper that starts the server as its child)."""
    try:
        table = [
            s for s in listening_sockets(proc=proc / str(server.process.pid)) if s.port == server.argv_port
        ]
    except ListeningError:
        return
    if not table:
        return
    by_inode = {s.inode: s for s in table}
    for pid in itertools.islice(below(tree, server.process.pid), MAX_DESCENDANTS):
        try:
            held = _socket_inodes(pid, proc)
        except OSError:
            continue
        for inode in held:
            s = by_inode.get(inode)
            if s is not None:
                server.http = Endpoint(s.address, s.port)
                server.http_inode = s.inode
                server.listening = [server.http]
                return


@dataclass
class Discovery:
    """What one scan found, what it ignored and why, and what it could not see."""

    servers: list[ServerProcess]
    processes: int  # PIDs visible in /proc
    truncated: bool = False  # more processes than MAX_PROCESSES, or the deadline passed
    errors: list[str] = field(default_factory=list)  # one line per process that could not be read
    ignored: list[Ignored] = field(default_factory=list)  # candidates not judged, with why

    @property
    def starting(self) -> list[Ignored]:
        """Trusted candidates that do not listen on their port yet (a server loading its weights)."""
        return [i for i in self.ignored if i.kind == "not-listening"]


def trusted_uids(users: Collection[int] = ()) -> frozenset[int]:
    """The users whose processes may be judged: the reader's own and those ``--server-user`` names."""
    return frozenset({os.geteuid(), *users})


# a UID's name, looked up once per UID: thousands of decoys cost one lookup each user, not one each process
_who = functools.lru_cache(maxsize=1024)(user_name)


def _candidate(
    pid: int, argv: list[str], proc: Path, trusted: frozenset[int]
) -> ServerProcess | Ignored | None:
    """One process read in full and checked against the rule; None when it is not a server's argv (or it
    exited). Raises ``UnavailableError`` for a part that cannot be read."""
    kind_command = classify(argv)
    if kind_command is None:
        return None
    kind, command = kind_command
    port = _int(_flag(command, "--port"), DEFAULT_PORT)
    try:
        owner = os.stat(proc / str(pid)).st_uid
    except OSError:
        return None  # exited
    if owner not in trusted:
        return Ignored(
            pid,
            owner,
            _who(owner),
            port,
            "other-user",
            f"another user's process (UID {owner}): judged only when --server-user names its user",
        )
    facts = read_process(pid, proc)  # ProcessGone when it exited; its stat is read before and after
    if facts.argv != argv:
        return Ignored(pid, owner, facts.user, port, "changed", "its command line changed while it was read")
    every = set(facts.uids) or {owner}
    if not every <= trusted:
        return Ignored(
            pid,
            owner,
            facts.user,
            port,
            "other-user",
            f"runs with UIDs {sorted(every)} (setuid or changing identity), not all trusted here",
        )
    server = ServerProcess(
        process=facts,
        kind=kind,
        command=command,
        argv_port=port,
        node_rank=_int(_flag(command, "--node-rank"), 0),
        nnodes=_int(_flag(command, "--nnodes"), 1),
    )
    _attach_sockets(server, proc)
    # the same process before and after its sockets were read, or none of it is evidence
    ticks = start_ticks(pid, proc)
    if ticks is None or ticks != facts.start_ticks or read_cmdline(pid, proc) != facts.argv:
        return Ignored(pid, owner, facts.user, port, "changed", "it exited or exec'd while it was read")
    return server


def discover(
    proc: Path | None = None,
    *,
    users: Collection[int] = (),
    deadline_s: float = DEADLINE_S,
    limit: int = MAX_PROCESSES,
) -> Discovery:
    """Every SGLang server process visible in ``proc`` that the rule proves (see the module), bounded in
    processes and seconds; ``users``: the UIDs ``--server-user`` names, trusted beside the reader's own."""

    proc = proc_root() if proc is None else proc
    trusted = trusted_uids(users)
    pids, truncated = list_pids(proc, limit)
    errors = [f"{proc}: more than {limit} processes; only the first {limit} were read"] if truncated else []
    end = time.monotonic() + deadline_s
    me = os.getpid()
    found: dict[int, ServerProcess] = {}
    ignored: list[Ignored] = []
    head = len(errors)  # where the deadline's line goes: after the process limit's, before the rest
    for pid in sorted(pids):
        if time.monotonic() > end:
            truncated = True
            # first, before the processes' own reasons: "no server found" shows five, and any local user
            # can run processes whose argv a reader refuses, which would hide that the scan stopped
            stopped = f"{proc}: scanning {len(pids)} processes took over {deadline_s:g} s; stopped"
            errors.insert(head, stopped)
            break
        if pid == me:
            continue
        argv = read_cmdline(pid, proc)
        if not argv:
            continue  # exited, hidden, or a kernel thread
        outcome: ServerProcess | Ignored | None = None
        for _attempt in range(2):  # a process that changed while it was read is read once more
            try:
                outcome = _candidate(pid, argv, proc, trusted)
            except ProcessGone:
                outcome = None
            except UnavailableError as exc:
                # bounded: the reason may quote the process's argv, which any local user chooses
                said = str(exc) if str(exc).startswith("process ") else f"process {pid}: {exc}"
                errors.append(said if len(said) <= MAX_ERROR else said[: MAX_ERROR - 3] + "...")
                outcome = None
            if not (isinstance(outcome, Ignored) and outcome.kind == "changed"):
                break
            argv = read_cmdline(pid, proc) or []
            if not argv:
                outcome = None
                break
        if isinstance(outcome, Ignored):
            ignored.append(outcome)
        elif outcome is not None:
            found[pid] = outcome
    unproven = [s for s in found.values() if s.role != "worker" and s.http is None]
    if unproven and not all(s.sockets_error for s in unproven):
        try:
            tree = children(proc=proc, limits=Limits(deadline_s=max(0.5, end - time.monotonic())))
        except ListeningError as exc:
            errors.append(str(exc))
            tree = {}
        for s in unproven:
            if s.sockets_error is None:
                _descendant_socket(s, tree, proc)
    proven: dict[int, ServerProcess] = {}
    here: frozenset[int] | None = None
    for s in found.values():
        if s.role != "worker" and s.http is not None and s.http_inode is not None:
            if here is None:
                here = _reader_inodes(proc)
            if s.http_inode not in here:
                s.elsewhere = (
                    f"it listens on port {s.http.port} in another network namespace than this reader's: "
                    f"that address here reaches another socket (anyone's) or none, never it; its live "
                    "checks are not run: judge it from its own network (its pod or container, hostNetwork), "
                    "or give --url with an address that reaches it"
                )
    for pid, s in found.items():
        if s.role == "worker" or s.http is not None:
            proven[pid] = s
            continue
        why = f"holds no listening socket on its --port {s.argv_port}: not yet listening (still starting)"
        if s.sockets_error:
            why += f"; {s.sockets_error}"
        ignored.append(Ignored(pid, s.process.uid, s.process.user, s.argv_port, "not-listening", why))
    # a found server's descendant that matches too is that server (one report each)
    servers = [s for s in proven.values() if not _below_another(s, proven, proc)]
    return Discovery(
        servers=servers, processes=len(pids), truncated=truncated, errors=errors, ignored=ignored
    )


def _reader_inodes(proc: Path) -> frozenset[int]:
    """The listening sockets of this reader's own network namespace (``proc``/net is ``self/net``): a
    server's URL is reached through them. A socket inode names one socket on the whole host, so a proven
    socket that is not among them lives in another network namespace. Unreadable: none (nothing is
    reachable on a socket this reader cannot see)."""
    try:
        return frozenset(s.inode for s in listening_sockets(proc=proc))
    except ListeningError:
        return frozenset()


def discover_listening(wait_s: float, proc: Path | None = None, *, users: Collection[int] = ()) -> Discovery:
    """:func:`discover`, looked at again every ``WAIT_STEP_S`` for up to ``wait_s`` seconds while a trusted
    server is still starting (found, not yet listening): ``check --wait`` right after a start judges the
    server once it serves, not the loading process."""
    deadline = time.monotonic() + max(0.0, wait_s)
    while True:
        found = discover(proc, users=users)
        if not found.starting or time.monotonic() + WAIT_STEP_S > deadline:
            return found
        time.sleep(WAIT_STEP_S)


def _below_another(server: ServerProcess, found: dict[int, ServerProcess], proc: Path) -> bool:
    first = server.process.ppid or 0
    chain = (first, *ancestors(first, proc=proc, max_depth=63)) if first > 1 else ()
    return any(p in found for p in itertools.takewhile(lambda p: p > 1, chain))


def nothing_found(discovery: Discovery, proc: Path | None = None) -> str:
    """Why no server was found, in one paragraph: what was looked for, what was ignored and why, and what
    could not be seen."""

    proc = proc_root() if proc is None else proc
    forms = [
        "python -m sglang.launch_server",
        "sglang serve",
        "spark-validate launch -- ...",
        *stand_in_names(),
    ]
    lines = [
        f"no SGLang server process found among the {discovery.processes} processes visible in {proc} "
        f"(looked for {', '.join(forms)}, holding the listening socket on its --port)"
    ]
    lines.extend(stand_ins_not_loaded())
    if discovery.ignored:
        shown = "; ".join(i.describe() for i in discovery.ignored[:4])
        more = f" and {len(discovery.ignored) - 4} more" if len(discovery.ignored) > 4 else ""
        lines.append(f"ignored: {shown}{more}")
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
    if discovery.starting:
        lines.append("a server still starting is judged once it listens (give --wait SECONDS to wait for it)")
    lines.append(
        "run as root or as the server's user on its host (--server-user USER for another user's server), "
        "or give --url (and --pid)"
    )
    return "; ".join(lines)
