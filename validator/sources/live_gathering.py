"""What a live source's reader is given: the inputs, the facts gathered so far, the client of the server
being checked, the log reader, and what the pack asks of the probe.

A reader (``async def gather(g: LiveGathering) -> None`` in its source's module, declared in
``validator.source_table.LIVE``) puts its record on ``g.facts``; evidence it could not read is
``Unreadable`` (``validator.sources.gathering``), which ``live.gather_live`` records as
``facts.errors[source]``. The readers run on the sidecar's event loop: file and ``/proc`` reads, parsing
and imports go to a worker thread (``asyncio.to_thread``).

The probe is told what to look for (the pack's probe settings, threshold and prompts file) rather than
reaching back into the pack.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from validator.facts import Facts, ServerFacts

if TYPE_CHECKING:
    from validator.live_inputs import LiveInputs
    from validator.pack_schema import ProbeSettings
    from validator.sources.server.client import SGLangClient
    from validator.sources.server.log_state import LogReader
    from validator.sources.server.start_watch import StartWatch


@dataclass
class LiveGathering:
    inputs: LiveInputs
    facts: Facts
    client: SGLangClient
    log_reader: LogReader | None = None  # one reader for the wait and the log's facts
    watch: StartWatch | None = None  # whether the log shows the awaited start died (with ``log_reader``)
    run_probe: bool = False  # this run probes (the sidecar re-checks without, between probes)
    # what the pack asks of the probe (None: the pack lists no check that reads it)
    probe: ProbeSettings | None = None
    accept_length_min: float | None = None
    probe_prompts: Path | None = None

    @property
    def server(self) -> ServerFacts:
        """The ready server (a source that needs the server source runs only once it is read)."""
        assert self.facts.server is not None
        return self.facts.server
