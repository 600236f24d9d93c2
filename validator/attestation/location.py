"""Where the attestation lives, by the contract's order.

``$SPARK_VALIDATE_ATTESTATION``, else ``$RUNTIME_DIRECTORY/attestation.json`` (systemd
``RuntimeDirectory=``), else ``/run/spark-validate/attestation.json`` where that can be created, else
``$XDG_RUNTIME_DIR/spark-validate/attestation.json``; never a shared directory such as ``/tmp``. TP rank
N > 0 writes beside rank 0's file.
"""

from __future__ import annotations

import grp
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from validator.trusted_files import UnsafeLocation

ENV_PATH = "SPARK_VALIDATE_ATTESTATION"
ENV_GROUP = "SPARK_VALIDATE_ATTESTATION_GROUP"  # a group name or GID allowed to read the directory
FILE_NAME = "attestation.json"
RUN_DIR = Path("/run/spark-validate")
XDG_SUBDIR = "spark-validate"


def _run_dir_usable(run_dir: Path) -> bool:
    """``/run/spark-validate`` "where that can be created": it exists as our own directory, or /run lets us
    create it. A directory someone else owns there is not ours to use (the writer would refuse it)."""
    try:
        st = os.lstat(run_dir)
    except FileNotFoundError:
        return os.access(run_dir.parent, os.W_OK | os.X_OK)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def default_path(env: Mapping[str, str] | None = None, *, run_dir: Path | None = None) -> Path | None:
    """Where rank 0 writes, by the contract's order; None when no private runtime directory exists (the
    plugin then writes nothing rather than fall back to a shared directory)."""
    env = os.environ if env is None else env
    run_dir = RUN_DIR if run_dir is None else run_dir
    explicit = env.get(ENV_PATH, "").strip()
    if explicit:
        return Path(explicit)
    runtime = env.get("RUNTIME_DIRECTORY", "").split(":")[0].strip()  # systemd joins several with ':'
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / FILE_NAME
    if _run_dir_usable(run_dir):
        return run_dir / FILE_NAME
    xdg = env.get("XDG_RUNTIME_DIR", "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / XDG_SUBDIR / FILE_NAME
    return None


def rank_path(base: Path, tp_rank: int | None) -> Path:
    """TP rank 0 writes ``base``; rank N > 0 writes ``<stem>.tp<N>.json`` beside it (ranks never share one
    file)."""
    if not tp_rank:
        return base
    return base.with_name(f"{base.stem}.tp{tp_rank}{base.suffix or '.json'}")


def attestation_path(tp_rank: int | None = 0, env: Mapping[str, str] | None = None) -> Path | None:
    base = default_path(env)
    return None if base is None else rank_path(base, tp_rank)


def configured_gid(env: Mapping[str, str] | None = None) -> int | None:
    """The group of ``$SPARK_VALIDATE_ATTESTATION_GROUP`` (a name or a GID), None when unset."""
    env = os.environ if env is None else env
    raw = env.get(ENV_GROUP, "").strip()
    if not raw:
        return None
    if raw.isascii() and raw.isdigit():
        return int(raw)

    try:
        return grp.getgrnam(raw).gr_gid
    except KeyError:
        raise UnsafeLocation(f"{ENV_GROUP}={raw!r}: no such group") from None
