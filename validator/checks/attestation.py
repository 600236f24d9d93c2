"""``attestation.trust``: the attestation file proves something about *this* server, or nothing at all.

A forged or leftover document is the cheapest way to make a broken server pass. Anything not bound to this
server (ownership, writer process, start time, host, port, build, weight load) is ``error``, never
``pass``; the live job already kept such a document from every other check, and this check reports its
reasons (``AttestationTrust.unbound``, from ``attestation.trust.binding_problems``), not a judgement of
its own.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from validator.checks import base as check
from validator.facts import ATTESTATION, SERVER, Facts


def _when(epoch: float | None) -> str:
    """A process start time for a person: UTC to the second (the evidence keeps the epoch seconds)."""
    if epoch is None:
        return "an unknown time"
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@check.builtin("attestation.trust", "check")
def attestation_trust(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    trust = facts.attestation_trust
    if trust is None:
        if ATTESTATION in facts.errors:
            return check.errored(f"attestation unusable: {facts.errors[ATTESTATION]}", [ATTESTATION])
        if ctx.expect.require_attestation or ctx.strict:
            return check.errored(
                "the rule pack requires the in-process attestation: none given (--attestation)", [ATTESTATION]
            )
        return check.skipped(
            "no attestation given (--attestation): the in-process evidence was not asked for"
        )
    server = facts.server
    if server is None:  # the URL was given; the server behind it did not answer (server.ready says why)
        why = facts.errors.get(SERVER, "the server did not answer")
        return check.errored(
            f"the attestation cannot be bound to a server that did not answer: {why}", [ATTESTATION, SERVER]
        )
    problems = trust.unbound
    if problems is None:  # read, but never judged against this server: it proves nothing
        return check.errored("the attestation was not judged against this server", [ATTESTATION, SERVER])
    doc, file, proc, lst = trust.document, trust.file, trust.process, trust.listener
    evidence: dict[str, Any] = {
        "listener_pids": list(lst.pids),
        "listener_uids": list(lst.process_uids),
        "server_user_uid": lst.declared_uid,
        "path": file.path,
        "owner_uid": file.uid,
        "mode": f"{file.mode:04o}",
        "dir_owner_uid": file.dir_uid,
        "dir_mode": f"{file.dir_mode:04o}",
        "pid": doc.process.pid,
        "start_time": doc.process.start_time,
        "observed_start_time": proc.start_time,
        "process_uid": proc.uid,
        "hostname": doc.process.hostname,
        "server_host": doc.server.host,
        "server_port": doc.server.port,
    }
    sources = [ATTESTATION, SERVER]
    if problems:
        why = "; ".join(problems)
        return check.errored(f"the attestation is not bound to this server: {why}", sources, **evidence)
    if lst.pids:
        bound = (
            f"written by PID {doc.process.pid} (running since {_when(doc.process.start_time)}, "
            f"UID {proc.uid}), "
            f"the server listening on port {lst.port} (PID {', '.join(str(p) for p in lst.pids)}) "
            "or its child"
        )
    else:
        bound = (
            f"written by UID {doc.process.uid}, the declared --server-user (the server's processes are not "
            "visible here)"
        )
    return check.passed(
        f"{bound}, for {doc.server.host}:{doc.server.port}; the file and every directory above it writable "
        "only by root or the server's user",
        sources,
        **evidence,
    )
