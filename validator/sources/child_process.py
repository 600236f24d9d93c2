"""Asking another program for evidence: in a session of its own, with a deadline that kills all of it.

Why a session (``start_new_session``) and ``killpg``: what is asked is the server's interpreter, maybe
behind a wrapper script, or SGLang's whole import chain; either may start children of its own. A child
that outlived a kill of the direct child only would hold the pipes open, and ``communicate`` would wait
for it past the deadline; so the whole group is killed, and the pipes drained, before returning. Used by
the ``sglang`` probe (``sglang_install``) and the flag-table generator (``sglang_tables``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_in_own_session(
    argv: Sequence[str], *, timeout: float, cwd: Path | str, env: Mapping[str, str] | None = None
) -> tuple[int, bytes, bytes] | None:
    """``(exit status, stdout, stderr)`` of ``argv`` run with no stdin; None when it did not finish within
    ``timeout`` seconds (its whole process group is killed then). Raises ``OSError`` when it cannot start."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,  # so a timeout can kill wrapper scripts' children too
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.communicate()
        return None
    return proc.returncode, out, err
