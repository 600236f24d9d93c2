"""The simulator's web server is an optional install: ``pip install 'spark-validate[sim]'`` (starlette,
uvicorn). Production installs (the sidecar, ``launch``, the image) never serve the simulator, so they do not
carry its server; ``sim`` and ``demo`` say in one line what to install when it is missing (exit 69).
"""

from __future__ import annotations

import importlib

from validator.errors import UnavailableError

INSTALL = "pip install 'spark-validate[sim]'"
SERVER_PACKAGES = ("starlette", "uvicorn")


def require_server(command: str) -> None:
    """Raise ``UnavailableError`` naming the install command when the simulator's server cannot be imported
    (not installed, or broken)."""
    missing = []
    for name in SERVER_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise UnavailableError(
            f"{command}: the simulator's web server ({', '.join(missing)}) is an optional install: {INSTALL}"
        )
