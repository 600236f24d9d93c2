"""Where the attestation goes and how it is written: atomically, so a reader never sees half a file.

The path comes from ``SPARK_VALIDATE_ATTESTATION`` (default ``/tmp/spark-validate/attestation.json``).
TP rank 0 writes that path; rank N > 0 writes ``<stem>.tp<N>.json`` beside it, so ranks never race on
one file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_PATH = "SPARK_VALIDATE_ATTESTATION"
DEFAULT_PATH = Path("/tmp/spark-validate/attestation.json")


def attestation_path(tp_rank: int | None = 0, env: Mapping[str, str] | None = None) -> Path:
    """The file this rank writes."""
    env = os.environ if env is None else env
    base = Path(env.get(ENV_PATH) or DEFAULT_PATH)
    if not tp_rank:
        return base
    return base.with_name(f"{base.stem}.tp{tp_rank}{base.suffix or '.json'}")


def write_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` as JSON to ``path``: temporary file in the same directory, fsync, rename, fsync dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
