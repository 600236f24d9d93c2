"""The sidecar beside a server found from ``/proc`` (``serve`` with no ``--url``): which process it watches,
and the cheap signs that it restarted (PID and start time change on every restart and build).

The target is the server ``--pid`` names, else the only one found. After a restart it follows the process
that now holds the followed server's listening socket (a worker: same ``--node-rank``), of the same user or
a ``--server-user``: anyone can write a server's argv, so a look-alike is never followed and is reported as
passed over. Two that qualify are ambiguous: neither is followed.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from validator.daemon.watch import ServerWatch
from validator.procinfo import start_ticks
from validator.sources.host.listening import proc_root
from validator.sources.host.server_processes import ServerProcess, discover
from validator.sources.server.identity import ServerIdentity

MAX_PASSED_OVER = 3  # processes named in the report as not followed, with why


@dataclass
class ProcessTarget:
    """Which server the sidecar follows across restarts, and what changed since the daemon last asked."""

    pid: int | None = None
    port: int | None = None  # the port the followed server holds (its HTTP socket; else its argv's)
    node_rank: int | None = None
    current: ServerProcess | None = None
    users: tuple[int, ...] = ()  # --server-user: trusted beside the sidecar's own user
    uid: int | None = None  # the user of the first process followed
    why_none: str = "no SGLang server process found (see `spark-validate check`)"
    _changes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _alive(self, server: ServerProcess) -> bool:
        ticks = start_ticks(server.process.pid, proc_root())
        return ticks is not None and ticks == server.process.start_ticks

    def _trusted(self, uid: int | None) -> bool:
        return uid is not None and (uid == self.uid or uid in self.users)

    def _passed_over(self, server: ServerProcess) -> str | None:
        """Why ``server`` is not the followed server's successor (None: it is)."""
        p = server.process
        who = f"PID {p.pid} (UID {p.uid if p.uid is not None else 'unknown'})"
        if server.node_rank != self.node_rank:
            return f"{who}: --node-rank {server.node_rank}"
        if not self._trusted(p.uid):
            return f"{who}: not the server's user"
        if server.role == "worker":
            return None
        if server.http is None or server.http.port != self.port:
            return f"{who}: holds no listening socket on port {self.port}"
        return None

    def _first(self, found: list[ServerProcess]) -> list[ServerProcess]:
        """Nothing followed yet: the process ``--pid`` names, else the only server found."""
        if self.pid is not None:
            return [s for s in found if s.process.pid == self.pid]
        return found if len(found) == 1 else []

    def find(self) -> ServerProcess | None:
        """The watched server now: the same process while it runs, else its successor (None: none, and
        ``why_none`` says why). A change of process is queued for :meth:`take_change`. Called from
        worker threads (the health watch and a check at once): one at a time."""
        with self._lock:
            return self._find()

    def _find(self) -> ServerProcess | None:
        previous = self.current
        if previous is not None and self._alive(previous):
            return previous
        discovery = discover(users=self.users)
        found = discovery.servers
        if self.uid is None and previous is None:
            chosen = self._first(found)
            passed: list[str] = []
        else:
            why = {id(s): self._passed_over(s) for s in found}
            chosen = [s for s in found if why[id(s)] is None]
            # named: those that claim the followed port (a decoy's argv), not the host's other servers
            claim = [s for s in found if self.port in (s.argv_port, s.http.port if s.http else None)]
            passed = [w for s in claim if (w := why[id(s)]) is not None]
            # and those discovery itself ignored (another user's; not listening) that claim it
            passed += [i.describe() for i in discovery.ignored if i.port == self.port]
        if previous is not None:
            self.current = None
        if len(chosen) != 1:
            where = f"port {self.port}" if self.port is not None else "its port"
            if len(chosen) > 1:
                pids = ", ".join(str(s.process.pid) for s in chosen)
                self.why_none = f"processes {pids} all qualify as the server on {where}: none is followed"
            elif self.uid is None and previous is None:
                self.why_none = "no SGLang server process found (see `spark-validate check`)"
            else:
                self.why_none = f"no process of the server's user holds {where}"
            if passed:
                self.why_none += "; passed over: " + "; ".join(passed[:MAX_PASSED_OVER])
            if previous is not None:
                self._changes.append(f"server process PID {previous.process.pid} exited")
            return None
        new = chosen[0]
        if previous is not None:
            self._changes.append(
                f"server process PID {previous.process.pid} was replaced by PID {new.process.pid}"
            )
        self.current = new
        if self.uid is None:
            self.uid = new.process.uid
        self.port = new.http.port if new.http is not None else new.argv_port
        self.node_rank = new.node_rank
        return new

    def take_change(self) -> str | None:
        """The restarts seen since the last call, in one line (None: none)."""
        with self._lock:
            if not self._changes:
                return None
            changes, self._changes = self._changes, []
        return "; ".join(changes)


class ProcessWatch:
    """``Watch`` for a found server: healthy while its process runs (and, for a server that serves HTTP,
    ``/health`` answers 200); its identity is the process's PID and start time."""

    def __init__(self, target: ProcessTarget, *, api_key: str | None = None) -> None:
        self.target = target
        self.api_key = api_key
        self.sglang_version = "unknown"
        self.model = "unknown"
        self._http: ServerWatch | None = None
        self._http_pid: int | None = None
        self._closing: list[ServerWatch] = []  # replaced clients, closed at the next chance

    @property
    def url(self) -> str | None:
        server = self.target.current
        return server.url if server is not None else None

    def _watch(self, url: str, pid: int) -> ServerWatch:
        """The HTTP watch of the process followed now: a new process gets a new client (a connection
        kept alive to the previous one is no answer about it)."""
        if self._http is None or self._http.url != url or self._http_pid != pid:
            if self._http is not None:
                self._closing.append(self._http)
            self._http, self._http_pid = ServerWatch(url, api_key=self.api_key), pid
        return self._http

    async def healthy(self) -> bool:
        server = await asyncio.to_thread(self.target.find)
        if server is None:
            return False
        if server.url is None:
            return server.elsewhere is None  # a worker is up while it runs; a socket elsewhere is unreached
        await self._close_replaced()
        return await self._watch(server.url, server.process.pid).healthy()

    async def restarted(self) -> str | None:
        """Whether the followed process was replaced or exited since the last call (said in one line)."""
        await asyncio.to_thread(self.target.find)
        return self.target.take_change()

    async def identity(self) -> ServerIdentity | None:
        server = await asyncio.to_thread(self.target.find)
        if server is None:
            return None
        startup = None
        if server.url is not None:
            http = self._watch(server.url, server.process.pid)
            seen = await http.identity()
            startup = seen.startup_time if seen is not None else None
            self.sglang_version, self.model = http.sglang_version, http.model
        return ServerIdentity(startup, server.process.pid, server.process.start_time)

    async def _close_replaced(self) -> None:
        while self._closing:
            await self._closing.pop().aclose()

    async def aclose(self) -> None:
        await self._close_replaced()
        if self._http is not None:
            await self._http.aclose()
