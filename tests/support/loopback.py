"""Loopback helpers shared by the tests that run real processes: a free port on 127.0.0.1, a bounded wait
until a child process listens on it (failing fast, with its output, if it exits first), and a bounded stop."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Below the kernel's ephemeral range (32768-60999 by default), which bind(0) and every client draw from.
_LOW, _SPAN = 10_000, 1_300
_next = itertools.count(random.randrange(_SPAN))


def _block() -> int:
    """This process's block of ports: one per xdist worker (``gwN``), and one more for a run outside xdist."""
    digits = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
    return int(digits) % 16 if digits.isdigit() else 16


def free_port() -> int:
    """A port on 127.0.0.1 that is free now, from this worker's own block. A port the kernel hands out
    (bind to 0) can go to another worker between our close and the child's bind, and the test then judges
    that worker's server; no two workers draw from the same block."""
    base = _LOW + _block() * _SPAN
    for _ in range(_SPAN):
        port = base + next(_next) % _SPAN
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use, or in TIME_WAIT from a server this worker stopped
                continue
        return port
    raise RuntimeError(f"no free port on 127.0.0.1 in {base}-{base + _SPAN - 1}")


@contextmanager
def socket_dir() -> Iterator[Path]:
    """A new private (0700) directory with a short path for AF_UNIX sockets (a notify socket): a socket's
    path is limited to 107 bytes, which a ``tmp_path`` under a home directory's private base can pass."""
    path = Path(tempfile.mkdtemp(prefix="sv-sock-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def wait_listening(
    port: int, proc: subprocess.Popen[bytes], *, what: str, log: Path | None = None, timeout: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if log is not None:
                output = log.read_text(errors="replace")[-2000:]
            else:
                output = repr(proc.stderr.read()) if proc.stderr else ""
            raise RuntimeError(f"{what} exited early with {proc.returncode}: {output}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


def stop(proc: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """Terminate (or kill) a child and reap it, bounded: a test never leaves a process behind."""
    if proc.poll() is None:
        (proc.kill if kill else proc.terminate)()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
