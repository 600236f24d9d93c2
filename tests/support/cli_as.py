"""The real command line (``python -m validator ARGS``, a subprocess) run as an unprivileged local user.

Why a mount namespace: this checkout, its virtual environment and the interpreter it was made from may sit
below a directory another user may not enter (``/root``, or a ``mktemp -d`` scratch directory, mode
0700). ``unshare --mount`` gives the command a private view in which each such directory is an empty
tmpfs (mode 0755) holding only the trees the command needs (the checkout, the environment's prefix, the
base interpreter, the directories on its import path), bound back in place; nothing else changes, and no
other process sees it. The command itself then runs through ``setpriv`` with the user's UID, GID and no
supplementary groups: a real second user at the front door.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.cli import REPO
from tests.support.second_user import User


def _closed_above(path: Path) -> Path | None:
    """The topmost directory above ``path`` that others may not traverse (no ``o+x``), None if none."""
    for parent in reversed(path.parents):  # "/" first
        try:
            if not os.stat(parent).st_mode & 0o001:
                return parent
        except OSError:
            return None
    return None


def staged_trees() -> list[tuple[Path, Path]]:
    """(closed directory, tree below it) for every tree the child interpreter needs that lies below a
    directory other users cannot enter; nested trees are left to their outermost one."""
    wanted = [REPO, Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent]
    wanted += [Path(p) for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p)]
    trees = sorted({Path(os.path.realpath(p)) for p in wanted} | {Path(os.path.abspath(p)) for p in wanted})
    outermost: list[Path] = []
    for tree in trees:  # sorted: a tree comes before the trees inside it
        if not any(tree.is_relative_to(kept) for kept in outermost):
            outermost.append(tree)
    return [(closed, tree) for tree in outermost if (closed := _closed_above(tree)) is not None]


def _stage_script(staged: list[tuple[Path, Path]], keeps: list[Path]) -> str:
    """Shell lines (run as root inside ``unshare --mount``) that hide each closed directory behind a 0755
    tmpfs holding only its staged trees: bind each tree aside, mount the tmpfs, bind the tree back."""
    q = shlex.quote
    lines = [
        f"mount --bind {q(str(tree))} {q(str(keep))}" for (_, tree), keep in zip(staged, keeps, strict=True)
    ]
    lines += [f"mount -t tmpfs -o mode=0755 tmpfs {q(str(d))}" for d in sorted({d for d, _ in staged})]
    for (_, tree), keep in zip(staged, keeps, strict=True):
        lines += [f"mkdir -p {q(str(tree))}", f"mount --bind {q(str(keep))} {q(str(tree))}"]
    return "".join(f"{line}; " for line in lines)


def run_cli_as(
    user: User, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m validator ARGS`` as ``user``, with ``env`` (default: PATH only) plus this checkout on
    ``PYTHONPATH``; the caller checks the exit code and the streams."""
    staged = staged_trees()
    keeps = [Path(tempfile.mkdtemp(prefix="sv-stage-")) for _ in staged]
    try:
        child = {"PATH": "/usr/bin:/bin", **(env or {}), "PYTHONPATH": str(REPO), "HOME": "/nonexistent"}
        words = " ".join(shlex.quote(w) for w in ["env", "-i", *(f"{k}={v}" for k, v in child.items())])
        command = shlex.join([sys.executable, "-m", "validator", *args])
        drop = f"setpriv --reuid={user.uid} --regid={user.gid} --clear-groups --"
        script = "set -e; mount --make-rprivate /; " + _stage_script(staged, keeps)
        script += f"cd /; exec {drop} {words} {command}"
        return subprocess.run(
            ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=timeout
        )
    finally:
        for keep in keeps:
            os.rmdir(keep)


READER = "sv-reader"


def ensure_reader() -> User:
    """A third account, neither root nor the server's user: the one that reads (created when missing)."""
    import pwd

    try:
        pw = pwd.getpwnam(READER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", READER],
            check=True,
            capture_output=True,
            timeout=30,
        )
        pw = pwd.getpwnam(READER)
    return User(READER, pw.pw_uid, pw.pw_gid)
