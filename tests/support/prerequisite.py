"""What a test needs from outside the Python environment (a Debian tool, SGLang's own venv, CPU torch).

In CI (``CI`` set, as ``.ci/run`` runs) every prerequisite is installed, so a missing one fails the test:
a skip there would read as a pass of what never ran. Elsewhere the test skips, and the message names what
to install.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(message: str) -> NoReturn:
    """Stop the test (or, at module level, the module) for a missing prerequisite: fail in CI, else skip."""
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


def needs_root(what: str) -> None:
    """Stop the test through :func:`missing` unless this process is root: ``what`` is the privileged step
    (``"a PID namespace (unshare --pid)"``), said in one line with "needs root (CI runs as root)". As root,
    nothing happens and the test runs."""
    if os.geteuid() != 0:
        missing(f"{what} needs root (CI runs as root)")
