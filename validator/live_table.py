"""The live table: every live source's row (``@live_source``, beside its reader in ``sources/server``, and
the acceptance probe's), in the order ``live.gather_live`` reads them; apart from the preflight table so
that preflight imports no live reader (httpx, the probe).

The ranks keep this order: the files and the log are read whether or not the server answered (they explain
a server that never became ready); /metrics before the probe, so that the probe's own tokens never count as
the server's traffic; the log again after it, to see a server that died while it was probed.
"""

from __future__ import annotations

import validator.probe  # its row is the probe's (the probe is not a reader of sources/server)
import validator.sources.server
from validator.source_table import table
from validator.sources.live_gathering import LiveSource, live_source

__all__ = ["LIVE", "LiveSource"]

LIVE: tuple[LiveSource, ...] = table((validator.sources.server,), "live_source", live_source.rows)
