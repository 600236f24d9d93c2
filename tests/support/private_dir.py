"""A scratch directory the verdict can trust, for benches and scripts that run a simulator with its
attestation: under the checkout's ``.pytest-tmp/`` (as the tests' own files), never ``/tmp``, which is
world-writable, so that ``attestation.trust`` refuses anything below it, sticky bit or not."""

from __future__ import annotations

import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def private_tempdir(prefix: str) -> Path:
    """A new 0700 directory that only this user (and root) can write, nor any directory above it."""
    base = REPO / ".pytest-tmp"
    base.mkdir(mode=0o755, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
