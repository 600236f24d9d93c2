"""The scheduler with a scripted server: latching, restart epochs, one probe at a time, hung and crashing
checks. Fakes stand in for the live check only; the scheduler, state and metrics are the real ones."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from validator.daemon.logs import make_logger
from validator.daemon.loop import Daemon, Schedule
from validator.daemon.metrics import DaemonMetrics
from validator.daemon.notify import Notifier
from validator.daemon.state import DaemonState
from validator.facts import ProbeResult
from validator.live import LiveResult
from validator.report import CheckResult, Report, Severity, Status, Verdict
from validator.sources.server.identity import ServerIdentity


def _probe(al: float) -> ProbeResult:
    return ProbeResult(
        accept_length=al,
        accept_rate=0.9,
        requests=4,
        completion_tokens=400,
        verify_ct=100,
        tpot_ms=10.0,
        ttft_ms=20.0,
    )


def _report(verdict: Verdict, checks: list[CheckResult], probe: ProbeResult | None = None) -> Report:
    """A check report as the live check would give it; only the verdict, checks and probe vary."""
    return Report(
        mode="check",
        verdict=verdict,
        rule_pack="p",
        started_at="t",
        duration_s=0.02,
        checks=checks,
        probe=probe,
    )


class FakeServer:
    """What the daemon sees of a server: up or down, an identity, a configuration verdict."""

    def __init__(
        self, *, verdict: Verdict = Verdict.PASS, hang: bool = False, with_ready_check: bool = True
    ) -> None:
        self.up = True
        self.startup = 1
        self.verdict = verdict
        self.sglang_version = "0.5.23"
        self.model = "m"
        self.url = "http://fake"
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls: list[tuple[bool, ProbeResult | None]] = []
        self.hang = hang
        self.crash = False
        self.with_ready_check = with_ready_check  # a pack without server.ready must still latch ready
        self.health_blips = 0

    async def healthy(self) -> bool:
        if self.health_blips > 0:  # a /health poll that fails once, then answers again
            self.health_blips -= 1
            return False
        return self.up

    async def identity(self) -> ServerIdentity | None:
        return ServerIdentity(startup_time=self.startup) if self.up else None

    async def restarted(self) -> str | None:
        return None  # as over HTTP: a restart shows in the identity

    async def check(self, full: bool, previous: ProbeResult | None) -> LiveResult:
        self.calls.append((full, previous))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.02)
            if self.hang:
                await asyncio.sleep(3600)
            if self.crash:
                raise RuntimeError("boom")
            if not self.up:
                checks = [
                    CheckResult(
                        id="server.ready", status=Status.ERROR, severity=Severity.CRITICAL, message="x"
                    )
                ]
                return LiveResult(report=_report(Verdict.INCONCLUSIVE, checks), reached=False, identity=None)
            status = {Verdict.PASS: Status.PASS, Verdict.FAIL: Status.FAIL}.get(self.verdict, Status.ERROR)
            checks = [
                CheckResult(id="server.ready", status=Status.PASS, severity=Severity.CRITICAL, message="ok"),
                CheckResult(id="spec.accept_length", status=status, severity=Severity.CRITICAL, message="m"),
            ][0 if self.with_ready_check else 1 :]
            report = _report(self.verdict, checks, probe=_probe(3.9) if full else previous)
            return LiveResult(report=report, reached=True, identity=ServerIdentity(startup_time=self.startup))
        finally:
            self.in_flight -= 1


def _daemon(server: FakeServer, **sched: Any) -> tuple[Daemon, io.StringIO]:
    out = io.StringIO()
    schedule = Schedule(
        **{
            "interval_s": 0.1,
            "probe_interval_s": 0.5,
            "health_interval_s": 0.05,
            "health_retry_s": 0.02,
            "tick_s": 0.02,
            **sched,
        }
    )
    d = Daemon(
        check=server.check,
        watch=server,
        schedule=schedule,
        state=DaemonState(),
        metrics=DaemonMetrics(),
        notifier=Notifier({}),
        log=make_logger(out, secrets=()),
        rule_pack="p",
    )
    return d, out


@contextlib.asynccontextmanager
async def _running(server: FakeServer, **sched: Any) -> AsyncIterator[tuple[Daemon, io.StringIO]]:
    """The daemon's loop as a task over ``server`` for the block's duration, then stopped and awaited (what
    the block asserts after it sees the daemon as it ended). A failing assertion leaves the task to
    ``asyncio.run``, which cancels it."""
    d, out = _daemon(server, **sched)
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    yield d, out
    stop.set()
    await task


def _in_event_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an ``async def`` test in a fresh event loop (``asyncio.run``), as a plain test function."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


async def _until(pred: Any, timeout: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


@_in_event_loop
async def test_ready_after_full_check_rechecks_reuse_probe_and_never_overlap() -> None:
    server = FakeServer()
    async with _running(server) as (d, out):
        await _until(lambda: d.state.ready)
        assert server.calls[0] == (True, None)
        await _until(lambda: len(server.calls) >= 8)
    rechecks = [c for c in server.calls if not c[0]]
    assert rechecks and all(prev is not None and prev.accept_length == 3.9 for _, prev in rechecks)
    assert sum(1 for c in server.calls if c[0]) >= 2  # the probe interval came round at least once
    assert server.max_in_flight == 1
    lines = [json.loads(ln) for ln in out.getvalue().splitlines()]
    canonical = [ln for ln in lines if ln["event"] == "check"]
    assert canonical[0]["kind"] == "full" and canonical[0]["verdict"] == "pass"
    assert canonical[0]["accept_length"] == 3.9 and canonical[0]["failed"] == []


@_in_event_loop
async def test_restart_drops_readiness_at_once_and_needs_a_new_probe() -> None:
    server = FakeServer()
    async with _running(server, interval_s=0.5, probe_interval_s=60.0) as (d, _):
        await _until(lambda: d.state.ready)
        old = d.probe
        server.up = False
        await _until(lambda: not d.state.ready, timeout=0.6)  # a few health polls and their retries
        assert "health" in d.state.reason
        m = len(server.calls)
        server.up, server.startup = True, 2
        await _until(lambda: d.state.ready)
        assert d.probe is not old and (True, None) in server.calls[m - 1 :]  # a new full check, new probe
        assert all(prev is not old for _, prev in server.calls[m:])  # the old probe is never lent again
        # identity change without /health ever dropping (a restart between two polls)
        d.healthy = None
        server.startup = 3
        n = len(server.calls)
        await _until(lambda: len(server.calls) > n + 1)
        assert any(full for full, _ in server.calls[n:])


@_in_event_loop
async def test_failing_verdict_latches_not_ready() -> None:
    server = FakeServer(verdict=Verdict.FAIL)
    async with _running(server) as (d, _):
        await _until(lambda: len(server.calls) >= 4)
        assert not d.state.ready and d.state.reason == "verdict fail"
        assert b"spark_validate_ready 0.0" in d.metrics.render()


@_in_event_loop
async def test_hung_and_crashing_checks_become_inconclusive_and_the_heartbeat_keeps_going() -> None:
    server = FakeServer(hang=True)
    async with _running(server, full_timeout_s=0.3, recheck_timeout_s=0.3) as (d, out):
        await asyncio.sleep(0.2)
        assert d.state.alive(0.1)  # mid-check, the scheduler still ticks
        await _until(lambda: d.state.report is not None)
        assert d.state.report is not None and d.state.report.verdict is Verdict.INCONCLUSIVE
        assert "did not finish" in d.state.report.checks[0].message
        server.hang, server.crash = False, True
        await _until(lambda: "boom" in (d.state.report.checks[0].message if d.state.report else ""))
        server.crash = False
        await _until(lambda: d.state.ready)
    assert "check crashed" in out.getvalue()


@_in_event_loop
async def test_a_pack_without_server_ready_still_latches_ready_and_notices_restarts() -> None:
    """Readiness follows the typed result (reached, identity), not the presence of a check ID."""
    server = FakeServer(with_ready_check=False)
    async with _running(server, interval_s=0.1, probe_interval_s=60.0) as (d, _):
        await _until(lambda: d.state.ready)
        assert d.state.report is not None
        assert [c.id for c in d.state.report.checks] == ["spec.accept_length"]
        await _until(lambda: any(not full for full, _ in server.calls))  # re-checks keep it ready
        assert d.state.ready
        d.healthy = None  # a restart between two /health polls: only the identity shows it
        server.startup = 2
        n = len(server.calls)
        await _until(lambda: any(full for full, _ in server.calls[n:]))
        await _until(lambda: d.state.ready)


def test_identity_differs_only_in_fields_both_sides_know() -> None:
    a = ServerIdentity(startup_time={"load": 52.4}, pid=41, process_start=7)
    assert a.same_server(ServerIdentity(startup_time={"load": 52.4}))  # attestation unreadable to one side
    assert not a.same_server(ServerIdentity(startup_time={"load": 52.4}, pid=42))
    assert not a.same_server(ServerIdentity(startup_time={"load": 53.0}, pid=41, process_start=7))


@_in_event_loop
async def test_an_inconclusive_recheck_holds_readiness_for_unready_after_then_drops() -> None:
    server = FakeServer()
    async with _running(server, interval_s=0.1, probe_interval_s=60.0, unready_after_s=0.8) as (d, out):
        await _until(lambda: d.state.ready)
        server.verdict = Verdict.INCONCLUSIVE  # a transient 5xx on every request but /health
        t0 = asyncio.get_running_loop().time()
        await _until(lambda: d.state.report is not None and d.state.report.verdict is Verdict.INCONCLUSIVE)
        assert d.state.ready  # held: one blip does not take the only backend out
        await _until(lambda: not d.state.ready, timeout=3.0)
        held = asyncio.get_running_loop().time() - t0
        assert 0.7 <= held <= 2.0, held
        assert "--unready-after" in d.state.reason
        server.verdict = Verdict.PASS  # the blip is over: the same server passes again
        await _until(lambda: d.state.ready)
        # a blip shorter than the hold never shows
        server.verdict = Verdict.INCONCLUSIVE
        await _until(lambda: d.state.report is not None and d.state.report.verdict is Verdict.INCONCLUSIVE)
        await asyncio.sleep(0.3)
        server.verdict = Verdict.PASS
        deadline = asyncio.get_running_loop().time() + 1.0
        while asyncio.get_running_loop().time() < deadline:
            assert d.state.ready
            await asyncio.sleep(0.02)
    assert "readiness held" in out.getvalue()


@_in_event_loop
async def test_a_failing_check_and_a_failed_health_drop_readiness_at_once() -> None:
    server = FakeServer()
    async with _running(server, interval_s=0.1, probe_interval_s=60.0, unready_after_s=60.0) as (d, _):
        await _until(lambda: d.state.ready)
        server.health_blips = 1  # one failed poll is retried, not a restart
        await asyncio.sleep(0.3)
        assert d.state.ready and server.health_blips == 0
        server.verdict = Verdict.FAIL
        n = len(server.calls)
        await _until(lambda: len(server.calls) > n)
        await _until(lambda: not d.state.ready, timeout=1.5)  # the first failing re-check, no hold
        assert d.state.reason == "verdict fail"
        server.verdict = Verdict.PASS
        await _until(lambda: d.state.ready)
        server.up = False  # /health down through its retries: at once, whatever --unready-after says
        await _until(lambda: not d.state.ready, timeout=1.5)
        assert "health" in d.state.reason


@_in_event_loop
async def test_a_restart_forgets_the_previous_processs_verdict_everywhere() -> None:
    """Between a restart and the new process's judgement: no report is current, /readyz's reason says
    "restarted at T, not yet judged", and the metrics carry no check status (no alert on the old process)."""
    server = FakeServer(verdict=Verdict.FAIL)
    d, _ = _daemon(server)
    await d.run_once(full=True)
    assert d.state.current() is not None and d.state.failed_ids() == ["spec.accept_length"]
    assert b'status="fail"} 1.0' in d.metrics.render()
    d.restart_suspected("server process PID 7 exited")
    assert d.state.current() is None and d.state.verdict() == "none" and d.state.failed_ids() == []
    assert "not yet judged (server process PID 7 exited)" in d.state.reason
    assert b"spark_validate_check_status{" not in d.metrics.render()
    server.up = False  # an attempt that reaches nothing does not end it
    await d.run_once(full=True)
    assert d.state.current() is None and "last attempt" in d.state.reason
    server.up, server.verdict = True, Verdict.PASS
    await d.run_once(full=True)
    assert d.state.current() is not None and d.state.ready and d.state.restarted_at is None


@_in_event_loop
async def test_a_hold_that_runs_out_at_a_check_says_unready_after_as_at_a_tick() -> None:
    """The hold ends either at the scheduler's tick or at the check that falls due on the same instant; on
    a busy machine the check often comes first, and its reason said only "verdict inconclusive". Checks
    run here one by one, with no loop ticking between them."""
    server = FakeServer()
    d, _ = _daemon(server, unready_after_s=0.3)
    await d.run_once(full=True)
    assert d.state.ready
    server.verdict = Verdict.INCONCLUSIVE
    await d.run_once(full=False)
    assert d.state.ready  # held
    await asyncio.sleep(0.4)
    await d.run_once(full=False)
    assert not d.state.ready
    assert "--unready-after" in d.state.reason, d.state.reason


class ExitingServer(FakeServer):
    """A server followed as a process (``serve --pid``): its exit is a change its watch reports once."""

    def __init__(self) -> None:
        super().__init__()
        self.change: str | None = None

    async def restarted(self) -> str | None:
        change, self.change = self.change, None
        return change


@_in_event_loop
async def test_a_process_exit_seen_by_a_check_is_not_renamed_server_lost_by_the_health_watch() -> None:
    """The check's own look at the watch took the exit ("server process PID 7 exited"); the health watch's
    next failed /health is about that same gone process, no new sign: the reason keeps naming the exit.
    Seen in CI (test_sidecar_follows): both in one tick, the later "/health stopped answering" replaced it."""
    server = ExitingServer()
    d, _ = _daemon(server, health_interval_s=0.02, health_retry_s=0.01)
    await d.run_once(full=True)
    assert d.state.ready and d.healthy
    server.up, server.change = False, "server process PID 7 exited"
    await d.run_once(full=False)  # takes the change: readiness drops, naming the exit
    assert not d.state.ready and "server process PID 7 exited" in d.state.reason, d.state.reason
    watch = asyncio.create_task(d._health_watch())
    await asyncio.sleep(0.2)  # several health polls, each failing
    watch.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watch
    assert "server process PID 7 exited" in d.state.reason, d.state.reason
    assert d.state.reason.startswith("restarted at "), d.state.reason
