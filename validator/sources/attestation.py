"""Evidence from the in-process plugin: the attestation file, read safely and validated strictly.

The document is defined once, in ``validator.attestation_format`` (standard-library dataclasses the plugin
and the simulator build); here pydantic validates what was read against those same dataclasses, in strict
mode (no ``"1"`` for 1, no unknown fields), so a malformed file never counts as evidence. The file is read
as the contract asks: a regular file (a FIFO opens without blocking and is refused; so are devices and
symlinks), at most ``MAX_BYTES``, in a directory and with a mode that nobody but its owner can write; the
JSON parse is bounded too (nesting, 4,300-digit integers: one-line errors, never a traceback).

Reading is not trusting: :func:`read_trusted` also records what this host's /proc says of the PID the
document names, and ``attestation_format.binding_problems`` then says whether the document describes the
server being checked (PID and start time, owner, host, port, build, weight load).

About SGLang's timing facts: ``/server_info["startup_time"]`` is not a timestamp. It is a dict of
durations in seconds (``load_weight``, ``kv_cache_allocation``, ``scheduler_e2e``, ``cuda_graph``,
``tokenizer_e2e``; ``srt/observability/startup_time.py``), and each ``internal_states[i]["startup_time"]``
holds one scheduler's (``load_weight`` = target + draft weight-load seconds); the binding compares that
duration with the one the plugin recorded.
"""

from __future__ import annotations

import functools
import socket
from pathlib import Path
from typing import Any

from validator.attestation_format import (
    MAX_BYTES,
    MAX_DEPTH,
    SCHEMA,
    Attestation,
    AttestationTrust,
    FileFacts,
    ProcessFacts,
    UnsafeLocation,
    binding_problems,
    read_file,
)
from validator.errors import InputError, UnavailableError
from validator.procinfo import PROC, process_start_time, process_uid

__all__ = [
    "SCHEMA",
    "Attestation",
    "AttestationTrust",
    "FileFacts",
    "ProcessFacts",
    "binding_problems",
    "observe_process",
    "read_attestation",
    "read_trusted",
]


@functools.cache
def _adapter() -> Any:
    """Built on first use: the preflight path never reads an attestation and should not pay for this."""
    from pydantic import TypeAdapter

    return TypeAdapter(Attestation)


def _first_error(exc: Any) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(document)"
    extra = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{extra}"


def parse_document(data: bytes, where: str) -> Attestation:
    """Validate the bytes of one attestation. InputError (exit 65 style) names the file and the field."""
    from pydantic import ValidationError

    from validator.sources.files import parse_json

    doc = parse_json(data, where, max_depth=MAX_DEPTH)
    if not isinstance(doc, dict):
        raise InputError(where, "not a JSON object")
    if doc.get("schema") != SCHEMA:
        found = doc.get("schema")
        shown = repr(found)[:80] if isinstance(found, (str, type(None))) else f"a {type(found).__name__}"
        raise InputError(where, f"schema is {shown}, expected {SCHEMA!r}")
    try:
        att: Attestation = _adapter().validate_json(data, strict=True)
    except ValidationError as exc:
        raise InputError(where, _first_error(exc)) from None
    return att


def _read(path: Path) -> tuple[bytes, FileFacts]:
    try:
        return read_file(path, MAX_BYTES)
    except FileNotFoundError:
        why = "no attestation file (is the spark-validate plugin installed?)"
        raise UnavailableError(f"{path}: {why}") from None
    except UnsafeLocation as exc:
        raise UnavailableError(f"{exc}; not reading it as evidence") from None
    except OSError as exc:
        raise UnavailableError(f"{path}: cannot read attestation: {exc.strerror or exc}") from None


def read_attestation(path: Path | str) -> Attestation:
    """Read and validate one attestation file (not yet trusted: see :func:`read_trusted`).

    Raises UnavailableError (exit 69) when the file is missing or refused (not a regular file, too big,
    writable by others), InputError (exit 65) when it is not a valid v2 document; the message names the
    file."""
    p = Path(path)
    data, _ = _read(p)
    return parse_document(data, str(p))


def observe_process(pid: int, proc: Path = PROC) -> ProcessFacts:
    """The attested PID as /proc shows it now (start time and effective UID)."""
    started = process_start_time(pid, proc) if pid > 0 else None
    return ProcessFacts(
        pid=pid,
        running=started is not None,
        start_time=started,
        uid=process_uid(pid, proc) if started is not None else None,
    )


def read_trusted(path: Path | str, *, proc: Path = PROC, hostname: str | None = None) -> AttestationTrust:
    """The validated document with what was observed around it: the file's owner and mode (on the opened
    descriptor) and the writing process in /proc. Judge it with ``binding_problems``."""
    p = Path(path)
    data, file = _read(p)
    doc = parse_document(data, str(p))
    return AttestationTrust(
        document=doc,
        file=file,
        process=observe_process(doc.process.pid, proc),
        hostname=hostname if hostname is not None else socket.gethostname(),
    )
