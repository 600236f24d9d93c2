"""The private base directory under which tests, benches and scripts write every file the verdict must
trust (rule packs, env files, attestations, probe prompts).

The verdict trusts such a file only when no directory above it can be written by anyone but root and its
user, so where the checkout lives decides whether a scratch directory beside it can be trusted: a clone
under ``/tmp`` (mode 1777) cannot. :func:`private_base` never assumes: it checks each candidate's whole
chain with the validator's own rule (:func:`validator.trusted_files.creatable_by_others`) and takes the
first that passes: ``$SPARK_VALIDATE_TEST_TMP`` when set (and then only it), the checkout's
``.pytest-tmp/``, then ``~/.cache/spark-validate-tests/``. When none passes it raises
:class:`NoPrivateBase`, whose one-line message names each candidate and what was wrong with it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = "SPARK_VALIDATE_TEST_TMP"


class NoPrivateBase(RuntimeError):
    """No candidate directory is writable only by root and this user; the message says why for each."""


def _candidates() -> list[Path]:
    chosen = os.environ.get(ENV)
    if chosen:
        return [Path(chosen).absolute()]
    found = [REPO / ".pytest-tmp"]
    home = os.environ.get("HOME")
    if home:
        found.append(Path(home).absolute() / ".cache" / "spark-validate-tests")
    return found


def _problem(base: Path) -> str | None:
    """Why files under ``base`` would not be trusted (someone else could write a directory on the way)."""
    from validator.trusted_files import UnsafeLocation, creatable_by_others

    try:
        problems = creatable_by_others(base / "probe", ())
    except UnsafeLocation as exc:
        return str(exc)
    return problems[-1] if problems else None


def private_base() -> Path:
    """A directory (made 0700 if missing) whose every directory from ``/`` down only root or this user can
    write; the first candidate that passes, checked before and after it is made."""
    why: list[str] = []
    for base in _candidates():
        problem = _problem(base)
        if problem is None:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
            problem = _problem(base)
            if problem is None:
                return base
        why.append(f"{base}: {problem}")
    raise NoPrivateBase(
        f"no private directory for the tests' trusted files ({'; '.join(why)}); "
        f"set {ENV} to a directory only you (and root) can write"
    )


def private_tempdir(prefix: str) -> Path:
    """A new 0700 directory under :func:`private_base` (benches and scripts; tests use ``tmp_path``)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=private_base()))


def trusted_copy(source: Path, directory: Path) -> Path:
    """``source`` (a file the project ships, read where the checkout happens to live) copied into
    ``directory`` (a test's ``tmp_path``), where the verdict may trust it; returns the copy's path."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / source.name
    shutil.copyfile(source, target)
    return target
