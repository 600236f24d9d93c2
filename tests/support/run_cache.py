"""A directory built once for a whole pytest run, whichever xdist worker asks first.

Some fixtures build what several test files read and never change (the release's sdist and wheel, the
plugin's wheel): with ``--dist loadfile`` those files run in different workers, and a module fixture built
the same thing once per file. The first worker to ask builds it under an exclusive lock in the run's own
temporary directory (private to the run, beside the workers' own); the others wait for the lock and reuse
it. A build that fails leaves nothing marked complete, so the next one to ask builds again.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The directory ``name`` of this run, made by ``build(directory)`` the first time any worker asks."""
    base = factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # pytest-N, the workers' parent
    where, done = run / f"built-once-{name}", run / f"built-once-{name}" / ".complete"
    with (run / f"built-once-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            build(where)
            done.touch()
    return where
