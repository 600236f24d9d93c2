"""The server log in a live check: read once it is known whether the server answered, and read again
after the probe. While the check waits for the server, ``validator.sources.server.start_watch`` watches it.

A followed log (the sidecar's reader outlives one check) is told which server answered, so that a
previous process's start is not taken for the restarted one's. Every poll runs in a worker thread: in the
sidecar a slow file or a ``journalctl`` must not stall the event loop that answers ``/livez``.
"""

from __future__ import annotations

import asyncio

from validator.errors import InputError, UnavailableError
from validator.facts import LOG, SERVER
from validator.sources.gathering import Unreadable
from validator.sources.live_gathering import LiveGathering, live_source
from validator.sources.server.identity import identity_of


def _asked(g: LiveGathering) -> bool:
    return g.log_reader is not None


@live_source(LOG, 30, applies=_asked)
async def gather(g: LiveGathering) -> None:
    """The server log, read off the event loop. A log that holds no start of the running server is a
    source error (``server.log`` reports it), never facts for other checks to misread. When the server was
    not reached and no start died while the check waited, a dead last start is an earlier attempt as far
    as anyone can tell: no evidence either."""
    reader = g.log_reader
    assert reader is not None  # the row applies only with a reader
    try:
        log = await asyncio.to_thread(reader.poll, identity_of(g.facts))
    except (InputError, UnavailableError) as exc:
        raise Unreadable(str(exc)) from None
    died_before_wait = g.facts.server is None and g.watch is not None and g.watch.seen is None
    if died_before_wait and log.start_failure is not None and log.stale is None:
        log.stale = (
            f"its last start had already died when this check began ({log.start_failure}): it may be an "
            "earlier attempt than the server being waited for"
        )
    problem = log.unusable()
    if problem is not None:
        raise Unreadable(problem)
    g.facts.log = log


# asked for, whatever the probe found
@live_source("log_after_probe", 90, needs=(SERVER, LOG), applies=LiveGathering.probed)
async def poll_again(g: LiveGathering) -> None:
    """The log again, an incremental poll (only what was logged since): after the probe, so that a server
    that died while it was probed is seen by ``server.log``; and by ``server.progress`` at the stall bound.
    A poll that fails, or finds the log unusable, leaves the earlier reading standing."""
    reader = g.log_reader
    assert reader is not None  # it needs the log source
    try:
        log = await asyncio.to_thread(reader.poll, identity_of(g.facts))
    except (InputError, UnavailableError):
        return
    if log.unusable() is None:
        g.facts.log = log
