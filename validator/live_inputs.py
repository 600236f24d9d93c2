"""What one live check is asked to read: the server's URL and key, the local files beside it (the
attestation, the log), how long to wait, and whether to probe. ``spark-validate check`` and ``serve``
fill it from their options (``commands/check.py``'s ``live_inputs_from``); the live job's readers are
given it as ``LiveGathering.inputs``.

Apart from ``validator.live`` so that a reader below the job can name its type without importing the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from validator.selection import Selection
    from validator.sources.server.log_state import LogReader
    from validator.sources.server.metrics_reading import MetricsWatch

ProgressFn = Callable[[Any], None]


@dataclass
class LiveInputs:
    url: str
    api_key: str | None = None
    attestation: Path | None = None
    server_uid: int | None = None  # --server-user: who the server runs as, where its process is not visible
    # every --server-user: whose processes found from /proc may be judged, beside the reader's own
    server_uids: tuple[int, ...] = ()
    log: Path | str | None = None  # a file, or "journal:UNIT"
    # a reader that outlives one run (the sidecar follows the log); None: read ``log`` once
    log_reader: LogReader | None = None
    wait_s: float = 0.0
    probe: bool = True
    weights_checker: bool = False
    on_progress: ProgressFn | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    retries: int = 3
    allow_partial: bool = False  # --allow-partial: critical checks that could not run do not block
    selection: Selection | None = None  # --check / --skip
    # the previous /metrics reading; the sidecar's outlives one run (None: a fresh one per run)
    metrics_watch: MetricsWatch | None = None
    # server.progress's stall bound: work waiting with nothing completed this long (--stall-after)
    stall_after_s: float = 30.0
    # how the server's HTTP client reaches it; None: the network. Tests hand the simulator's ASGI app
    # (httpx.ASGITransport) to judge a verdict without starting a server process.
    transport: httpx.AsyncBaseTransport | None = None
