"""Running the simulator: in a background thread (``SimServer``) or in the foreground until SIGINT/SIGTERM
(``serve_forever``).

Both bind the socket before uvicorn starts, so ``port=0`` yields a known free port with no polling. With
``refuse_until_ready`` (the default) it does not listen through the load phase, as a real launcher;
``--answer-while-loading`` listens at once and answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from validator.errors import UnavailableError, UsageError
from validator.sim import scenarios, server_log
from validator.sim.engine import DEFAULT_STARTUP_SECONDS, SimConfig, SimEngine
from validator.sources.sglang.cli import parse_server_args


def _bind(host: str, port: int, *, listen: bool) -> socket.socket:
    """Bind now; listen now too unless the load phase must refuse connections (a bound socket that is not
    listening answers a connect with RST). Listening at once lets clients queue in the backlog while
    uvicorn starts."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UnavailableError(f"sim: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    if listen:
        sock.listen(2048)
    sock.setblocking(False)
    return sock


def _make(engine: SimEngine, sock: socket.socket) -> Any:
    import uvicorn

    from validator.sim.app import create_app

    config = uvicorn.Config(
        server_log.access_logged(create_app(engine), engine.log),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
        backlog=2048,
    )
    server = uvicorn.Server(config)
    # uvicorn re-raises a captured SIGTERM after shutting down, which would kill the process by signal;
    # the simulator handles signals itself (serve_forever) and exits 0.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]

    def stop() -> None:
        server.should_exit = True

    engine.on_crash = stop
    return server


async def _serve(engine: SimEngine, server: Any, sock: socket.socket, *, refuse_until_ready: bool) -> None:
    if refuse_until_ready:
        if not await engine.load():
            return  # died while loading: the port never opened
        sock.listen(2048)
        startup = asyncio.create_task(engine.warm_up())
    else:
        startup = asyncio.create_task(engine.start_up())
    try:
        await server.serve(sockets=[sock])
    finally:
        startup.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await startup


class SimServer:
    """A simulated SGLang server on a background thread; ``with SimServer("healthy") as sim: sim.url``."""

    def __init__(
        self,
        scenario: str | list[str] = "healthy",
        *,
        seed: int = 0,
        speed: float = 1.0,
        startup_seconds: float = DEFAULT_STARTUP_SECONDS,
        api_key: str | None = None,
        log_path: Path | str | None = None,
        attestation_path: Path | str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        extra_args: tuple[str, ...] = (),
        log_style: str = "dict",
        refuse_until_ready: bool = True,
        enable_metrics: bool = False,
        api_style: str = "sglang-0.5.23",
        collapse_after_s: float | None = None,
        stall_after_requests: int | None = None,
        stall_after_s: float | None = None,
        stall_for_s: float | None = None,
        idle_metrics_s: float = 30.0,
    ) -> None:
        sc = scenarios.resolve(scenario)
        if stall_after_requests is not None or stall_after_s is not None:  # the given triggers only
            sc = replace(sc, stall_after_requests=stall_after_requests, stall_after_s=stall_after_s)
        if stall_for_s is not None:
            sc = replace(sc, stall_for_s=stall_for_s)
        if enable_metrics:
            if "metrics-disabled" in scenarios.parse_names(scenario):
                raise UsageError("sim: --enable-metrics contradicts scenario 'metrics-disabled'")
            sc = replace(sc, metrics=True)
        if sc.auth and not api_key:
            raise UsageError("sim: scenario auth-required needs an API key")
        if speed <= 0:
            raise UsageError("sim: --speed must be positive")
        if log_style not in server_log.LOG_STYLES:
            raise UsageError(
                f"sim: unknown --log-style {log_style!r} (one of {', '.join(server_log.LOG_STYLES)})"
            )
        self.engine = SimEngine(
            SimConfig(
                scenario=sc,
                seed=seed,
                speed=speed,
                startup_seconds=startup_seconds,
                api_key=api_key,
                log_path=Path(log_path) if log_path is not None else None,
                attestation_path=Path(attestation_path) if attestation_path is not None else None,
                host=host,
                port=port,
                extra_args=tuple(extra_args),
                log_style=log_style,
                api_style=api_style,
                collapse_after_s=collapse_after_s,
                idle_metrics_s=idle_metrics_s,
            )
        )
        self._host = host
        self._port = port
        self.refuse_until_ready = refuse_until_ready
        self._sock: socket.socket | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def scenario(self) -> scenarios.Scenario:
        return self.engine.scenario

    @property
    def port(self) -> int:
        return self.engine.config.port

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    def _open(self) -> tuple[socket.socket, Any]:
        """Bind the socket, fix the port it got, and build the uvicorn server over it."""
        sock = _bind(self._host, self._port, listen=not self.refuse_until_ready)
        self.engine.bind(sock.getsockname()[1])
        return sock, _make(self.engine, sock)

    def start(self) -> SimServer:
        self._sock, self._server = self._open()
        self._thread = threading.Thread(
            target=asyncio.run,
            args=(_serve(self.engine, self._server, self._sock, refuse_until_ready=self.refuse_until_ready),),
            daemon=True,
            name="sim",
        )
        self._thread.start()
        return self

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """Block until start-up finished (``/health`` would answer 200), or the timeout passed."""
        self.engine.settled.wait(timeout)
        return self.engine.ready

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.engine.close()

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve_forever(sim: SimServer) -> int:
    """Foreground mode: run until SIGINT/SIGTERM or a simulated crash."""
    sock, server = sim._open()
    sim.engine.on_crash = _die
    _on_stop_signals(lambda: setattr(server, "should_exit", True))
    try:
        asyncio.run(_serve(sim.engine, server, sock, refuse_until_ready=sim.refuse_until_ready))
    finally:
        sock.close()
        sim.engine.close()
    if sim.engine.crashed:
        _die()
    return 0


def worker_rank(extra_args: tuple[str, ...]) -> int | None:
    """The node rank when the arguments make this a worker of a multi-node launch (``--nnodes`` > 1,
    ``--node-rank`` >= 1): SGLang's rank-0 node serves HTTP, the others serve nothing."""

    args, _ = parse_server_args(["--model-path", scenarios.MODEL_PATH, *extra_args], origin="sim")
    nnodes, rank = args.get("nnodes"), args.get("node_rank")
    if isinstance(nnodes, int) and isinstance(rank, int) and nnodes > 1 and rank >= 1:
        return rank
    return None


def serve_worker() -> int:
    """A worker node: no HTTP, alive until SIGINT/SIGTERM (a real one dies or hangs with its head)."""
    stop = threading.Event()
    _on_stop_signals(stop.set)
    while not stop.wait(3600):
        pass
    return 0


def map_library(path: str) -> Any:
    """Map ``path`` read-only into this process, as the dynamic loader maps a shared library: it then
    shows in ``/proc/PID/maps``, where a reader finds the NCCL a server really loaded."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


def _die() -> None:
    """A crashed SGLang scheduler takes the whole process tree down: its SIGQUIT makes the launcher run
    ``kill_process_tree`` on itself, which ends in SIGKILL (srt/utils/common.py:2548-2552). Sockets close,
    nothing answers, and a supervisor sees a death by signal 9."""
    os.kill(os.getpid(), signal.SIGKILL)


def _on_stop_signals(stop: Callable[[], object]) -> None:
    """Call ``stop`` on SIGINT or SIGTERM."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop())
