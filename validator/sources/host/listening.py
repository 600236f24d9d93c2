"""Who listens on a TCP port: sockets from ``/proc/net/tcp{,6}``, their owners from ``/proc/PID/fd``
(``socket:[INODE]``), the process tree from ``/proc/PID/stat``; this ties a URL to a process.

No ``ss``/``lsof`` (not on every image). Unreadable tables: :class:`ListeningError` (exit 69); a process
vanishing mid-scan: skipped; another user's descriptors or ``hidepid``: found without owner
(:meth:`Listeners.why_not_visible`); the scan is bounded by :class:`Limits`, past which it is an error,
never a partial answer. The /proc root follows ``$SPARK_VALIDATE_HOST_ROOT``; ``/proc/net`` is the reader's
network namespace (a sidecar shares its pod's).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from validator.errors import UnavailableError
from validator.procinfo import parent_pid, stat_fields
from validator.sources.host.root import host_root

TCP_LISTEN = 0x0A  # include/net/tcp_states.h: TCP_LISTEN
_MAX_TABLE_LINES = 2_000_000  # one line per socket of the namespace; a busy host has tens of thousands
_SOCKET_PREFIX = "socket:["


class ListeningError(UnavailableError):
    """The sockets or processes could not be read as far as the answer needs; the message says where."""


@dataclass(frozen=True)
class Limits:
    """Bounds on one scan of the process table: enough for a host with tens of thousands of processes,
    small enough that a hostile descriptor table cannot stall a check."""

    max_processes: int = 100_000
    max_descriptors: int = 2_000_000
    deadline_s: float = 10.0


DEFAULT_LIMITS = Limits()


def proc_root() -> Path:
    """Where /proc is: ``$SPARK_VALIDATE_HOST_ROOT/proc``, else ``/proc``."""
    return host_root() / "proc"


@dataclass(frozen=True)
class ListeningSocket:
    """One listening TCP socket as the kernel lists it."""

    family: Literal["tcp", "tcp6"]
    address: str  # the bound address, "0.0.0.0" or "::" for every interface
    port: int
    inode: int
    uid: int  # the UID that created the socket (the table's ``uid`` column), visible to every user


def _address(hex_addr: str) -> str:
    """``/proc/net/tcp`` prints each 32-bit word of the address in host byte order."""
    words = [int(hex_addr[i : i + 8], 16) for i in range(0, len(hex_addr), 8)]
    raw = struct.pack(f"={len(words)}I", *words)
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


def _parse_table(path: Path, family: Literal["tcp", "tcp6"]) -> Iterator[ListeningSocket]:
    with open(path, encoding="ascii", errors="replace") as fh:
        for n, line in enumerate(fh):
            if n == 0:
                continue  # the header
            if n > _MAX_TABLE_LINES:
                raise ListeningError(f"{path}: more than {_MAX_TABLE_LINES} sockets; not scanning further")
            parts = line.split()
            if len(parts) < 10:
                continue
            try:
                if int(parts[3], 16) != TCP_LISTEN:
                    continue
                addr, port = parts[1].split(":")
                yield ListeningSocket(
                    family=family,
                    address=_address(addr),
                    port=int(port, 16),
                    inode=int(parts[9]),
                    uid=int(parts[7]),
                )
            except (ValueError, OSError, struct.error):
                continue  # a line this parser does not understand is not a socket it can name


def listening_sockets(*, port: int | None = None, proc: Path | None = None) -> tuple[ListeningSocket, ...]:
    """Every listening TCP socket (IPv4 and IPv6) of this network namespace, or those on ``port``.

    A missing ``tcp6`` table (IPv6 disabled) is no error; a missing ``tcp`` table means /proc is not there.
    """
    proc = proc_root() if proc is None else proc
    found: list[ListeningSocket] = []
    for name, family in (("tcp", "tcp"), ("tcp6", "tcp6")):
        path = proc / "net" / name
        try:
            found.extend(s for s in _parse_table(path, family) if port is None or s.port == port)  # type: ignore[arg-type]
        except FileNotFoundError:
            if family == "tcp":
                raise ListeningError(f"{path}: not found (is /proc mounted?)") from None
        except OSError as exc:
            raise ListeningError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return tuple(found)


def _hidepid(proc: Path) -> str | None:
    """The ``hidepid`` option of the proc mount at ``proc`` (``2``, ``invisible``, ...), or None."""
    try:
        target = os.path.realpath(proc)
        with open(proc / "self" / "mountinfo", encoding="utf-8", errors="replace") as fh:
            lines = fh.read(1 << 20).splitlines()
    except OSError:
        return None
    for line in lines:
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3 or rest[0] != "proc" or fields[4] != target:
            continue
        for option in rest[2].split(","):
            key, _, value = option.partition("=")
            if key == "hidepid" and value not in ("0", "off"):
                return value
    return None


def _pids(proc: Path, limits: Limits) -> list[int]:
    try:
        with os.scandir(proc) as it:
            pids = []
            for entry in it:
                if entry.name.isdigit():
                    pids.append(int(entry.name))
                    if len(pids) > limits.max_processes:
                        raise ListeningError(
                            f"{proc}: more than {limits.max_processes} processes; not scanning further"
                        )
    except FileNotFoundError:
        raise ListeningError(f"{proc}: not found (is /proc mounted?)") from None
    except OSError as exc:
        raise ListeningError(f"{proc}: cannot list: {exc.strerror or exc}") from None
    return sorted(pids)


@dataclass(frozen=True)
class OwnerScan:
    """Which processes hold which of the inodes asked about, and how complete the scan was."""

    owners: dict[int, tuple[int, ...]]  # inode -> PIDs holding a descriptor on it
    processes: int  # PIDs listed in /proc
    vanished: int  # processes that exited during the scan
    unreadable_uids: frozenset[int] = field(default_factory=frozenset)  # owners of fd tables not readable
    unreadable: int = 0  # how many processes' descriptors could not be read
    hidepid: str | None = None  # the proc mount's hidepid option, when set


def _owner_uid(path: Path) -> int | None:
    try:
        return os.stat(path).st_uid
    except OSError:
        return None


def socket_owners(
    inodes: Collection[int], *, proc: Path | None = None, limits: Limits = DEFAULT_LIMITS
) -> OwnerScan:
    """The PIDs holding a descriptor on each of ``inodes``, from every ``/proc/PID/fd`` this user may read."""
    proc = proc_root() if proc is None else proc
    wanted = {f"{_SOCKET_PREFIX}{i}]": i for i in inodes}
    owners: dict[int, list[int]] = {}
    pids = _pids(proc, limits)
    deadline = time.monotonic() + limits.deadline_s
    descriptors = vanished = unreadable = 0
    unreadable_uids: set[int] = set()
    for pid in pids:
        if time.monotonic() > deadline:
            raise ListeningError(
                f"{proc}: scanning {len(pids)} processes' descriptors took over {limits.deadline_s:g} s"
            )
        fd_dir = proc / str(pid) / "fd"
        try:
            with os.scandir(fd_dir) as it:
                for entry in it:
                    descriptors += 1
                    if descriptors > limits.max_descriptors:
                        raise ListeningError(
                            f"{proc}: more than {limits.max_descriptors} open descriptors; "
                            "not scanning further"
                        )
                    try:
                        target = os.readlink(entry.path)
                    except OSError:
                        continue  # closed since the listing, or the process exited
                    inode = wanted.get(target)
                    if inode is not None:
                        held = owners.setdefault(inode, [])
                        if pid not in held:
                            held.append(pid)
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            vanished += 1
        except PermissionError:
            uid = _owner_uid(proc / str(pid))
            if uid is None:
                vanished += 1
            else:
                unreadable += 1
                unreadable_uids.add(uid)
        except OSError:
            vanished += 1  # ESRCH and the like from a process that is exiting
    return OwnerScan(
        owners={i: tuple(p) for i, p in owners.items()},
        processes=len(pids),
        vanished=vanished,
        unreadable_uids=frozenset(unreadable_uids),
        unreadable=unreadable,
        hidepid=_hidepid(proc),
    )


@dataclass(frozen=True)
class Listeners:
    """The listening sockets on one port and the processes that hold them."""

    port: int
    sockets: tuple[ListeningSocket, ...]
    pids: tuple[int, ...]
    scan: OwnerScan | None  # None when nothing listens (no scan was needed)

    def why_not_visible(self) -> str | None:
        """Why no owning process was found, in one sentence; None when one was (or nothing listens)."""
        if self.pids or not self.sockets or self.scan is None:
            return None
        uids = sorted({s.uid for s in self.sockets})
        who = ", ".join(str(u) for u in uids)
        if self.scan.hidepid is not None:
            return (
                f"port {self.port} is listened on by UID {who}, but /proc is mounted with "
                f"hidepid={self.scan.hidepid}: other users' processes are hidden from this user"
            )
        if self.scan.unreadable:
            return (
                f"port {self.port} is listened on by UID {who}, but the descriptors of "
                f"{self.scan.unreadable} processes (UID "
                f"{', '.join(str(u) for u in sorted(self.scan.unreadable_uids))}) are not readable by this "
                "user"
            )
        return (
            f"port {self.port} is listened on by UID {who}, but no process visible here holds the socket "
            "(another PID namespace: a container without a shared process namespace)"
        )


def _address_matches(bound: str, host: str) -> bool:
    if bound in ("0.0.0.0", "::"):
        return True
    if bound == host:
        return True
    try:
        a, b = (socket.inet_pton(socket.AF_INET6 if ":" in x else socket.AF_INET, x) for x in (bound, host))
    except OSError:
        return False
    return a == b


def listeners(
    port: int, *, address: str | None = None, proc: Path | None = None, limits: Limits = DEFAULT_LIMITS
) -> Listeners:
    """The sockets listening on ``port`` (bound to ``address`` or to every interface, when given) and the
    PIDs that hold them. ``address`` is an IP literal; a name is the caller's to resolve."""
    proc = proc_root() if proc is None else proc
    sockets = tuple(
        s
        for s in listening_sockets(port=port, proc=proc)
        if address is None or _address_matches(s.address, address)
    )
    if not sockets:
        return Listeners(port=port, sockets=(), pids=(), scan=None)
    scan = socket_owners({s.inode for s in sockets}, proc=proc, limits=limits)
    pids = sorted({p for s in sockets for p in scan.owners.get(s.inode, ())})
    return Listeners(port=port, sockets=sockets, pids=tuple(pids), scan=scan)


# --- the process tree ---------------------------------------------------------------------------------


def ancestors(pid: int, *, proc: Path | None = None, max_depth: int = 4096) -> tuple[int, ...]:
    """``pid``'s parent, grandparent, ... up to PID 1 (or the namespace's top), nearest first. Stops where a
    process has vanished or its stat is unreadable; bounded by ``max_depth`` and by a loop check."""
    proc = proc_root() if proc is None else proc
    chain: list[int] = []
    seen = {pid}
    current = pid
    for _ in range(max_depth):
        parent = parent_pid(current, proc)
        if parent is None or parent <= 0 or parent in seen:
            break
        chain.append(parent)
        seen.add(parent)
        current = parent
    return tuple(chain)


def is_descendant_or_self(pid: int, of: Collection[int], *, proc: Path | None = None) -> bool:
    """Whether ``pid`` is one of ``of`` or a descendant of one, as /proc shows the tree now."""
    if pid in of:
        return True
    return any(a in of for a in ancestors(pid, proc=proc))


def children(*, proc: Path | None = None, limits: Limits = DEFAULT_LIMITS) -> dict[int, tuple[int, ...]]:
    """A snapshot of the process tree: each PID's children, from every visible ``/proc/PID/stat``
    (processes that exit during the read are left out)."""
    proc = proc_root() if proc is None else proc
    tree: dict[int, list[int]] = {}
    deadline = time.monotonic() + limits.deadline_s
    for pid in _pids(proc, limits):
        if time.monotonic() > deadline:
            raise ListeningError(f"{proc}: reading the process tree took over {limits.deadline_s:g} s")
        fields = stat_fields(pid, proc)
        if fields is None:
            continue
        try:
            tree.setdefault(int(fields[1]), []).append(pid)
        except ValueError:
            continue
    return {p: tuple(c) for p, c in tree.items()}


def below(tree: dict[int, tuple[int, ...]], pid: int) -> Iterator[int]:
    """Each process below ``pid`` in ``tree`` (a :func:`children` snapshot) once, depth first, not ``pid``."""
    seen = {pid}
    stack = list(tree.get(pid, ()))
    while stack:
        p = stack.pop()
        if p not in seen:
            seen.add(p)
            yield p
            stack.extend(tree.get(p, ()))


def descendants(pid: int, *, proc: Path | None = None) -> frozenset[int]:
    """Every process below ``pid`` in the tree (not ``pid`` itself), within ``DEFAULT_LIMITS``."""
    return frozenset(below(children(proc=proc), pid))
