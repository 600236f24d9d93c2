"""Cheap signs that the server restarted: ``/health`` going down, or its identity changing.

The identity (``server_identity.ServerIdentity``) is what a restart cannot keep: ``startup_time``,
``random_seed``, the attestation's scheduler PID and start time, the listener's PID and start time. One
``/health`` poll at a time, without retries: it runs a one-token generation per call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from validator.errors import InputError, UnavailableError
from validator.sources.server.attestation import read_attestation
from validator.sources.server.client import SGLangClient
from validator.sources.server.identity import ServerIdentity, listener_of


class ServerWatch:
    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        attestation: Path | None = None,
    ) -> None:
        self.url = url
        self.attestation = attestation
        self._client = SGLangClient(url, api_key=api_key, connect_timeout=2.0, read_timeout=5.0, retries=0)
        self.sglang_version = "unknown"
        self.model = "unknown"

    async def healthy(self) -> bool:
        """One ``GET /health``: True on 200; False on any other status or no answer."""
        try:
            return await self._client.health() == 200
        except UnavailableError:
            return False

    async def restarted(self) -> str | None:
        """Over HTTP a restart shows only in :meth:`identity` (the scheduler compares it at each re-check)."""
        return None

    async def identity(self) -> ServerIdentity | None:
        """This server incarnation's fingerprint, or None when it cannot be read now."""
        try:
            info = await self._client.server_info()
        except (UnavailableError, ValueError):
            return None
        self.sglang_version = str(info.get("version") or "unknown")
        self.model = str(info.get("served_model_name") or info.get("model_path") or "unknown")
        pid, start = await asyncio.to_thread(self._attested_process)
        # the listening process (PID, start ticks): None on another host, where the other fields still count
        listener = await asyncio.to_thread(listener_of, self.url)
        return ServerIdentity.from_server(info, pid=pid, process_start=start, listener=listener)

    def _attested_process(self) -> tuple[int | None, float | None]:
        """The writer's PID and start time from the attestation, read the way every reader reads it
        (regular file, size cap, no FIFO, no symlink; ``validator.sources.server.attestation``), in a worker
        thread: a FIFO or a slow disk at the path must never stall ``/livez``."""
        if self.attestation is None:
            return None, None
        try:
            doc = read_attestation(self.attestation)  # strict: its PID is an int, never a bool or a string
        except (InputError, UnavailableError):
            return None, None
        return doc.process.pid, doc.process.start_time

    async def aclose(self) -> None:
        await self._client.aclose()
