"""The live table: every live source's row, in the order a live check reads them (``live.gather_live``
loops over ``LIVE``). Each row is declared beside its reader (``@live_source`` in
``validator.sources.live_gathering``, given a ``LiveGathering``): the modules of ``validator/sources/server``
that declare one, and the acceptance probe (``validator.probe``). Apart from the preflight table so that
preflight imports no live reader (httpx, the probe).

The ranks keep this order: the files and the log are read whether or not the server answered (a server
that never became ready is explained by them); /metrics before the probe, so that the probe's own tokens
never count as the server's traffic; the log again after it, to see a server that died while it was
probed.
"""

from __future__ import annotations

import validator.probe  # its row is the probe's (the probe is not a reader of sources/server)
import validator.sources.server
from validator.source_table import table
from validator.sources.live_gathering import LiveSource, live_source

__all__ = ["LIVE", "LiveSource"]

LIVE: tuple[LiveSource, ...] = table((validator.sources.server,), "live_source", live_source.rows)
