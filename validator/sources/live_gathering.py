"""What a live source's reader is given: the inputs, the facts so far, the server's client, the log reader,
and what the pack asks of the probe.

A reader is a coroutine function in its source's module, declared there by its row (``@live_source(name,
rank, needs=..., applies=...)``, a row of ``validator.live_table.LIVE``). It puts its record on
``g.facts``; evidence it could not read is ``Unreadable``, recorded as ``facts.errors[source]``. Readers
run on the sidecar's event loop: file and ``/proc`` reads and parsing go to ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from validator.facts import Facts, Progress, ServerFacts
from validator.sources.gathering import Rows, Source

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

    def probed(self) -> bool:
        """The probe was asked for and the server decodes speculatively (on a plain server
        ``spec.accept_length`` reports it: a probe would only measure plain decoding), and is not stalled
        (its requests would only wait out the probe's time cap): a row's ``applies``."""
        stalled = self.facts.progress is not None and self.facts.progress.state is Progress.STALLED
        return self.run_probe and bool(self.server.server_info.get("speculative_algorithm")) and not stalled

    @property
    def server(self) -> ServerFacts:
        """The ready server (a source that needs the server source runs only once it is read)."""
        assert self.facts.server is not None
        return self.facts.server


LiveSource = Source[LiveGathering, Awaitable[None]]
live_source: Rows[LiveGathering, Awaitable[None]] = Rows()  # the rows of ``validator.live_table.LIVE``
