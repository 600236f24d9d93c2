"""Evidence from the in-process plugin: the attestation file, read safely and validated strictly.

The document is defined once (``validator.attestation.schema``); pydantic validates what was read against
those dataclasses in strict mode, so a malformed file never counts as evidence. Read as the contract asks:
a regular file, at most ``MAX_BYTES``, nobody but its owner can write it or its directory, bounded JSON.
Reading is not trusting: :func:`read_trusted` records what /proc says of the document's PID and of the
URL's listener, for ``attestation.trust.binding_problems``. ``/server_info["startup_time"]`` is a dict of
durations (``srt/observability/startup_time.py``), not a timestamp: ``load_weight`` is what binds.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from validator.attestation.schema import MAX_BYTES, MAX_DEPTH, SCHEMA, Attestation
from validator.attestation.trust import (
    AttestationTrust,
    ListenerFacts,
    ProcessFacts,
    binding_problems,
    url_address,
)
from validator.bounded_files import parse_json
from validator.errors import InputError, UnavailableError
from validator.facts import ATTESTATION, Facts
from validator.procinfo import process_start_time, process_uid
from validator.sources.gathering import Unreadable
from validator.sources.host import listening
from validator.sources.live_gathering import live_source
from validator.trusted_files import FileFacts, UnsafeLocation, read_guarded
from validator.validation import ValidationError, format_loc, load_json, problems

if TYPE_CHECKING:
    from validator.sources.live_gathering import LiveGathering


def parse_document(data: bytes, where: str) -> Attestation:
    """Validate the bytes of one attestation. InputError (exit 65 style) names the file and the first
    problem's field (a document written by a program has one mistake, not a list to fix)."""
    doc = parse_json(data, where, max_depth=MAX_DEPTH, unique_keys=True)
    if not isinstance(doc, dict):
        raise InputError(where, "not a JSON object")
    if doc.get("schema") != SCHEMA:
        found = doc.get("schema")
        shown = repr(found)[:80] if isinstance(found, (str, type(None))) else f"a {type(found).__name__}"
        raise InputError(where, f"schema is {shown}, expected {SCHEMA!r}")
    try:
        return load_json(Attestation, data, strict=True)
    except ValidationError as exc:
        (loc, msg), *rest = problems(exc)
        more = f" (and {len(rest)} more)" if rest else ""
        raise InputError(where, f"{msg}{more}", field=format_loc(loc) or "(document)") from None


def _read(path: Path, server_uid: int | None = None) -> tuple[bytes, FileFacts]:
    """The bytes and every directory from ``/`` to the file, recorded, not judged (who may own them depends
    on the server's user: ``attestation.trust``); a FIFO, a device or a symlink as the file is refused."""
    try:
        # a link another user could have planted is not followed (the declared server's user may have
        # its own): its target (a file only root may read) would otherwise be read, and its size or
        # first field shown in the verdict
        mine = (os.geteuid(),) if server_uid is None else (os.geteuid(), server_uid)
        return read_guarded(path, MAX_BYTES, what="attestation", follow_last=False, links_from=mine)
    except FileNotFoundError:
        why = "no attestation file (is the spark-validate plugin installed?)"
        raise UnavailableError(f"{path}: {why}") from None
    except UnsafeLocation as exc:
        raise UnavailableError(f"{exc}; not reading it as evidence") from None
    except OSError as exc:
        raise UnavailableError(f"{path}: cannot read attestation: {exc.strerror or exc}") from None


def read_attestation(path: Path | str) -> Attestation:
    """Read and validate one attestation file (not yet trusted: see :func:`read_trusted`). Raises
    UnavailableError (exit 69) when missing or refused, InputError (exit 65) when not a valid v2 document."""
    p = Path(path)
    data, _ = _read(p)
    return parse_document(data, str(p))


def observe_process(pid: int) -> ProcessFacts:
    """The attested PID as /proc shows it now (start time and effective UID)."""
    proc = listening.proc_root()
    started = process_start_time(pid, proc) if pid > 0 else None
    return ProcessFacts(
        pid=pid,
        running=started is not None,
        start_time=started,
        uid=process_uid(pid, proc) if started is not None else None,
    )


def _addresses(host: str) -> list[str]:
    """The IP addresses a URL's host names, for matching listening sockets: a literal as it is, a name as
    the resolver gives it (the HTTP client has just resolved the same name to connect)."""
    literal = host.strip("[]")
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in literal else socket.AF_INET, literal)
        return [literal]
    except OSError:
        pass
    try:
        infos = socket.getaddrinfo(literal, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]) for info in infos})


def observe_listener(url: str | None, writer_pid: int, *, server_uid: int | None = None) -> ListenerFacts:
    """Who listens on the URL's port here, and whether ``writer_pid`` is that process or below it."""
    host, port = url_address(url) if url else (None, None)
    if host is None or port is None:
        bad = f"no host and port in the URL ({url!r})"
        return ListenerFacts(port=port, error=bad, declared_uid=server_uid)
    proc = listening.proc_root()
    addresses = _addresses(host)
    if not addresses:
        return ListenerFacts(port=port, error=f"cannot resolve {host!r}", declared_uid=server_uid)
    try:
        found = [listening.listeners(port, address=a, proc=proc) for a in addresses]
    except listening.ListeningError as exc:
        return ListenerFacts(port=port, error=str(exc), declared_uid=server_uid)
    sockets = {s.inode: s for f in found for s in f.sockets}
    pids = tuple(sorted({p for f in found for p in f.pids}))
    reasons = [r for r in (f.why_not_visible() for f in found) if r is not None]
    why = reasons[0] if reasons else None
    uids = tuple(u for u in (process_uid(p, proc) for p in pids) if u is not None)
    return ListenerFacts(
        port=port,
        socket_uids=tuple(sorted({s.uid for s in sockets.values()})),
        pids=pids,
        process_uids=uids,
        writer_in_tree=listening.is_descendant_or_self(writer_pid, pids, proc=proc) if pids else None,
        not_visible=None if pids else why,
        declared_uid=server_uid,
    )


def read_trusted(
    path: Path | str, *, url: str | None = None, server_uid: int | None = None
) -> AttestationTrust:
    """The validated document with what was observed around it: the file's owner and mode and those of
    every directory above it (on opened descriptors), the writing process in /proc, and the process that
    listens on ``url``'s port. Judge it with ``binding_problems``."""
    p = Path(path)
    data, file = _read(p, server_uid)
    doc = parse_document(data, str(p))
    return AttestationTrust(
        document=doc,
        file=file,
        process=observe_process(doc.process.pid),
        hostname=socket.gethostname(),
        listener=observe_listener(url, doc.process.pid, server_uid=server_uid),
    )


def _asked(g: LiveGathering) -> bool:
    return g.inputs.attestation is not None


@live_source(ATTESTATION, 20, applies=_asked)
async def gather(g: LiveGathering) -> None:
    """The attestation, read in a worker thread: in the sidecar a slow or hostile file must not stall the
    event loop that answers ``/livez``. Read whether or not the server answered (its binding then has no
    ``/server_info`` to compare with)."""
    assert g.inputs.attestation is not None  # the row applies only with --attestation
    server_info = g.facts.server.server_info if g.facts.server is not None else None
    await asyncio.to_thread(
        _read_bound, g.facts, g.inputs.attestation, g.inputs.url, server_info, g.inputs.server_uid
    )


def _read_bound(
    facts: Facts, path: Path, url: str, server_info: dict[str, Any] | None, server_uid: int | None
) -> None:
    """Only a document bound to this server (``validator.attestation.trust.binding_problems``) becomes
    evidence the other checks read; ``attestation.trust`` reports why one was refused."""
    try:
        trust = read_trusted(path, url=url, server_uid=server_uid)
    except (InputError, UnavailableError) as exc:
        raise Unreadable(str(exc)) from None
    problems = binding_problems(trust, url, server_info)
    facts.attestation_trust = replace(trust, unbound=tuple(problems))  # attestation.trust reports them
    if problems:
        raise Unreadable(
            f"{path}: not this server's attestation (stale or untrusted): " + "; ".join(problems)
        )
    facts.attestation = trust.document
