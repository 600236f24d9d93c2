"""The sidecar beside a server it finds from ``/proc`` (``serve`` with no ``--url``): which process it
watches, and the cheap signs that it restarted.

Where the sidecar sees the server's processes (the same host, Compose ``pid: "service:sglang"``,
Kubernetes ``shareProcessNamespace: true``), the process is evidence of its own: its PID and start time
change on every restart, on every SGLang build (``/server_info``'s ``startup_time`` is missing on some),
and a worker node of a multi-node launch, which serves no HTTP, has nothing else to watch. The target is
the server ``--pid`` names, else the only one found; after a restart (the PID gone) it is the server on
the same ``--port`` and ``--node-rank``, the one a supervisor started again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from validator.daemon.watch import ServerWatch
from validator.procinfo import stat_fields
from validator.sources.listening import proc_root
from validator.sources.server_identity import ServerIdentity
from validator.sources.server_processes import ServerProcess, discover


@dataclass
class ProcessTarget:
    """Which server the sidecar follows across restarts."""

    pid: int | None = None
    port: int | None = None
    node_rank: int | None = None
    current: ServerProcess | None = None
    users: tuple[int, ...] = ()  # --server-user: trusted beside the sidecar's own user

    def _alive(self, server: ServerProcess) -> bool:
        fields = stat_fields(server.process.pid, proc_root())
        return fields is not None and fields[19] == str(server.process.start_ticks)

    def find(self) -> ServerProcess | None:
        """The watched server now: the same process while it runs, else its successor (None: none)."""
        if self.current is not None and self._alive(self.current):
            return self.current
        found = discover(users=self.users).servers
        chosen = [s for s in found if s.process.pid == self.pid] if self.pid is not None else []
        if not chosen and self.port is not None:
            chosen = [s for s in found if s.argv_port == self.port and s.node_rank == self.node_rank]
        if not chosen and self.pid is None and self.port is None and len(found) == 1:
            chosen = found
        if not chosen:
            return None
        self.current = chosen[0]
        self.port, self.node_rank = self.current.argv_port, self.current.node_rank
        return self.current


class ProcessWatch:
    """``Watch`` for a found server: healthy while its process runs (and, for a server that serves HTTP,
    ``/health`` answers 200); its identity is the process's PID and start time."""

    def __init__(self, target: ProcessTarget, *, api_key: str | None = None) -> None:
        self.target = target
        self.api_key = api_key
        self.sglang_version = "unknown"
        self.model = "unknown"
        self._http: ServerWatch | None = None

    @property
    def url(self) -> str | None:
        server = self.target.current
        return server.url if server is not None else None

    def _watch(self, url: str) -> ServerWatch:
        if self._http is None or self._http.url != url:
            self._http = ServerWatch(url, api_key=self.api_key)
        return self._http

    async def healthy(self) -> bool:
        server = await asyncio.to_thread(self.target.find)
        if server is None:
            return False
        if server.url is None:
            return True
        return await self._watch(server.url).healthy()

    async def identity(self) -> ServerIdentity | None:
        server = await asyncio.to_thread(self.target.find)
        if server is None:
            return None
        startup = None
        if server.url is not None:
            http = self._watch(server.url)
            seen = await http.identity()
            startup = seen.startup_time if seen is not None else None
            self.sglang_version, self.model = http.sglang_version, http.model
        return ServerIdentity(startup, server.process.pid, server.process.start_time)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
