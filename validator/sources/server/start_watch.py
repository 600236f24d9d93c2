"""Whether the log shows that the server start being waited for has died (:class:`StartWatch`), asked
by the readiness wait between polls (``validator.sources.server.readiness``).

A state object of one wait, apart from the log's reader (``validator.sources.server.live_log``): the live
gathering context holds a watch, and the readers typed against that context sit above it. Every poll runs
in a worker thread: in the sidecar a slow file or a ``journalctl`` must not stall the event loop that
answers ``/livez``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from validator.errors import InputError, UnavailableError
from validator.facts import JOURNAL_PREFIX

if TYPE_CHECKING:
    from validator.sources.server.log_state import LogReader


class StartWatch:
    """``start_failed`` for ``readiness.wait_until_ready``: whether the log shows the awaited start died. Only
    a failure seen while waiting counts (an earlier dead start may be a previous attempt: ``earlier`` keeps it
    for the message, and it is no evidence); in the journal a restart is a new invocation. The journal is
    asked at most every ``JOURNAL_EVERY_S``."""

    JOURNAL_EVERY_S = 5.0

    def __init__(self, reader: LogReader) -> None:
        self.reader = reader
        self._one_invocation = reader.where.startswith(JOURNAL_PREFIX)
        self.earlier: str | None = None  # the log's last start had died before the wait began
        self.seen: str | None = None  # a start died while waiting: the wait ended on it
        self._baseline: tuple[int, str | None] | None = None
        self._next = 0.0  # monotonic time of the next poll

    async def __call__(self) -> str | None:
        if time.monotonic() < self._next:
            return None
        if self._one_invocation:
            self._next = time.monotonic() + self.JOURNAL_EVERY_S
        try:
            log = await asyncio.to_thread(self.reader.poll)
        except (InputError, UnavailableError):  # not written yet, or unreadable (server.log says so later)
            if self._baseline is None:
                self._baseline = (0, None)  # a log that was not there held no earlier attempt
            return None
        if log.crash is not None and log.stale is None:
            # a start that was ready and then died: that server is gone, whenever it died (a supervisor's
            # next attempt logs a start of its own, which ends this)
            self.seen = log.crash
            return f"the server died after it was ready: its log {self.reader.where} says: {log.crash}"
        now = (log.generation, log.start_failure)
        if self._baseline is None and self._one_invocation:
            self._baseline = (log.generation, None)  # the current invocation: nothing earlier to mistake
        if self._baseline is None:
            self._baseline, self.earlier = now, log.start_failure
        already = now == self._baseline and self.earlier is not None  # there before the wait began
        if log.start_failure is None or already:
            return None
        self.seen = log.start_failure
        return f"the server failed to start: its log {self.reader.where} says: {log.start_failure}"
