"""The real ``check --url`` front door (``validator.cli.main``) run in this process against the simulator's
ASGI app, for tests whose subject is the verdict and the report, not the process: no uvicorn, no child
interpreter, the same ``CheckRun`` (exit code, stdout, stderr, JSON report) as ``run_check``.

What stays real: the simulator is the ``sim`` command's own ``SimServer`` (``commands.sim.simulator``, the
options parsed by the CLI's parser), run on its own thread and event loop as the real process runs it;
its log and attestation are files under the test's directory. It binds its port and listens on it once
loaded (as ``--refuse-until-ready``), so what the check reads from ``/proc`` is true of this process: the
listener on the URL's port is the process that wrote the attestation. Only HTTP is carried without a
socket, through ``LiveInputs.transport``: each request is handed to the simulator's loop and answered
whole, a request the server does not answer within the client's read timeout raises ``ReadTimeout``, a
port not (or no longer) listening raises ``ConnectError``, and a simulated crash resets what is in flight.

What differs, and stays on real processes: a crashed simulator's process is still alive (a real one dies by
SIGKILL), signals, the check's own stdout/stderr file descriptors and ``--output`` files written by another
process, and timings the client measures: a reply comes whole (a streamed reply's first chunk arrives with
its last) and the simulator's loop shares this interpreter's lock with the check, so a TPOT near its
bound (``perf.tpot``) may land on the other side of it. ``tests/test_live_in_process.py`` holds this
harness to the real processes, scenario by scenario, so the seam cannot drift silently.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.check_helpers import CheckRun
from tests.support.cli import REPO, json_report
from tests.support.loopback import free_port
from validator import cli, redact
from validator.commands import check as check_command
from validator.commands import sim as sim_command
from validator.sim import server_log
from validator.sim.app import create_app
from validator.sim.runner import SimServer
from validator.sources.host import server_command

# far above what the simulator at test speed needs to load; a row that dies loading settles at once
LOAD_TIMEOUT_S = 60.0


@dataclass
class InProcessSim:
    """A simulated server on a thread of this process; ``url``, ``port``, ``log`` and ``attestation`` as
    ``sim_process``'s ``SimProcess`` has them."""

    server: SimServer
    url: str
    port: int
    log: Path
    attestation: Path
    sock: socket.socket
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    listening: bool = False
    in_flight: set[concurrent.futures.Future[Any]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def transport(self) -> httpx.AsyncBaseTransport:
        """A transport that carries one check's requests to this server."""
        return _SimTransport(self)

    def _crashed(self) -> None:
        """The simulated crash (``engine.on_crash``, on the simulator's loop): the port closes and every
        request in flight is reset, as when the real process is killed."""
        with self.lock:
            self.listening = False
            pending = list(self.in_flight)
        self.sock.close()
        for fut in pending:
            fut.cancel()


class _SimTransport(httpx.AsyncBaseTransport):
    def __init__(self, sim: InProcessSim) -> None:
        engine = sim.server.engine
        self.sim = sim
        self.app = httpx.ASGITransport(
            app=server_log.access_logged(create_app(engine), engine.log),
            raise_app_exceptions=False,  # uvicorn answers 500 to an app that raises
            client=("127.0.0.1", free_port()),
        )

    async def _answer(self, method: str, url: str, headers: list[tuple[bytes, bytes]], body: bytes) -> Any:
        request = httpx.Request(method, url, headers=headers, content=body)
        response = await self.app.handle_async_request(request)
        return response.status_code, response.headers.raw, await response.aread()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        with self.sim.lock:
            if not self.sim.listening:
                raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
            fut = asyncio.run_coroutine_threadsafe(
                self._answer(request.method, str(request.url), request.headers.raw, body), self.sim.loop
            )
            self.sim.in_flight.add(fut)
        read_s = request.extensions.get("timeout", {}).get("read")
        try:
            status, headers, content = await asyncio.wait_for(asyncio.wrap_future(fut), read_s)
        except asyncio.TimeoutError:
            fut.cancel()
            raise httpx.ReadTimeout("timed out", request=request) from None
        except asyncio.CancelledError:
            if fut.cancelled() and not self.sim.listening:  # reset by the crash, not our caller's cancel
                raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request) from None
            raise
        finally:
            with self.sim.lock:
                self.sim.in_flight.discard(fut)
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(content), request=request)


async def _start(sim: InProcessSim) -> None:
    """``runner._serve`` without uvicorn: load, then listen and warm up (``--answer-while-loading``:
    listen at once and start up). The warm-up task lives on this loop until the loop stops."""
    engine = sim.server.engine
    if sim.server.refuse_until_ready:
        if not await engine.load():
            return  # died while loading: the port never opens
        sim.sock.listen(16)
        sim.listening = True
        asyncio.get_running_loop().create_task(engine.warm_up())
    else:
        sim.sock.listen(16)
        sim.listening = True
        asyncio.get_running_loop().create_task(engine.start_up())


@contextlib.contextmanager
def sim_in_process(
    tmp: Path, *args: str, speed: float = 1000.0, startup: float = 0.3, wait_listen: bool = True
) -> Iterator[InProcessSim]:
    """``sim_process`` in this process: the same ``sim`` options (``--scenario``, ``--log-style``,
    ``--api-key-file``, ``-- SGLANG_ARGS``...), the log and attestation under ``tmp``. With
    ``wait_listen`` (default) returns once the port listens, which is only after the load phase."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    log, att = tmp / f"sglang-{port}.log", tmp / f"attestation-{port}.json"
    argv = ["sim", "--port", str(port), "--speed", str(speed), "--startup-seconds", str(startup)]
    argv += ["--log", str(log), "--attestation", str(att), *args]
    parsed = cli.build_parser(only="sim").parse_args(argv)
    server = sim_command.simulator(parsed)
    server.engine.bind(port)
    sim = InProcessSim(server, f"http://127.0.0.1:{port}", port, log, att, sock)
    server.engine.on_crash = sim._crashed
    thread = threading.Thread(target=sim.loop.run_forever, daemon=True, name="sim-in-process")
    thread.start()
    started = asyncio.run_coroutine_threadsafe(_start(sim), sim.loop)
    try:
        if wait_listen:
            started.result(timeout=LOAD_TIMEOUT_S)
            died = log.read_text(errors="replace")[-600:] if log.exists() else ""
            assert sim.listening, f"the simulator died while loading: {died}"
        yield sim
    finally:
        with sim.lock:
            sim.listening = False
        with contextlib.suppress(concurrent.futures.TimeoutError):
            asyncio.run_coroutine_threadsafe(_stop(), sim.loop).result(timeout=10)
        sim.loop.call_soon_threadsafe(sim.loop.stop)
        thread.join(timeout=10)
        sock.close()
        server.engine.close()
        sim.loop.close()


async def _stop() -> None:
    """Every task of the simulator's loop cancelled and awaited, as uvicorn's shutdown ends the server's."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """``run_check``'s environment for the length of one in-process run: no SPARK_VALIDATE_API_KEY,
    NO_COLOR=1, then ``env``."""
    saved = dict(os.environ)
    os.environ.pop("SPARK_VALIDATE_API_KEY", None)
    os.environ.update({"NO_COLOR": "1", **env})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _as_a_fresh_process() -> None:
    """Every ``functools`` cache of the validator emptied, as a new ``check`` process starts: a pack or
    flag table read by an earlier check of this test process (``rulepack._load_pack_cached`` is keyed by
    path) is read again, so a file rewritten between two checks is judged as it is now."""
    for name, module in list(sys.modules.items()):
        if name != "validator" and not name.startswith("validator."):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()


def check_in_process(
    target: InProcessSim | str, *args: str, fmt: str = "json", env: Mapping[str, str] | None = None
) -> CheckRun:
    """``run_check(URL, ARGS, fmt=FMT)`` in this process: ``validator.cli.main`` with stdout and stderr
    captured and the exit code returned by the front door. The live job's HTTP is carried to ``target``
    when it is a simulator in-process, and goes over loopback to a URL (a test's stand-in server on a
    thread of this process, or nothing listening)."""
    out, err = io.StringIO(), io.StringIO()
    real_inputs = check_command.live_inputs_from
    url = target if isinstance(target, str) else target.url

    def with_transport(parsed: Any, **extra: Any) -> Any:
        if not isinstance(target, str):
            extra["transport"] = target.transport()
        return real_inputs(parsed, **extra)

    argv = ["check", "--url", url, "--format", fmt, *args]
    _as_a_fresh_process()
    check_command.live_inputs_from = with_transport  # type: ignore[assignment]
    try:
        with _environment(env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(argv)
    finally:
        check_command.live_inputs_from = real_inputs  # type: ignore[assignment]
    stdout = out.getvalue()
    report = None
    if fmt == "json" and stdout.strip():
        with contextlib.suppress(json.JSONDecodeError):
            report = json.loads(stdout)
    return CheckRun(rc, stdout, err.getvalue(), report)


@contextlib.contextmanager
def _process_state(env: Mapping[str, str], cwd: str | Path) -> Iterator[None]:
    """What ``run_cli(..., env=ENV, cwd=CWD)`` gives its child, for the length of one in-process run, and
    put back after it whatever the run did: the environment is exactly ``env`` plus ``PYTHONPATH`` (so
    the fake interpreters a run starts inherit what the child would pass them), the working directory is
    ``cwd``, the validator's caches and registered secrets start empty, and every logger's level,
    handlers, filters and switches are as before (``--log-level``'s check sets a logger's level)."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_secrets = set(redact._REGISTERED)
    saved_stand_ins = server_command._STAND_INS
    loggers = [
        logging.getLogger(),
        *(v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    saved_loggers = [
        (lg, lg.level, list(lg.handlers), list(lg.filters), lg.propagate, lg.disabled) for lg in loggers
    ]
    known = set(logging.root.manager.loggerDict)
    os.environ.clear()
    os.environ.update({**env, "PYTHONPATH": str(REPO)})
    redact._REGISTERED.clear()
    server_command.use_stand_ins(())
    _as_a_fresh_process()
    try:
        os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        redact._REGISTERED.clear()
        redact._REGISTERED.update(saved_secrets)
        server_command.use_stand_ins(saved_stand_ins)
        for lg, level, handlers, filters, propagate, disabled in saved_loggers:
            lg.setLevel(level)
            lg.handlers[:], lg.filters[:] = handlers, filters
            lg.propagate, lg.disabled = propagate, disabled
        for name in set(logging.root.manager.loggerDict) - known:  # a logger the run created: as new
            new = logging.root.manager.loggerDict[name]
            if isinstance(new, logging.Logger):
                new.setLevel(logging.NOTSET)
                new.handlers.clear()
                new.filters.clear()
        _as_a_fresh_process()


def cli_in_process(
    *argv: str, env: Mapping[str, str] | None = None, cwd: str | Path = REPO
) -> subprocess.CompletedProcess[str]:
    """``run_cli(ARGV, env=ENV, cwd=CWD)`` in this process: ``validator.cli.main`` with stdout and stderr
    captured, in the same ``CompletedProcess``. ``env`` is the whole environment, as for ``run_cli``
    (default: this process's). An exception that escapes the front door is what the interpreter would make
    of it: its traceback on stderr and exit 1. Not for a test whose subject is the process itself (signals,
    file descriptors, ``--output`` seen by another process, a second user, a usage error's exit)."""
    out, err = io.StringIO(), io.StringIO()
    state = _process_state(dict(os.environ) if env is None else env, cwd)
    with state, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(list(argv))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:
            traceback.print_exc()
            rc = 1
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "validator", *argv], rc, out.getvalue(), err.getvalue()
    )


def preflight_in_process(
    *args: str, env: Mapping[str, str] | None = None, cwd: str | Path = REPO
) -> subprocess.CompletedProcess[str]:
    """``run_cli("preflight", ARGS, env=ENV, cwd=CWD)`` in this process (:func:`cli_in_process`)."""
    return cli_in_process("preflight", *args, env=env, cwd=cwd)


def preflight_json_in_process(
    env: Mapping[str, str], *args: str, cwd: str | Path = REPO
) -> tuple[int, dict[str, Any], str]:
    """``preflight_json(ENV, ARGS, cwd=CWD)`` in this process: exit code, report (``{}`` if none),
    stderr."""
    proc = preflight_in_process("--format", "json", *args, env=env, cwd=cwd)
    return proc.returncode, json_report(proc.stdout), proc.stderr
