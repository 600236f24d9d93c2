"""A second, unprivileged local account for the trust-boundary tests: the attacker who shares the host.

Acting as another user (``setpriv``, ``setresuid``) takes root. CI runs as root on a fresh machine, so the
account is created on first use (``useradd``), or ``SPARK_VALIDATE_TEST_USER=name`` names one. Run
unprivileged, the tests that need it stop through ``missing``: one line saying so, a skip on a developer's
machine and a failure in CI (an attack never tried is not a defence shown).

Two ways to act as that user: :func:`run_as` runs a command under ``setpriv`` (real UID, GID and no
supplementary groups of the account; the shell steps of an attack: ``mv``, ``mkdir``, ``cat >``), and
:func:`call_as` runs a Python function in a forked child that has dropped to the account, for readers of
this checkout whose interpreter the account may not be able to execute (a venv under ``/root``).
"""

from __future__ import annotations

import os
import pickle
import pwd
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tests.support.prerequisite import missing

NAME = "sv-attacker"
_T = TypeVar("_T")


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int


def ensure_user(name: str | None = None) -> User:
    """The second account (or the account ``name``), created (no home, no login shell) when this process is
    root and it is missing. Parallel test workers may race to create it: a ``useradd`` that loses the race
    fails, and the account the winner made is used."""
    if os.geteuid() != 0:
        missing(
            "acting as a second local user (setpriv, setresuid) needs root: run this test as root, as CI does"
        )
    name = name or os.environ.get("SPARK_VALIDATE_TEST_USER") or NAME
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        if shutil.which("useradd") is None:
            raise RuntimeError(
                f"no local user {name!r} for the trust tests, and no useradd to make one"
            ) from None
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=False,
            capture_output=True,
            timeout=30,
        )
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            raise RuntimeError(
                f"useradd {name} failed: {made.stderr.decode(errors='replace').strip()}"
            ) from None
    if pw.pw_uid == 0 or pw.pw_uid == os.geteuid():
        raise RuntimeError(f"{name!r} must be another, unprivileged user (UID {pw.pw_uid})")
    return User(name, pw.pw_uid, pw.pw_gid)


def run_as(
    user: User,
    argv: Sequence[str],
    *,
    input: bytes | None = None,
    timeout: float = 30,
    cwd: str | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``argv`` as ``user`` (``setpriv --reuid --regid --clear-groups``), bounded; the caller checks rc."""
    cmd = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--", *argv]
    return subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, cwd=cwd, check=False)


def call_as(user: User, fn: Callable[[], _T], *, timeout: float = 30) -> _T:
    """``fn()`` in a forked child running as ``user``; its return value (or exception) comes back pickled."""
    import select
    import signal

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges for good, run, report, never return into pytest
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            try:
                outcome: tuple[bool, object] = (True, fn())
            except BaseException as exc:  # carried back to the parent
                outcome = (False, exc)
            data = pickle.dumps(outcome)
            with os.fdopen(write_end, "wb") as fh:
                fh.write(data)
        finally:
            os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    try:
        with os.fdopen(read_end, "rb") as fh:
            while True:
                ready, _, _ = select.select([fh], [], [], timeout)
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    raise TimeoutError(f"call_as: no answer in {timeout} s")
                chunk = os.read(fh.fileno(), 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.waitpid(pid, 0)
    ok, value = pickle.loads(b"".join(chunks))
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[no-any-return]
