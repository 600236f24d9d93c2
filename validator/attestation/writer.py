"""The attestation's write: private, atomic, never following a name (``validator.trusted_files``).

The directory is created 0700 (0750 with ``$SPARK_VALIDATE_ATTESTATION_GROUP``); a directory this process
does not own, or that its group or others can write, is refused, and so is a path through one another user
owns or others can write: a pre-created shared directory would let a local user swap the temporary file for
a symlink and have the server's user ``chmod`` any of its files.
"""

from __future__ import annotations

from pathlib import Path

from validator.attestation.schema import Attestation, to_json
from validator.trusted_files import write_private


def write_document(path: Path, doc: Attestation | bytes, *, gid: int | None = None) -> None:
    """Atomically replace ``path`` with ``doc`` (0644, or 0640 and group ``gid``)."""
    data = doc if isinstance(doc, bytes) else to_json(doc)
    write_private(path, data, gid=gid, mode=0o640 if gid is not None else 0o644, what="the attestation")
