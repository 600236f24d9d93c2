"""Installed Python distributions as the server's interpreter sees them, read from ``*.dist-info`` only.

Why: preflight must know which versions the server will import (humming-kernels, flashinfer-python,
flashinfer-cubin) without importing them into this process, which may be a different interpreter.
``importlib.metadata`` scans ``sys.path`` in order and takes the first match; this does the same over the
server interpreter's site directories.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from validator.bounded_files import names_in, read_head
from validator.errors import InputError


def normalize(name: str) -> str:
    """PEP 503 normalisation, with ``_`` as wheels write dist-info names (``flashinfer_python``)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def find_dists(site_dirs: Iterable[Path], names: Iterable[str]) -> dict[str, tuple[Path, str | None]]:
    """The first ``<name>-<version>.dist-info`` of each name in ``site_dirs`` order, listing each directory
    once: normalised name -> (its path, its METADATA Version)."""
    wanted = {normalize(n) for n in names}
    found: dict[str, tuple[Path, str | None]] = {}
    for d in site_dirs:
        try:  # listed as the launch's owners could list it: none where they could not
            candidates = sorted(d / n for n in names_in(d, "a site directory") if n.endswith(".dist-info"))
        except (InputError, OSError):
            continue
        for info in candidates:
            key = normalize(info.name[: -len(".dist-info")].rsplit("-", 1)[0])
            if key in wanted and key not in found:
                found[key] = (info, metadata_version(info / "METADATA"))
        if len(found) == len(wanted):
            break
    return found


def metadata_version(path: Path) -> str | None:
    """``Version:`` from a METADATA header (the block before the first blank line), at most 200 lines."""
    try:
        head = read_head(path, 64 * 1024).decode("utf-8", "replace")  # never a FIFO or /dev/zero
    except OSError:
        return None
    for line in head.splitlines()[:200]:
        if not line.strip():
            break
        if line.startswith("Version:"):
            value = line.partition(":")[2].strip()
            return value if _VERSION.fullmatch(value) else None
    return None


# What a version can hold (PEP 440 and the legacy forms pip still installs). Readers use it as a path
# component (FlashInfer's cache is <base>/<version>/...): a NUL would raise, and '/' or '..' would point the
# kernel scan at another directory.
_VERSION = re.compile(r"(?!\.\.?$)[A-Za-z0-9][A-Za-z0-9.+!_\-]{0,199}")
