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

from validator.sources.run_as import RunAs, popen_identity

MAX_OUTPUT = 32 * 1024 * 1024  # per stream; the probe answers in one line, a flag table is about 400 KB
MAX_ENV_VARIABLES = 4096  # the environment handed to a child: a server's is a few hundred
MAX_ENV_BYTES = 1024 * 1024  # as much as /proc/PID/environ is read


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
    run_as: RunAs | None = None,
) -> tuple[int, bytes, bytes] | None:
    """``(exit status, stdout, stderr)`` of ``argv`` run with no stdin, or None past ``timeout`` (its process
    group killed). Raises ``OSError`` when it cannot start, :class:`OutputTooLarge` past ``max_output`` bytes
    on a stream (a flood costs no more memory), ``CannotRunAs`` when this process cannot become ``run_as``.
    Only the three pipes are inherited, and the environment is bounded."""
    identity = popen_identity(run_as)
    if env is not None and (
        len(env) > MAX_ENV_VARIABLES or sum(len(k) + len(v) + 2 for k, v in env.items()) > MAX_ENV_BYTES
    ):
        raise OSError(
            errno.E2BIG, f"its environment is over {MAX_ENV_VARIABLES} variables or {MAX_ENV_BYTES} bytes"
        )
    proc = subprocess.Popen(  # type: ignore[call-overload]
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        close_fds=True,  # nothing of this process (its sockets, its files) reaches the child
        start_new_session=True,  # so a timeout can kill wrapper scripts' children too
        **identity,
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
