"""Which server answered: the identity a restart cannot keep, for telling "the same server" from "a new
process on the same port".

The sidecar keeps readiness only while the server it proved is the one answering, and a followed log's
start is claimed by the server that answered first; both compare :class:`ServerIdentity` values. The
fields come from ``/server_info``, from a bound attestation and, where the URL is this host's loopback,
from the listening process in ``/proc`` (:func:`listener_of`), which the live job reads as its listener
source (:func:`gather`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from validator.attestation.trust import url_address
from validator.facts import Facts
from validator.procinfo import stat_fields
from validator.sources.host.listening import ListeningError, listeners

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
        for mine, theirs in (
            (self.startup_time, other.startup_time),
            (self.pid, other.pid),
            (self.process_start, other.process_start),
            (self.random_seed, other.random_seed),
            (self.listener_pid, other.listener_pid),
            (self.listener_start, other.listener_start),
        ):
            if mine is not None and theirs is not None and mine != theirs:
                return False
        return True

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
    """(PID, ``/proc/PID/stat`` starttime in clock ticks) of the process listening on the URL's port, when
    the URL names this host's loopback and that process is visible here; None otherwise (another host,
    another PID namespace, ``hidepid``). The lowest PID is taken when several hold the socket: the parent
    that bound it (SGLang's HTTP server process; its workers are children). Restart detection keys on it
    where ``/server_info`` lacks ``startup_time``: a new process on the same port has another start time."""

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
        fields = stat_fields(pid)
        if fields is not None and fields[19].isdigit():
            return pid, int(fields[19])
    return None


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
