"""The latched verdict: what ``/readyz``, ``/report``, the metrics and ``STATUS=`` all read.

Readiness is a latch, not a live query: it is set only by a passing check run and dropped at once by a
failing one or by a sign that the server restarted. After a restart the previous process's report is no
answer about the new one: until a check has judged the new process, :meth:`DaemonState.current` is None and
every reader says "restarted at T, not yet judged" instead of the old verdict. Every change bumps
``version`` so that the HTTP layer can cache its rendered bodies and re-render only when something changed.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone

from validator.facts import ProbeResult
from validator.report import Report, Status

HISTORY_S = 6 * 3600.0  # what the status page charts: the last hours
HISTORY_MAX = 2000  # samples kept (a re-check every 30 s for 6 h is 720)
# Where a report carries the server's own acceptance length: its /metrics gauge, else /server_info's
# running average (both are evidence of spec.accept_length when the server offers them).
SERVER_ACCEPT_KEYS = ("server_accept_length", "server_avg_spec_accept_length")


@dataclass(frozen=True)
class AcceptSample:
    """One acceptance reading for the status page's chart: wall-clock time, value, and the probe's
    confidence interval where it has one."""

    t: float
    value: float
    ci: tuple[float, float] | None = None


def iso_utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def server_accept_length(report: Report) -> float | None:
    """The server's own acceptance length as this run read it, from the checks' evidence."""
    for c in report.checks:
        for key in SERVER_ACCEPT_KEYS:
            v = c.evidence.get(key)
            if isinstance(v, int | float) and not isinstance(v, bool) and v == v:
                return float(v)
    return None


@dataclass
class AcceptHistory:
    """The probe's and the server's acceptance over the last ``HISTORY_S``, bounded in memory. A probe
    is recorded once (re-checks reuse its result object), the server's reading at every run that had one."""

    probe: deque[AcceptSample] = field(default_factory=lambda: deque(maxlen=HISTORY_MAX))
    server: deque[AcceptSample] = field(default_factory=lambda: deque(maxlen=HISTORY_MAX))
    _last_probe: ProbeResult | None = None

    def record(self, report: Report, now: float) -> None:
        probe = report.probe
        if probe is not None and probe is not self._last_probe and probe.accept_length is not None:
            ci = tuple(probe.accept_length_ci) if probe.accept_length_ci else None
            self.probe.append(AcceptSample(now, float(probe.accept_length), ci))  # type: ignore[arg-type]
            self._last_probe = probe
        server = server_accept_length(report)
        if server is not None:
            self.server.append(AcceptSample(now, server))
        for series in (self.probe, self.server):
            while series and series[0].t < now - HISTORY_S:
                series.popleft()


@dataclass
class DaemonState:
    ready: bool = False
    phase: str = "starting"  # starting, connecting, checking, probing, idle, stopping
    reason: str = "no check has run yet"  # why not ready (or "" when ready)
    report: Report | None = None  # the latest check run's report
    version: int = 0  # bumped on every change; HTTP caches key on it
    heartbeat: float = field(default_factory=time.monotonic)  # last scheduler tick (liveness)
    last_run_end: float | None = None  # wall-clock end of the last check run
    history: AcceptHistory = field(default_factory=AcceptHistory)  # for the status page's chart
    # a restart (or the server lost) that no check has judged since: wall-clock time, and what was seen
    restarted_at: float | None = None
    restart_note: str = ""
    restart_what: str = "restarted"  # or "server lost": /health stopped answering, no new process seen

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

    def latch(self, report: Report, *, ready: bool, reason: str, judged: bool = True) -> None:
        """Record a finished check run; ``ready`` is decided by the scheduler (verdict plus epoch).
        ``judged``: the run examined the server that runs now (reached it, no restart since it began);
        only such a run ends a restart's "not yet judged"."""
        self.report = report
        self.ready = ready
        self.last_run_end = time.time()
        if judged:
            self.restarted_at, self.restart_note = None, ""
        if self.restarted_at is not None:
            self.reason = f"{self.unjudged()} (last attempt: {reason})"
        else:
            self.reason = "" if ready else reason
            self.history.record(report, self.last_run_end)
        self.version += 1

    def restarted(self, note: str, at: float, *, what: str = "restarted") -> None:
        """The server restarted (or went away): readiness drops, and the last report stops being the
        current one until a check judges the process that runs now. T stays the first such moment since
        the last judgement; ``note`` is the latest sign seen."""
        if self.restarted_at is None:  # T: the first restart since the server was last judged
            self.restarted_at, self.restart_what = at, what
        self.restart_note = note
        self.ready = False
        self.reason = self.unjudged()
        self.version += 1

    def unjudged(self) -> str:
        """ "restarted at T, not yet judged (what was seen)", or "" when the current process was judged."""
        if self.restarted_at is None:
            return ""
        return f"{self.restart_what} at {iso_utc(self.restarted_at)}, not yet judged ({self.restart_note})"

    def current(self) -> Report | None:
        """The report about the server that runs now: None before the first check and after a restart
        until the new process is judged."""
        return None if self.restarted_at is not None else self.report

    def drop(self, reason: str) -> bool:
        """Readiness drops at once (server gone or restarted); the report stays for ``/report``."""
        changed = self.ready or self.reason != reason
        self.ready = False
        self.reason = reason
        if changed:
            self.version += 1
        return changed

    def failed_ids(self) -> list[str]:
        report = self.current()
        if report is None:
            return []
        return [c.id for c in report.checks if c.status in (Status.FAIL, Status.ERROR)]

    def verdict(self) -> str:
        report = self.current()
        return report.verdict.value if report is not None else "none"

    def status_line(self) -> str:
        """One short human line for systemd's ``STATUS=``."""
        ready = "ready" if self.ready else "not ready"
        failed = self.failed_ids()
        tail = f"; failing {', '.join(failed[:4])}" if failed else ""
        why = f" ({self.reason})" if self.reason and not failed else ""
        return f"{ready}: verdict {self.verdict()}, {self.phase}{tail}{why}"
