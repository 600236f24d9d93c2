"""The real command line (``python -m validator ARGS``, a subprocess) run as an unprivileged local user.

Why a mount namespace: this checkout's interpreter lives under ``/root`` (mode 0700 in CI), which another
user may not enter. ``unshare --mount`` gives the command a private view in which ``/root`` is an empty
tmpfs (mode 0755) holding only the interpreter's tree, bound back in place; nothing else changes, and no
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

_PYENV = Path(sys.base_prefix).parents[1]  # /root/.pyenv/versions/X -> /root/.pyenv


def run_cli_as(
    user: User, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m validator ARGS`` as ``user``, with ``env`` (default: PATH only) plus this checkout on
    ``PYTHONPATH``; the caller checks the exit code and the streams."""
    keep = Path(tempfile.mkdtemp(prefix="sv-pyenv-"))
    try:
        child = {"PATH": "/usr/bin:/bin", **(env or {}), "PYTHONPATH": str(REPO), "HOME": "/nonexistent"}
        words = " ".join(shlex.quote(w) for w in ["env", "-i", *(f"{k}={v}" for k, v in child.items())])
        command = shlex.join([sys.executable, "-m", "validator", *args])
        drop = f"setpriv --reuid={user.uid} --regid={user.gid} --clear-groups --"
        script = "set -e; mount --make-rprivate /; "
        if str(_PYENV).startswith("/root/"):
            script += (
                f"mount --bind {shlex.quote(str(_PYENV))} {keep}; mount -t tmpfs -o mode=0755 tmpfs /root; "
                f"mkdir -p {shlex.quote(str(_PYENV))}; mount --bind {keep} {shlex.quote(str(_PYENV))}; "
            )
        script += f"cd /; exec {drop} {words} {command}"
        return subprocess.run(
            ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=timeout
        )
    finally:
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
