"""Decoy server processes for the discovery and following tests: a process whose argv is a healthy SGLang
server's (``python3 -m sglang.launch_server`` with the recipe's flags and the FP8 head's variable) but
that is not the server: it either sleeps holding no socket, or listens on its ``--port`` and never answers
(the kernel completes each connection; nothing is ever read or written).

The ``sglang`` package it imports is a stub written to a world-readable directory, run by the system
``python3``, so that the second local user (``tests/support/second_user.py``) can start one too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.second_user import User

SYSTEM_PYTHON = "/usr/bin/python3"
FP8 = {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}

_STUB = """\
import socket, sys, time
argv = sys.argv[1:]
port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 30000
if {listen}:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
time.sleep(600)
"""


def healthy_argv(port: int) -> list[str]:
    """The simulator's healthy scenario as SGLang's own argv on ``port`` (what passes preflight)."""
    from validator.sim import scenarios
    from validator.sim.server_args import launch_argv

    args = launch_argv(scenarios.resolve(["healthy"]), host="127.0.0.1", port=port, api_key=None)
    return [SYSTEM_PYTHON, "-m", "sglang.launch_server", *args]


def stub_dir(*, listen: bool) -> Path:
    """A world-readable directory holding the ``sglang`` stub (the caller removes it)."""
    top = Path(tempfile.mkdtemp(prefix="sv-decoy-"))
    (top / "sglang").mkdir()
    (top / "sglang" / "__init__.py").write_text("")
    (top / "sglang" / "launch_server.py").write_text(_STUB.format(listen=listen))
    for path in (top, top / "sglang", top / "sglang" / "__init__.py", top / "sglang" / "launch_server.py"):
        path.chmod(0o755)
    return top


def start_decoy(top: Path, port: int, *, user: User | None = None) -> subprocess.Popen[bytes]:
    """A decoy with the healthy argv on ``port``, as ``user`` (``setpriv``) or as this user, once its
    ``/proc/PID/cmdline`` shows the server's argv (not yet ``setpriv``'s)."""
    argv = healthy_argv(port)
    if user is not None:
        argv = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--", *argv]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(top), **FP8}
    proc = subprocess.Popen(argv, cwd=top, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(SYSTEM_PYTHON.encode() + b"\0-m\0"):
                return proc
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"decoy exited early with {proc.returncode}")
        time.sleep(0.02)
    proc.kill()
    raise TimeoutError("decoy never ran its argv")


def remove(top: Path) -> None:
    shutil.rmtree(top, ignore_errors=True)


def is_root() -> bool:
    return os.geteuid() == 0
