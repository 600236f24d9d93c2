"""Which server answered: the identity a restart cannot keep, telling "the same server" from "a new process
on the same port" (the sidecar's readiness, a followed log's start). From ``/server_info``, a bound
attestation and, on this host's loopback, the listening process (:func:`listener_of`, the listener source).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from validator.attestation.trust import url_address
from validator.facts import SERVER, Facts
from validator.procinfo import start_ticks
from validator.sources.host.listening import ListeningError, listeners
from validator.sources.live_gathering import live_source

if TYPE_CHECKING:
    from validator.sources.live_gathering import LiveGathering


@dataclass(frozen=True)
class ServerIdentity:
    """What a restart cannot keep. ``/server_info``'s ``startup_time`` (per-phase durations of this start)
    exists only on recent builds; ``random_seed`` is on every build (SGLang draws it at start unless
    ``--random-seed`` pins it); when an attestation names it, the scheduler's PID and process start time;
    when the listening process is visible on this host, its PID and ``/proc`` start time."""

    startup_time: Any = None
    pid: int | None = None
    process_start: Any = None
    random_seed: int | None = None
    listener_pid: int | None = None
    listener_start: int | None = None  # /proc/PID/stat starttime (clock ticks since boot)

    def same_server(self, other: ServerIdentity) -> bool:
        """False only when a field both sides know differs: an attestation that one reader could use and
        the other could not (stale, unreadable), or a field one build does not serve, is no sign of a
        restart."""
        pairs = ((getattr(self, f.name), getattr(other, f.name)) for f in fields(self))
        return all(mine is None or theirs is None or mine == theirs for mine, theirs in pairs)

    @classmethod
    def from_server(
        cls,
        server_info: Mapping[str, Any],
        *,
        pid: int | None = None,
        process_start: Any = None,
        listener: tuple[int, int] | None = None,
    ) -> ServerIdentity:
        seed = server_info.get("random_seed")
        return cls(
            startup_time=server_info.get("startup_time"),
            pid=pid,
            process_start=process_start,
            random_seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            listener_pid=listener[0] if listener is not None else None,
            listener_start=listener[1] if listener is not None else None,
        )


_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def listener_of(url: str) -> tuple[int, int] | None:
    """(PID, ``stat`` start ticks) of the process listening on the URL's port when the URL is this host's
    loopback and the process is visible; None otherwise. The lowest PID (the parent that bound it) is taken
    when several hold the socket."""

    host, port = url_address(url)
    if host is None or port is None or host.strip("[]") not in _LOOPBACK:
        return None
    addresses = ("127.0.0.1", "::1") if host == "localhost" else (host.strip("[]"),)
    pids: set[int] = set()
    for address in addresses:
        try:
            pids.update(listeners(port, address=address).pids)
        except (ListeningError, OSError):
            return None
    for pid in sorted(pids):
        ticks = start_ticks(pid)
        if ticks is not None:
            return pid, ticks
    return None


@live_source("listener", 50, needs=(SERVER,))  # the identity's
async def gather(g: LiveGathering) -> None:
    """The process listening on the URL's port, read from ``/proc`` in a worker thread."""
    g.server.listener = await asyncio.to_thread(listener_of, g.inputs.url)


def identity_of(facts: Facts) -> ServerIdentity | None:
    """The identity of the server these facts describe (None when it was not reached)."""
    if facts.server is None:
        return None
    pid: int | None = None
    start: Any = None
    if facts.attestation is not None:
        pid = facts.attestation.process.pid
        start = facts.attestation.process.start_time
    return ServerIdentity.from_server(
        facts.server.server_info, pid=pid, process_start=start, listener=facts.server.listener
    )
