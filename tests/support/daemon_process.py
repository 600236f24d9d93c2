"""Run ``python -m validator serve`` (the sidecar) as a real process on loopback, for the serve tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support import web
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.sim_process import REPO, sim_command


@dataclass
class DaemonProcess:
    proc: subprocess.Popen[bytes]
    base: str
    port: int
    stderr_path: Path

    def get(self, path: str, timeout: float = 5.0) -> httpx.Response:
        return web.get(f"{self.base}{path}", timeout=timeout)

    def log(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@contextmanager
def daemon_process(
    tmp: Path, url: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[DaemonProcess]:
    port = free_port()
    err = tmp / f"daemon-{port}.log"
    cmd = [sys.executable, "-m", "validator", "serve", "--url", url, "--listen", f"127.0.0.1:{port}", *args]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    with err.open("wb") as errf:
        proc = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=subprocess.DEVNULL, stderr=errf)
    try:
        wait_listening(port, proc, what="daemon", log=err)
        yield DaemonProcess(proc, f"http://127.0.0.1:{port}", port, err)
    finally:
        stop(proc)


def wait_for(pred: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Poll ``pred`` until true or ``timeout`` passes; returns the last result (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return True
        except httpx.HTTPError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


def start_sim(
    port: int,
    scenario: str = "healthy",
    *,
    speed: float = 1000.0,
    startup: float = 0.3,
    attestation: Path | None = None,
    log: Path | None = None,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """A simulator process on a chosen port (a restart must come back on the same one), once it listens;
    ``extra``: more simulator options (``--api-style``, ``--enable-metrics``)."""
    cmd = sim_command(port, speed=speed, startup=startup, extra=["--scenario", scenario, *extra])
    if attestation is not None:
        cmd += ["--attestation", str(attestation)]
    if log is not None:
        cmd += ["--log", str(log)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, what="simulator")
    except (RuntimeError, TimeoutError):
        stop(proc, kill=True)
        raise
    return proc


class SimOnPort:
    """A simulator on a port of its own that a test may stop or kill and start again on the same port, as
    a restarted server comes back where the sidecar looks."""

    def __init__(self, scenario: str, **options: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.scenario, self.options = scenario, options
        self.proc = start_sim(self.port, scenario, **options)

    def restart(self, **changes: Any) -> None:
        """Start it again on the same port with ``changes`` to its options (stopping it first if the test
        has not)."""
        stop(self.proc)
        self.options.update(changes)
        self.proc = start_sim(self.port, self.scenario, **self.options)


@contextmanager
def sim_on_port(scenario: str = "healthy", **options: Any) -> Iterator[SimOnPort]:
    """``start_sim`` on a free port for the block's duration: the process the block ends with (the first,
    or the one ``restart`` started) is stopped however the block ends."""
    sim = SimOnPort(scenario, **options)
    try:
        yield sim
    finally:
        stop(sim.proc)
