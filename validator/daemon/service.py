"""Wiring: build the state, metrics, endpoints, notifier and scheduler for one ``serve`` invocation, run
them on one event loop, and shut down within a second of SIGTERM/SIGINT (``STOPPING=1`` first)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
from dataclasses import dataclass, field, replace
from pathlib import Path

from validator.daemon.endpoints import Endpoints
from validator.daemon.http import SidecarServer
from validator.daemon.logs import Logger, make_logger
from validator.daemon.loop import Daemon, Schedule
from validator.daemon.metrics import DaemonMetrics
from validator.daemon.notify import Notifier
from validator.daemon.process_watch import ProcessTarget, ProcessWatch
from validator.daemon.state import DaemonState
from validator.daemon.watch import ServerWatch
from validator.errors import UnavailableError
from validator.facts import ProbeResult
from validator.live import LiveResult, run_live
from validator.live_inputs import LiveInputs
from validator.report import unreached_report
from validator.rulepack import LoadedPack
from validator.running import RunningInputs, judge
from validator.sources.launch.state import read_state
from validator.sources.server.log import open_log_reader
from validator.sources.server.metrics_reading import MetricsWatch
from validator.sources.server.readiness import Progress


@dataclass(frozen=True)
class ServeConfig:
    # where to serve the endpoints: one or more (host, port), each its own listening socket
    listen: tuple[tuple[str, int], ...] = (("127.0.0.1", 9464),)
    strict: bool = False
    schedule: Schedule = field(default_factory=Schedule)
    launch_state: Path | None = None  # the last `launch` verdict to export (serve --launch-state)


# What a live check imports on first use (the live sources' readers are imported with validator.live):
# the metrics parser and the checks.
_CHECK_MODULES = ("prometheus_client.parser", "validator.checks.registry")


def serve(
    inputs: LiveInputs,
    loaded: LoadedPack,
    config: ServeConfig,
    *,
    running: RunningInputs | None = None,
    target: ProcessTarget | None = None,
    fleet_labels: dict[str, str] | None = None,
) -> int:
    """Run until SIGTERM/SIGINT; 0 on a clean stop. Findings go to /readyz and the metrics, not the exit
    code: a failing deployment keeps the sidecar up so that Prometheus can alert. With ``target`` (no
    ``--url``), the server is the process it names, judged as ``check`` with no ``--url`` judges one."""
    return asyncio.run(_main(inputs, loaded, config, running, target, fleet_labels or {}))


def _not_found(rule_pack: str, message: str) -> LiveResult:
    """A check that found no server process: inconclusive, the server not reached."""

    target = "no server process found"
    report = unreached_report(message, rule_pack=rule_pack, target=target, duration_s=0.0, source="process")
    return LiveResult(report=report, reached=False, identity=None)


async def _main(
    inputs: LiveInputs,
    loaded: LoadedPack,
    config: ServeConfig,
    running: RunningInputs | None,
    target: ProcessTarget | None,
    fleet_labels: dict[str, str],
) -> int:
    from prometheus_client import disable_created_metrics

    disable_created_metrics()  # type: ignore[no-untyped-call]  # the contract's series only; this process is the daemon's own
    secrets = tuple(loaded.pack.secrets)
    log = make_logger(secrets=secrets)  # on stderr
    state = DaemonState()
    metrics = DaemonMetrics(fleet_labels)
    notifier = Notifier()
    endpoints = Endpoints(
        state,
        metrics,
        secrets=secrets,
        livez_stale_s=max(10.0, 20 * config.schedule.tick_s),
        probe_interval_s=config.schedule.probe_interval_s if config.schedule.probe else None,
    )
    server = SidecarServer(endpoints, log=log)
    # Before listening, what would otherwise run on the event loop once /livez is served: the watch's
    # HTTP client (httpx loads its TLS trust store), and the modules the first check imports (httpx
    # among them), which delayed /livez answers during the first check.
    watch: ServerWatch | ProcessWatch
    if target is not None:
        watch = ProcessWatch(target, api_key=inputs.api_key)
    else:
        watch = ServerWatch(inputs.url, api_key=inputs.api_key, attestation=inputs.attestation)
    for module in _CHECK_MODULES:
        importlib.import_module(module)
    if inputs.log is not None and inputs.log_reader is None:
        # one reader for the daemon's life: each check parses only what the server logged since the last
        inputs = replace(inputs, log_reader=open_log_reader(inputs.log))
    bound: list[str] = []
    for host, port in config.listen:
        try:
            got_host, got_port = await server.start(host, port)
        except OSError as exc:
            await server.close()
            raise UnavailableError(f"serve: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        bound.append(f"[{got_host}]:{got_port}" if ":" in got_host else f"{got_host}:{got_port}")
    if inputs.metrics_watch is None:
        # one for the daemon's life: each check compares the server's counters with the previous one's
        inputs = replace(inputs, metrics_watch=MetricsWatch())
    recheck_inputs = replace(inputs, wait_s=0.0, on_progress=None)

    async def check(full: bool, previous: ProbeResult | None) -> LiveResult:
        if target is not None and running is not None:
            return await _check_process(full, previous)
        if full:
            return await run_live(inputs, loaded, strict=config.strict, probe=config.schedule.probe)
        return await run_live(
            recheck_inputs, loaded, strict=config.strict, probe=False, previous_probe=previous
        )

    async def _check_process(full: bool, previous: ProbeResult | None) -> LiveResult:
        assert target is not None and running is not None
        server = await asyncio.to_thread(target.find)
        if server is None:
            return _not_found(loaded.name, target.why_none)
        live = running.live if full else replace(running.live, wait_s=0.0, on_progress=None)
        live = replace(live, probe=full and config.schedule.probe and server.url is not None)
        return await judge(
            server,
            replace(running, live=live),
            loaded,
            strict=config.strict,
            allow_partial=running.live.allow_partial,
            previous_probe=None if full else previous,
        )

    daemon = Daemon(
        check=check,
        watch=watch,
        schedule=config.schedule,
        state=state,
        metrics=metrics,
        notifier=notifier,
        log=log,
        rule_pack=loaded.name,
    )

    def on_progress(progress: Progress) -> None:
        if progress.changed:
            ready = progress.phase.value == "ready"
            daemon.set_phase(
                ("probing" if config.schedule.probe else "checking") if ready else progress.phase.value
            )

    # the full checks' (``check`` reads both when called); the daemon's reader, watch and progress go to
    # the process judge's inputs too (``serve`` gives it the same live inputs)
    inputs = replace(inputs, on_progress=on_progress)
    if running is not None:
        live = replace(
            running.live,
            log_reader=inputs.log_reader,
            metrics_watch=inputs.metrics_watch,
            on_progress=on_progress,
        )
        running = replace(running, live=live)
    follower = (
        asyncio.create_task(
            _follow_launch_state(config.launch_state, metrics, log, config.schedule.health_interval_s),
            name="launch-state",
        )
        if config.launch_state is not None
        else None
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "serving",
        listen=bound if len(bound) > 1 else bound[0],
        url=inputs.url,
        interval_s=config.schedule.interval_s,
        probe_interval_s=config.schedule.probe_interval_s,
        rule_pack=loaded.name,
    )
    notifier.ready(state.status_line())
    try:
        await daemon.run(stop)
    finally:
        if follower is not None:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower
        notifier.stopping("stopping")
        log.info("stopping")
        state.set_phase("stopping")
        state.drop("stopping")
        await server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(watch.aclose(), 0.3)
        notifier.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0


async def _follow_launch_state(path: Path, metrics: DaemonMetrics, log: Logger, every_s: float) -> None:
    """Re-read the last ``launch`` verdict every ``every_s`` (a small file, read off the event loop) into
    the metrics; a file that turns unusable is logged once per change, never fatal."""
    problem_seen: str | None = None
    while True:
        state, problem = await asyncio.to_thread(read_state, path)
        metrics.set_launch_state(state, problem is None)
        if problem != problem_seen:
            if problem is not None:
                log.warning("launch state unusable", path=str(path), problem=problem)
            problem_seen = problem
        await asyncio.sleep(every_s)
