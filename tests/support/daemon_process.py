"""Run ``python -m validator serve`` (the sidecar) as a real process on loopback, for the serve tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.loopback import free_port, stop, wait_listening
from tests.support.sim_process import REPO, sim_command


@dataclass
class DaemonProcess:
    proc: subprocess.Popen[bytes]
    base: str
    port: int
    stderr_path: Path

    def get(self, path: str, timeout: float = 5.0) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", timeout=timeout)

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
) -> subprocess.Popen[bytes]:
    """A simulator process on a chosen port (a restart must come back on the same one)."""
    cmd = sim_command(port, speed=speed, startup=startup, extra=["--scenario", scenario])
    if attestation is not None:
        cmd += ["--attestation", str(attestation)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"simulator did not listen on {port}")
