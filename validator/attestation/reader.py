"""The attestation's read: bounded, non-blocking, and recording every directory from ``/`` to the file.

A regular file only (a FIFO opens without blocking and is refused, so are devices and a symlink as the
file), at most ``MAX_BYTES``, in a directory and with a mode that nobody but its owner can write. The
owners of the directories on the way are recorded, not judged: who may own them depends on who the server
is, which :mod:`validator.attestation.trust` decides.
"""

from __future__ import annotations

from pathlib import Path

from validator.attestation.schema import MAX_BYTES
from validator.trusted_files import FileFacts, read_guarded


def read_file(path: Path, max_bytes: int = MAX_BYTES) -> tuple[bytes, FileFacts]:
    """The bytes and what the reader saw; FileNotFoundError when nothing is there, UnsafeLocation for
    anything refused."""
    return read_guarded(path, max_bytes, what="attestation", follow_last=False)
