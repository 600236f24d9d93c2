"""The latched verdict: what ``/readyz``, ``/report``, the metrics and ``STATUS=`` all read.

Readiness is a latch, not a live query: it is set only by a passing check run and dropped at once by a
failing one or by a sign that the server restarted. Every change bumps ``version`` so that the HTTP layer
can cache its rendered bodies and re-render only when something changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from validator.report import Report, Status, Verdict


@dataclass
class DaemonState:
    ready: bool = False
    phase: str = "starting"  # starting, connecting, checking, probing, idle, stopping
    reason: str = "no check has run yet"  # why not ready (or "" when ready)
    report: Report | None = None  # the latest check run's report
    version: int = 0  # bumped on every change; HTTP caches key on it
    heartbeat: float = field(default_factory=time.monotonic)  # last scheduler tick (liveness)
    last_run_end: float | None = None  # wall-clock end of the last check run
    last_success_end: float | None = None

    def touch(self) -> None:
        """The scheduler is alive: called on every tick, also while a check is in flight."""
        self.heartbeat = time.monotonic()

    def alive(self, stale_after_s: float) -> bool:
        return time.monotonic() - self.heartbeat < stale_after_s

    def set_phase(self, phase: str) -> bool:
        if phase == self.phase:
            return False
        self.phase = phase
        self.version += 1
        return True

    def latch(self, report: Report, *, ready: bool, reason: str) -> None:
        """Record a finished check run; ``ready`` is decided by the scheduler (verdict plus epoch)."""
        self.report = report
        self.ready = ready
        self.reason = "" if ready else reason
        self.last_run_end = time.time()
        if report.verdict is Verdict.PASS:
            self.last_success_end = self.last_run_end
        self.version += 1

    def drop(self, reason: str) -> bool:
        """Readiness drops at once (server gone or restarted); the report stays for ``/report``."""
        changed = self.ready or self.reason != reason
        self.ready = False
        self.reason = reason
        if changed:
            self.version += 1
        return changed

    def failed_ids(self) -> list[str]:
        if self.report is None:
            return []
        return [c.id for c in self.report.checks if c.status in (Status.FAIL, Status.ERROR)]

    def verdict(self) -> str:
        return self.report.verdict.value if self.report is not None else "none"

    def status_line(self) -> str:
        """One short human line for systemd's ``STATUS=``."""
        ready = "ready" if self.ready else "not ready"
        failed = self.failed_ids()
        tail = f"; failing {', '.join(failed[:4])}" if failed else ""
        why = f" ({self.reason})" if self.reason and not failed else ""
        return f"{ready}: verdict {self.verdict()}, {self.phase}{tail}{why}"
