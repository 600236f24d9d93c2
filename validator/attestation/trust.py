"""Whether an attestation read from disk describes the server behind a URL (``attestation.trust``), as a
pure function of what was observed, so the live job and the check give the same reasons.

Always asked, whatever the document claims: which process serves the URL (its PID or an ancestor holds the
listening socket; unseen, only ``--server-user`` binds, by owner); who could have written the file (it and
every directory up to ``/`` owned by root or the server's user, writable by nobody else: a world-writable
parent lets anyone swap the plugin's directory, sticky ``/tmp`` stops renaming but not planting); which run
(PID start time, host, HTTP host and port, SGLang build, weight-load seconds).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from validator.trusted_files import WRITABLE_BY_OTHERS, FileFacts

if TYPE_CHECKING:  # the document's type only: judging a binding never builds one
    from validator.attestation.schema import Attestation

# PID start times come from clock ticks (10 ms) on both sides; a second covers rounding and clock steps.
START_TIME_TOLERANCE_S = 1.0
# Weight-load seconds are the same float on both sides for one run; a previous run differs by far more.
LOAD_WEIGHT_TOLERANCE_S = 0.05


@dataclass(frozen=True)
class ProcessFacts:
    """The attested PID as this host's /proc shows it now."""

    pid: int
    running: bool
    start_time: float | None
    uid: int | None  # effective UID of the running process


@dataclass(frozen=True)
class ListenerFacts:
    """Who serves the URL's port, as this host's /proc shows it, and who the operator says the server is."""

    port: int | None
    socket_uids: tuple[int, ...] = ()  # creators of the listening sockets on the port (table column)
    pids: tuple[int, ...] = ()  # processes holding those sockets
    process_uids: tuple[int, ...] = ()  # their effective UIDs
    writer_in_tree: bool | None = None  # the document's PID is one of ``pids`` or a descendant
    not_visible: str | None = None  # why no owning process was found (sockets seen, owner not)
    error: str | None = None  # the lookup itself failed
    declared_uid: int | None = None  # --server-user


@dataclass(frozen=True)
class AttestationTrust:
    """Everything ``attestation.trust`` judges: the validated document and what was observed around it."""

    document: Attestation
    file: FileFacts
    process: ProcessFacts
    hostname: str  # this host's name, where the reader ran
    listener: ListenerFacts
    # why the document proves nothing about the server being checked (binding_problems against its URL
    # and /server_info; empty: it is bound), judged once by the live job; None: not judged yet
    unbound: tuple[str, ...] | None = None


def _ids(values: tuple[int, ...]) -> str:
    return ", ".join(str(v) for v in values)


def _server_identity(trust: AttestationTrust) -> tuple[int | None, bool, list[str]]:
    """The server's UID, whether its process is visible here, and what stops the binding."""
    lst, doc = trust.listener, trust.document
    if lst.error is not None:
        return lst.declared_uid, False, [f"cannot tell which process serves the URL: {lst.error}"]
    if lst.pids:
        problems: list[str] = []
        if not lst.writer_in_tree:
            problems.append(
                f"PID {doc.process.pid} is neither the process listening on port {lst.port} "
                f"(PID {_ids(lst.pids)}) nor one of its descendants"
            )
        uids = sorted(set(lst.process_uids))
        if len(uids) != 1:
            problems.append(f"port {lst.port} is held by processes of UIDs {_ids(tuple(uids)) or 'unknown'}")
            return None, True, problems
        if lst.declared_uid is not None and lst.declared_uid != uids[0]:
            problems.append(
                f"the server on port {lst.port} runs as UID {uids[0]}, not the declared --server-user "
                f"(UID {lst.declared_uid})"
            )
        return uids[0], True, problems
    if lst.declared_uid is None:
        why = lst.not_visible or f"no process listening on port {lst.port} is visible here"
        return None, False, [f"{why}: name the server's user with --server-user to bind the attestation"]
    if lst.socket_uids and lst.declared_uid not in lst.socket_uids:
        return (
            lst.declared_uid,
            False,
            [
                f"port {lst.port} is listened on by UID {_ids(lst.socket_uids)}, not the declared "
                f"--server-user (UID {lst.declared_uid})"
            ],
        )
    return lst.declared_uid, False, []


def _ownership_problems(trust: AttestationTrust, server_uid: int | None) -> list[str]:
    doc, file = trust.document, trust.file
    allowed = {0} | ({server_uid} if server_uid is not None else set())
    who = f"the server's user (UID {server_uid})" if server_uid is not None else "a known server user"
    problems: list[str] = []
    for d in file.chain:
        if d.uid not in allowed:
            problems.append(f"directory {d.path} is owned by UID {d.uid}, neither {who} nor root")
        elif d.mode & WRITABLE_BY_OTHERS:
            problems.append(
                f"directory {d.path} is writable by others (mode {d.mode:04o}): anyone could replace what "
                "lies below it"
            )
    if not file.chain and file.dir_uid not in allowed:  # a reader that recorded no chain
        problems.append(f"its directory is owned by UID {file.dir_uid}, neither {who} nor root")
    if file.uid not in allowed:
        problems.append(f"the file is owned by UID {file.uid}, neither {who} nor root")
    if file.mode & WRITABLE_BY_OTHERS or file.dir_mode & WRITABLE_BY_OTHERS:
        problems.append(
            f"the file or its directory is writable by others ({file.mode:04o}, {file.dir_mode:04o})"
        )
    if doc.process.uid != file.uid and file.uid != 0:
        problems.append(
            f"written by UID {doc.process.uid} per the document, but the file is owned by UID {file.uid}"
        )
    if server_uid is not None and doc.process.uid != server_uid:
        problems.append(
            f"written by UID {doc.process.uid} per the document, the server runs as UID {server_uid}"
        )
    return problems


def _process_problems(trust: AttestationTrust) -> list[str]:
    doc, proc = trust.document, trust.process
    if not proc.running or proc.start_time is None:
        return [f"the writing process (PID {doc.process.pid}) is not running on this host"]
    if doc.process.start_time is None:
        return [f"the document records no start time for PID {doc.process.pid}"]
    if not abs(proc.start_time - doc.process.start_time) <= START_TIME_TOLERANCE_S:  # NaN: a mismatch
        return [
            f"PID {doc.process.pid} now belongs to a process started at {proc.start_time:.2f}, not the "
            f"writer (started {doc.process.start_time:.2f})"
        ]
    if proc.uid is not None and proc.uid != doc.process.uid:
        return [f"PID {doc.process.pid} runs as UID {proc.uid}, the document says UID {doc.process.uid}"]
    return []


def binding_problems(
    trust: AttestationTrust, url: str | None, server_info: Mapping[str, Any] | None
) -> list[str]:
    """Why the document does not prove anything about the server at ``url``; empty when it does."""
    doc = trust.document
    server_uid, visible, problems = _server_identity(trust)
    problems.extend(_ownership_problems(trust, server_uid))
    if doc.process.hostname != trust.hostname:
        problems.append(
            f"written on host {doc.process.hostname!r}, read on {trust.hostname!r}: run the check where the "
            "server runs (its PIDs must be visible)"
        )
    if visible:
        problems.extend(_process_problems(trust))
    elif doc.process.start_time is None:
        problems.append(f"the document records no start time for PID {doc.process.pid}")
    problems.extend(_address_problems(doc, url, server_info))
    if server_info is not None:
        problems.extend(_run_problems(doc, server_info))
    return problems


_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_address(url: str) -> tuple[str | None, int | None]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.hostname, port


def _hosts_match(bound: str, url_host: str) -> bool:
    if bound in _WILDCARD_HOSTS:
        return True  # bound to every interface: any address of this host reaches it
    if bound.lower() == url_host.lower():
        return True
    return _is_loopback(bound) and _is_loopback(url_host)


def _server_load_weight(server_info: Mapping[str, Any]) -> float | None:
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        st = states[0].get("startup_time")
        if isinstance(st, dict):
            value = st.get("load_weight")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    return None


def _address_problems(doc: Attestation, url: str | None, server_info: Mapping[str, Any] | None) -> list[str]:
    bound_host, bound_port = doc.server.host, doc.server.port
    if bound_host is None or bound_port is None:
        return ["the document records no HTTP host and port for its server"]
    problems: list[str] = []
    url_host, url_port = url_address(url) if url else (None, None)
    if url_host is None or url_port is None:
        problems.append(f"no URL to bind the document to ({url!r})")
    else:
        if url_port != bound_port:
            problems.append(f"written by a server on port {bound_port}, the URL is port {url_port}")
        if not _hosts_match(bound_host, url_host):
            problems.append(f"written by a server bound to {bound_host!r}, the URL names {url_host!r}")
    if server_info is None:
        problems.append("the server's /server_info is not available to bind the document to")
        return problems
    info_host, info_port = server_info.get("host"), server_info.get("port")
    if not isinstance(info_port, int) or isinstance(info_port, bool) or not isinstance(info_host, str):
        problems.append("/server_info does not report the server's host and port")
    elif (info_host, info_port) != (bound_host, bound_port):
        problems.append(
            f"written by a server on {bound_host}:{bound_port}, /server_info reports {info_host}:{info_port}"
        )
    return problems


def _run_problems(doc: Attestation, server_info: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    version = server_info.get("version")
    if version is not None and doc.sglang.version is not None and str(version) != doc.sglang.version:
        problems.append(f"written by SGLang {doc.sglang.version}, the server reports {version}")
    tp_size = server_info.get("tp_size")
    if isinstance(tp_size, int) and doc.process.tp_size is not None and tp_size != doc.process.tp_size:
        problems.append(f"written with tp_size {doc.process.tp_size}, the server reports {tp_size}")
    server_load = _server_load_weight(server_info)
    if (
        server_load is not None
        and doc.process.load_weight_s is not None
        and doc.process.tp_rank in (0, None)
        and not abs(server_load - doc.process.load_weight_s) <= LOAD_WEIGHT_TOLERANCE_S  # NaN: a mismatch
    ):
        problems.append(
            f"weights loaded in {doc.process.load_weight_s:.2f} s per the attestation, "
            f"{server_load:.2f} s per /server_info: another server run"
        )
    return problems
