"""A command in a namespace of its own (``unshare``), which takes root: CI runs as root. Unprivileged, the
test stops here through :func:`tests.support.prerequisite.needs_root`, one line naming the namespace; as
root the command line is exactly the ``unshare`` one."""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.prerequisite import needs_root


def in_pid_namespace(argv: Sequence[str]) -> list[str]:
    """``argv`` in a private PID namespace with its own /proc: it sees only its own processes."""
    needs_root("a private PID namespace (unshare --pid --fork --mount-proc)")
    return ["unshare", "--pid", "--fork", "--mount-proc", *argv]


def in_network_namespace(argv: Sequence[str]) -> list[str]:
    """``argv`` in a network namespace of its own (its own loopback and socket tables)."""
    needs_root("a network namespace (unshare --net)")
    return ["unshare", "--net", *argv]
