"""The scheduler: wait for the server, run a full check (with the probe), then re-check every ``interval``
and probe every ``probe_interval``, one check at a time.

Readiness is latched from check runs only: it drops on ``/health`` lost, a restart or a ``fail``, and only a
full check brings it back (a probe is never lent across server processes; an ``epoch`` counts restarts).
An ``inconclusive`` on the server last proven keeps readiness for ``unready_after_s`` (hysteresis), enforced
every tick. A heartbeat each tick feeds ``/livez`` and the watchdog; an overrunning check is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from validator.daemon.logs import Logger, check_fields
from validator.daemon.metrics import DaemonMetrics
from validator.daemon.notify import Notifier
from validator.daemon.state import DaemonState
from validator.facts import ProbeResult
from validator.live import LiveResult
from validator.report import Report, Status, Verdict, unreached_report
from validator.sources.server.identity import ServerIdentity

# (full, previous_probe) -> result. full=True waits for the server and runs the probe.
CheckFn = Callable[[bool, ProbeResult | None], Awaitable[LiveResult]]


ROUTINE_PHASES = frozenset({"checking", "idle"})
STALL_CHECK = "server.progress"  # its failure is a stall, said so: not a misconfiguration, not a draft


class Watch(Protocol):
    sglang_version: str
    model: str

    async def healthy(self) -> bool: ...

    async def identity(self) -> ServerIdentity | None: ...

    async def restarted(self) -> str | None:
        """A restart the watch saw itself since the last call (the followed process replaced or gone),
        in one line; None for none (a watch over HTTP sees restarts through ``identity``)."""
        ...


@dataclass(frozen=True)
class Schedule:
    interval_s: float = 30.0  # configuration re-check
    probe_interval_s: float = 600.0  # full check with the acceptance probe
    health_interval_s: float = 5.0  # /health poll (restart detection)
    full_timeout_s: float = 1200.0  # a full check's deadline (wait + probe + margin)
    recheck_timeout_s: float = 120.0
    tick_s: float = 0.5  # heartbeat granularity
    probe: bool = True  # --no-probe turns the probe off for every run
    unready_after_s: float = 30.0  # an inconclusive state drops readiness only after lasting this long
    health_retries: int = 2  # a failed /health poll is retried this often before readiness drops
    health_retry_s: float = 0.2


class Daemon:
    def __init__(
        self,
        *,
        check: CheckFn,
        watch: Watch,
        schedule: Schedule,
        state: DaemonState,
        metrics: DaemonMetrics,
        notifier: Notifier,
        log: Logger,
        rule_pack: str,
    ) -> None:
        self.check = check
        self.watch = watch
        self.schedule = schedule
        self.state = state
        self.metrics = metrics
        self.notifier = notifier
        self.log = log
        self.rule_pack = rule_pack
        self.epoch = 0
        self.need_full = True
        self.probe: ProbeResult | None = None  # the current incarnation's last probe
        self.ident: ServerIdentity | None = None
        self.proven: ServerIdentity | None = None  # the server the last passing check examined
        self.inconclusive_since: float | None = None  # readiness held since then (hysteresis)
        self.next_full = 0.0
        self.next_recheck = 0.0
        self.healthy: bool | None = None
        self._wake = asyncio.Event()
        self._status = ""

    # ---- state changes, each published to metrics, systemd and the log ----

    def _publish(self) -> None:
        self.metrics.set_ready(self.state.ready)
        line = self.state.status_line()
        if line != self._status:
            self._status = line
            self.notifier.status(line)

    def set_phase(self, phase: str) -> None:
        if self.state.set_phase(phase):
            # every re-check passes through checking -> idle; the canonical check line already says it ran
            log = self.log.debug if phase in ROUTINE_PHASES else self.log.info
            log("phase", phase=phase, ready=self.state.ready)
            self._publish()

    def restart_suspected(self, note: str, *, what: str = "restarted") -> None:
        """The server went away or is a new process: readiness drops now, the last report stops being
        current ("``what`` at T, not yet judged"), and a full check runs next."""
        self.epoch += 1
        self.need_full = True
        # not known healthy until seen again: the health watch's next failed /health is about the process
        # said gone here, no new sign, and must not overwrite this note with a vaguer "server lost"
        self.healthy = False
        self.probe = None
        self.ident = None
        self.proven = None
        self.inconclusive_since = None
        was_ready = self.state.ready
        self.state.restarted(note, time.time(), what=what)
        self.metrics.forget_checks()
        self.log.warning("readiness dropped", reason=self.state.reason, was_ready=was_ready)
        self._publish()
        self._wake.set()

    # ---- tasks ----

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [
            asyncio.create_task(self._schedule(), name="scheduler"),
            asyncio.create_task(self._health_watch(), name="health-watch"),
        ]
        if self.notifier.watchdog_interval_s:
            tasks.append(
                asyncio.create_task(self._watchdog(self.notifier.watchdog_interval_s), name="watchdog")
            )
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t is not stopper and not t.cancelled() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
        finally:
            for t in [stopper, *tasks]:
                t.cancel()
            for t in [stopper, *tasks]:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _watchdog(self, every_s: float) -> None:
        stale = max(3 * self.schedule.tick_s, every_s)
        while True:
            if self.state.alive(stale):
                self.notifier.watchdog()
            await asyncio.sleep(every_s)

    async def _health_watch(self) -> None:
        while True:
            await asyncio.sleep(self.schedule.health_interval_s)
            ok = await self.watch.healthy()
            for _ in range(self.schedule.health_retries if not ok else 0):
                await asyncio.sleep(self.schedule.health_retry_s)
                if ok := await self.watch.healthy():
                    break
            moved = await self.watch.restarted()
            if moved is not None:
                self.restart_suspected(moved)
                ok = False  # whatever /health said, it was about the previous process
            elif not ok and (self.healthy or self.state.ready):
                self.restart_suspected("server /health stopped answering 200", what="server lost")
            elif ok and self.healthy is False and not self.state.ready:
                self._wake.set()  # back: check it now rather than at the next interval
            self.healthy = ok

    async def _schedule(self) -> None:
        while True:
            now = time.monotonic()
            if self.need_full or now >= self.next_full:
                await self.run_once(full=True)
            elif now >= self.next_recheck:
                await self.run_once(full=False)
            await self._sleep_until(min(self.next_full, self.next_recheck))

    def _tick(self) -> None:
        """Every scheduler tick: prove liveness, and end a readiness hold whose time is up."""
        self.state.touch()
        since = self.inconclusive_since
        if since is not None and time.monotonic() - since >= self.schedule.unready_after_s:
            self.inconclusive_since = None
            reason = f"inconclusive for {self.schedule.unready_after_s:g} s (--unready-after)"
            if self.state.drop(reason):
                self.log.warning("readiness dropped", reason=reason, was_ready=True)
            self._publish()

    async def _sleep_until(self, when: float) -> None:
        self._wake.clear()
        while not self._wake.is_set():
            self._tick()
            left = when - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(left, self.schedule.tick_s))

    async def run_once(self, *, full: bool) -> Report:
        """One check run: a full one (wait, probe) or a configuration re-check reusing the last probe."""
        sched = self.schedule
        moved = await self.watch.restarted()
        if moved is not None:
            self.restart_suspected(moved)
            full = True
        if not full:
            ident = await self.watch.identity()
            if ident is not None and self.ident is not None and not ident.same_server(self.ident):
                self.restart_suspected("server restarted (its identity changed: startup_time, seed or PID)")
                full = True
        epoch = self.epoch
        since = self.inconclusive_since
        probing = full and sched.probe
        self.set_phase("checking")
        t0 = time.monotonic()
        result = await self._bounded(
            self.check(full, None if full else self.probe),
            sched.full_timeout_s if full else sched.recheck_timeout_s,
        )
        report = result.report
        server_up = result.reached
        if server_up:
            # a run that reached the server saw it up: a /health lost from here on is a loss to report,
            # even when the health watch had not looked yet (a server stopped right after its first check)
            self.healthy = True
        if full:
            self.probe = report.probe if server_up else None
            # the identity of the process this check examined, not of whatever answers a moment later
            self.ident = result.identity if server_up else None
            if server_up:
                await self.watch.identity()  # refreshes the build-info labels
            self.metrics.set_build_info(self.watch.sglang_version, self.watch.model)
        elif not server_up:
            self.need_full = True  # gone or unreadable: whatever answers next must be proven again
            self.probe = None
            self.ident = None
        now = time.monotonic()
        held = self._hold(result, epoch, now)
        # the hold ran out during or at this run: the same reason as the tick's, which this run's latch
        # would otherwise overwrite
        expired = since is not None and not held and now - since >= sched.unready_after_s
        # a stall is looked at again by a full check every interval: the probe was not run into it, so only
        # a full check can bring readiness back once work completes (and its own small request is the
        # only evidence where the server serves no /metrics)
        stalled = any(c.id == STALL_CHECK and c.status is Status.FAIL for c in report.checks)
        retry_full = report.verdict is Verdict.INCONCLUSIVE or not server_up or stalled
        if full:
            self.need_full = retry_full
            self.next_full = now + (sched.interval_s if retry_full else sched.probe_interval_s)
        elif stalled:
            self.next_full = min(self.next_full, now + sched.interval_s)
        self.next_recheck = now + sched.interval_s
        if held and self.inconclusive_since is not None:  # look again before the hold runs out
            self.next_recheck = min(self.next_recheck, self.inconclusive_since + sched.unready_after_s)
        probe_ok = self.probe is not None or not sched.probe
        proven = report.verdict is Verdict.PASS and epoch == self.epoch and probe_ok and server_up
        ready = proven or held
        if proven:
            self.proven = result.identity
        if not held:
            self.inconclusive_since = None
        reason = (
            "server stalled: it answers /health but completes no work (server.progress)"
            if stalled
            else f"inconclusive for {sched.unready_after_s:g} s (--unready-after)"
            if expired and report.verdict is Verdict.INCONCLUSIVE
            else f"verdict {report.verdict.value}"
            if report.verdict is not Verdict.PASS
            else "server restarted during the check"
            if epoch != self.epoch
            else "no acceptance probe yet"
        )
        if not server_up:  # what kept it from the server (none found, none answering), in its own words
            why = next((c.message for c in report.checks if c.status is Status.ERROR), "")
            reason = f"{reason}: {why}" if why else reason
        # only a run that reached the server running now, with no restart since it began, judged it
        self.state.latch(report, ready=ready, reason=reason, judged=server_up and epoch == self.epoch)
        if held:
            self.log.info(
                "readiness held",
                verdict=report.verdict.value,
                inconclusive_s=round(now - (self.inconclusive_since or now), 3),
                unready_after_s=sched.unready_after_s,
            )
        server_al = result.server_metrics.accept_length if result.server_metrics is not None else None
        self.metrics.observe(
            report,
            end=self.state.last_run_end or time.time(),
            probed=probing and server_up,
            server_accept_length=server_al,
        )
        self.metrics.set_node(result.node)
        self.log.info(
            "check",
            **check_fields(report, kind="full" if full else "recheck", ready=ready),
            wall_s=round(time.monotonic() - t0, 3),
        )
        self.set_phase("idle")
        self._publish()
        return report

    def _hold(self, result: LiveResult, epoch: int, now: float) -> bool:
        """Whether an inconclusive run keeps readiness: the daemon is ready, no restart happened, the run
        examined the server last proven (or reached none), and the inconclusive state is younger than
        ``unready_after_s``. A ``fail`` verdict is never held."""
        if result.report.verdict is not Verdict.INCONCLUSIVE or not self.state.ready or epoch != self.epoch:
            return False
        ident = result.identity
        if ident is not None and self.proven is not None and not ident.same_server(self.proven):
            return False
        if self.inconclusive_since is None:
            self.inconclusive_since = now
        return now - self.inconclusive_since < self.schedule.unready_after_s

    async def _bounded(self, coro: Awaitable[LiveResult], timeout_s: float) -> LiveResult:
        """Run a check, touching the heartbeat every tick; overrun, crash or cancel-by-timeout become an
        inconclusive report, never an exception out of the loop."""
        task: asyncio.Future[LiveResult] = asyncio.ensure_future(coro)
        deadline = time.monotonic() + timeout_s
        while not task.done():
            self._tick()
            if time.monotonic() >= deadline:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                return self._error_report(f"the check did not finish within {timeout_s:.0f} s", timeout_s)
            await asyncio.wait({task}, timeout=self.schedule.tick_s)
        self.state.touch()
        try:
            return task.result()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or an unanticipated error in a check: report it, keep serving
            self.log.error("check crashed", error=f"{type(exc).__name__}: {exc}")
            return self._error_report(f"internal error: the check raised {type(exc).__name__}: {exc}", 0.0)

    def _error_report(self, message: str, duration_s: float) -> LiveResult:
        """A run that produced no report of its own: the server counts as not reached (not proven up)."""
        target = getattr(self.watch, "url", None)
        report = unreached_report(
            message, rule_pack=self.rule_pack, target=target, duration_s=duration_s, source="server"
        )
        return LiveResult(report=report, reached=False, identity=None)
