"""Which build this is: the commit it was built from, for ``--version`` and bug reports.

First source that knows, read only when ``--version`` asks (never on preflight's path, no ``git`` process):
``validator/_build.json`` written by ``setup.py`` into sdist and wheel; the distribution's PEP 610
``direct_url.json`` (``vcs_info.commit_id``); the git checkout the package is imported from, read by hand
(``HEAD``, its ref, ``packed-refs``, worktrees included).
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent
BUILD_FILE = _PACKAGE / "_build.json"
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_MAX = 64 * 1024  # every file read here is tiny; a huge one is not git's


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            return fh.read(_MAX).decode("utf-8", "replace")
    except OSError:
        return None


def _sha(text: object) -> str | None:
    text = text.strip() if isinstance(text, str) else None
    return text if text is not None and _SHA.fullmatch(text) else None


def _object(text: str | None) -> dict[str, Any]:
    """A JSON object's members; none where ``text`` is absent or not one."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def from_build_file() -> str | None:
    return _sha(_object(_read(BUILD_FILE)).get("commit"))


def from_distribution() -> str | None:
    """PEP 610: ``direct_url.json`` of an install from a VCS URL holds the commit it resolved to."""
    try:
        text = metadata.distribution("spark-validate").read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError):
        return None
    vcs = _object(text).get("vcs_info")
    return _sha(vcs.get("commit_id")) if isinstance(vcs, dict) else None


def _git_dir(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():  # a worktree or submodule: "gitdir: PATH"
        text = _read(dot) or ""
        if text.startswith("gitdir:"):
            target = Path(text[len("gitdir:") :].strip())
            return target if target.is_absolute() else (root / target).resolve()
    return None


def from_checkout() -> str | None:
    """The commit ``HEAD`` names in the checkout whose top holds this package (``REPO/validator``), read
    without running git. Only that layout counts: an installed or unpacked copy that merely lies somewhere
    inside another repository (a venv in a project, a wheel unpacked in a work tree) is not its checkout."""
    if {"site-packages", "dist-packages"} & set(_PACKAGE.parts):
        return None
    git = _git_dir(_PACKAGE.parent)
    if git is None:
        return None
    head = (_read(git / "HEAD") or "").strip()
    if not head.startswith("ref:"):
        return _sha(head)  # detached
    ref = head[len("ref:") :].strip()
    if ".." in ref or not ref.startswith("refs/"):
        return None
    common = git
    pointer = _read(git / "commondir")  # a worktree keeps its refs in the main repository
    if pointer is not None:
        p = Path(pointer.strip())
        common = p if p.is_absolute() else (git / p).resolve()
    for base in dict.fromkeys((git, common)):
        sha = _sha(_read(base / ref))
        if sha is not None:
            return sha
    for line in (_read(common / "packed-refs") or "").splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref:
            return _sha(sha)
    return None


def commit() -> str | None:
    """The build's commit, or None where no source knows it."""
    return from_build_file() or from_distribution() or from_checkout()


def version_line(tool: str, version: str) -> str:
    sha = commit()
    return f"{tool} {version}" + (f" (commit {sha[:12]})" if sha else " (commit unknown)")
