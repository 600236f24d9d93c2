"""Asking another program for evidence: in a session of its own, with a deadline that kills all of it.

Why a session (``start_new_session``) and ``killpg``: what is asked is the server's interpreter, maybe
behind a wrapper script, or SGLang's whole import chain; either may start children of its own. A child
that outlived a kill of the direct child only would hold the pipes open, and ``communicate`` would wait
for it past the deadline; so the whole group is killed, and the pipes drained, before returning. Used by
the ``sglang`` probe (``server_interpreter``) and the flag-table generator (``sglang_tables``).
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

MAX_OUTPUT = 32 * 1024 * 1024  # per stream; the probe answers in one line, a flag table is about 400 KB


class OutputTooLarge(OSError):
    """The program printed more than the cap on one stream; it was killed (its whole group) then."""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def run_in_own_session(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    max_output: int = MAX_OUTPUT,
) -> tuple[int, bytes, bytes] | None:
    """``(exit status, stdout, stderr)`` of ``argv`` run with no stdin; None when it did not finish within
    ``timeout`` seconds (its whole process group is killed then). Raises ``OSError`` when it cannot start,
    and :class:`OutputTooLarge` (an ``OSError``) when it prints more than ``max_output`` bytes on either
    stream: the streams are read as they come, so a program that floods its output (``yes``) costs at most
    that much memory, not all it can print before the deadline."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,  # so a timeout can kill wrapper scripts' children too
    )
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    names = {out_fd: "stdout", err_fd: "stderr"}
    bufs = {fd: bytearray() for fd in names}
    sel = selectors.DefaultSelector()
    try:
        for fd in names:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _kill_group(proc)
                return None
            for key, _ in sel.select(left):
                fd = int(key.fd)
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    sel.unregister(fd)
                    continue
                bufs[fd] += chunk
                if len(bufs[fd]) > max_output:
                    _kill_group(proc)
                    raise OutputTooLarge(errno.EFBIG, f"printed more than {max_output} bytes on {names[fd]}")
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return None
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    return proc.returncode, bytes(bufs[out_fd]), bytes(bufs[err_fd])
