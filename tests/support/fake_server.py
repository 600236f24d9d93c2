"""Processes that look like SGLang servers, run by a chosen user: the shapes an attacker on the same host
can give a process, and the real server's stand-in, for the tests of the /proc trust rule.

A ``sglang/launch_server.py`` in a world-readable directory makes ``/usr/bin/python3 -m
sglang.launch_server ...`` (run with that directory as its working directory) a process whose argv and
environment are a server's. :data:`LISTENS` binds its ``--port`` on loopback and sleeps (a server that
serves); :data:`SLEEPS` only sleeps (a decoy, or a server still loading).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.support.loopback import stop
from tests.support.second_user import User


def listens(seconds: int) -> str:
    """A program that binds its ``--port`` on loopback, then sleeps ``seconds``."""
    return (
        "import socket, sys, time\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', port))\n"
        "s.listen(8)\n"
        f"time.sleep({seconds})\n"
    )


def sleeps(seconds: int) -> str:
    return f"import time\ntime.sleep({seconds})\n"


LISTENS = listens(120)
SLEEPS = sleeps(120)
PYTHON = "/usr/bin/python3"


@contextmanager
def sglang_tree(body: str = LISTENS) -> Iterator[Path]:
    """A world-readable directory holding ``sglang/launch_server.py`` (``body``), removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="sv-fake-"))
    try:
        os.chmod(top, 0o755)
        (top / "sglang").mkdir(mode=0o755)
        (top / "sglang" / "__init__.py").write_text("")
        (top / "sglang" / "launch_server.py").write_text(body)
        for f in (top / "sglang").iterdir():
            f.chmod(0o644)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def server_argv(port: int, *extra: str) -> list[str]:
    return [PYTHON, "-m", "sglang.launch_server", "--model-path", "/m", "--port", str(port), *extra]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@contextmanager
def process_as(
    user: User | None,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    shell: str | None = None,
    listen: int | None = None,
    prefix: bytes = b"",
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` run as ``user`` (``setpriv``; None: as this process's user) with exactly ``env`` (PATH only
    by default), in ``cwd``. ``shell``: a ``bash -c`` line run instead (``exec -a NAME ...``). Waits until its
    cmdline starts with ``prefix`` (after setpriv and env have exec'd it) and, with ``listen``, until that
    port accepts."""
    words = ["env", "-i", *(f"{k}={v}" for k, v in (env or {"PATH": "/usr/bin:/bin"}).items())]
    words += ["/bin/bash", "-c", shell] if shell is not None else list(argv)
    if user is not None:
        words = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--", *words]
    proc = subprocess.Popen(words, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                started = Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(prefix)
            except OSError:
                started = False
            if started and (listen is None or _accepts(listen)):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{argv or shell} did not start (exit {proc.returncode})")
        yield proc
    finally:
        stop(proc)
