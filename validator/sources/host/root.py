"""Where the host's ``/proc`` and ``/sys`` are: the one root every reader of the host's trees starts from
(the host record, the listening sockets, the node's network).

A module of its own because it is the foundation of those readers: the host source's module holds a
reader typed against the preflight gathering context, and the socket readers below that context must
not import it.
"""

from __future__ import annotations

import os
from pathlib import Path

HOST_ROOT_ENV = "SPARK_VALIDATE_HOST_ROOT"


def host_root() -> Path:
    """Where the host's /proc and /sys are: ``$SPARK_VALIDATE_HOST_ROOT`` (a container with the host's
    trees mounted elsewhere, or a test's fixture tree), else /."""
    return Path(os.environ.get(HOST_ROOT_ENV) or "/")
