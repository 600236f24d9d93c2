"""SGLang flag tables generated from the installed build, cached by build, and chosen for preflight.

Ling branch, PR and dev builds parse differently from stock 0.5.23; a false refusal or acceptance would
mislead. ``sglang-table --python PY`` runs ``sglang_tablegen`` in the server's interpreter and caches the
table keyed by version and a hash of ``srt/server_args.py`` and ``srt/arg_groups/``. Anyone can compute the
key, so a table is trusted only through ``trusted_files`` (else ignored with a warning, the shipped table
used leniently) and written as the attestation is (private directory, ``O_EXCL``, fsync, rename).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from validator.bounded_files import read_below, read_head
from validator.errors import InputError, UnavailableError
from validator.facts import SGLangInstallFacts
from validator.sources.child_process import run_in_own_session
from validator.sources.run_as import RunAs
from validator.sources.sglang.cli_table import TableChoice, load_table
from validator.trusted_files import UnsafeLocation, read_trusted_file, write_private

CACHE_ENV = "SPARK_VALIDATE_CACHE_DIR"
_FLAG_SOURCES = ("srt/server_args.py", "srt/arg_groups")
_MAX_TABLE = 16 * 1024 * 1024


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$SPARK_VALIDATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/spark-validate``, else
    ``~/.cache/spark-validate``; tables live in its ``sglang-tables/``."""
    e = os.environ if env is None else env
    if e.get(CACHE_ENV):
        base = Path(e[CACHE_ENV])
    elif e.get("XDG_CACHE_HOME"):
        base = Path(e["XDG_CACHE_HOME"]) / "spark-validate"
    else:
        base = Path(e.get("HOME") or os.path.expanduser("~")) / ".cache" / "spark-validate"
    return base / "sglang-tables"


def build_key(root: Path, version: str | None) -> str:
    """``<version>-<sha256 of the flag-defining sources, 16 hex>``; the version made filename-safe."""
    h = hashlib.sha256()
    cap = 16 * 1024 * 1024
    try:
        first: bytes | OSError = hashlib.sha256(read_head(root / _FLAG_SOURCES[0], cap)).digest()
    except OSError as exc:
        first = exc
    below = read_below(root / _FLAG_SOURCES[1], ".py", cap, lambda data: hashlib.sha256(data).digest())
    for f, digest in [(root / _FLAG_SOURCES[0], first), *below]:  # each read once, from its directory
        if not isinstance(digest, OSError):
            h.update(os.fsencode(f.relative_to(root)) + b"\0" + digest)  # any name the kernel allows
    safe = "".join(c if c.isalnum() or c in ".+-_" else "_" for c in (version or "unknown"))[:80]
    return f"{safe}-{h.hexdigest()[:16]}"


def cached_table(root: Path, version: str | None) -> Path | None:
    """The cached table for this build, if one was generated (no hashing when the cache is empty)."""
    d = cache_dir()
    try:
        if not any(d.glob("*.json")):
            return None
    except OSError:
        return None
    path = d / f"{build_key(root, version)}.json"
    return path if path.is_file() else None


def generate(python: str, *, timeout: float = 300.0, run_as: RunAs | None = None) -> str:
    """Run the generator inside ``python`` (which must import ``sglang.srt.server_args``: torch and the
    rest of SGLang's import chain) and return the table's text. From an empty working directory, with the
    source on ``-c``, so no local file shadows a module; the whole process group is killed on timeout.
    ``run_as``: the user it runs as (``validator.sources.run_as``; None: this process's)."""
    source = (Path(__file__).resolve().parents[2] / "sglang_tablegen.py").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="spark-validate-table-") as empty:
        if run_as is not None and not run_as.is_me() and os.geteuid() == 0:
            os.chown(empty, run_as.uid, run_as.gid)
        try:
            done = run_in_own_session(
                [python, "-c", source, "--stdout"], timeout=timeout, cwd=empty, run_as=run_as
            )
        except OSError as exc:
            raise InputError(python, f"cannot run: {exc.strerror or exc}") from None
    if done is None:
        raise UnavailableError(f"{python}: the table generator did not finish within {timeout:g} s")
    returncode, out, err = done
    if returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines() or ["no output"]
        raise UnavailableError(
            f"{python}: the table generator exited {returncode} "
            f"(SGLang's server_args must import there): {lines[-1][:300]}"
        )
    if len(out) > _MAX_TABLE:
        raise InputError(python, f"the generated table is over {_MAX_TABLE} bytes")
    return out.decode("utf-8", errors="replace")


def store(text: str, root: Path, version: str | None, env: Mapping[str, str] | None = None) -> Path:
    """Write the table atomically as ``<cache>/<build key>.json`` (0644, in a directory created 0700 that
    only this user can write; an existing one owned by another user, or writable by others, is refused)."""
    d = cache_dir(env)
    path = d / f"{build_key(root, version)}.json"
    try:
        write_private(path, text.encode("utf-8"), mode=0o644, what="the flag table")
    except UnsafeLocation as exc:
        raise UnavailableError(str(exc)) from None
    return path


def untrusted_reason(path: Path) -> str | None:
    """Why the generated table at ``path`` must not be used (someone else could have written it, or it is
    not a regular file); None when it may."""
    try:
        read_trusted_file(path, _MAX_TABLE, what="flag table")
    except FileNotFoundError:
        return f"{path}: no longer there"
    except UnsafeLocation as exc:
        return str(exc)
    return None


def table_for(sglang: SGLangInstallFacts, interpreter: str | None) -> TableChoice | None:
    """The table preflight should parse with for this build; None when the shipped one is exactly it
    (same version, no table generated for this build)."""

    if sglang.root is None:
        return None
    cached = cached_table(sglang.root, sglang.version)
    shipped = load_table()
    if cached is not None:
        why = untrusted_reason(cached)
        if why is None:
            described = f"the table generated from SGLang {sglang.version} ({cached})"
            return TableChoice(load_table(cached), described)
        return TableChoice(
            shipped,
            f"the shipped SGLang {shipped.sglang_version} table, leniently: the generated table was ignored "
            f"({why})",
            lenient=True,
            unread=True,
        )
    if sglang.version is None or sglang.version == shipped.sglang_version:
        return None
    how = f"spark-validate sglang-table --python {interpreter or '<the server python>'}"
    return TableChoice(
        shipped,
        f"the shipped SGLang {shipped.sglang_version} table (SGLang {sglang.version} has no generated "
        f"table: run `{how}` on the server host)",
        lenient=True,
        unread=True,
    )
