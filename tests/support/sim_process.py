"""Run the simulator as a real process on a loopback port, for the sim tests.

Uses ``python -m validator.sim`` (the same code as ``spark-validate sim``): picks a free port, starts the
process, and waits (bounded) until the socket accepts connections.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import web
from tests.support.loopback import free_port, stop, wait_listening

REPO = Path(__file__).resolve().parents[2]


@dataclass
class SimProcess:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    log: Path
    attestation: Path


def sim_command(port: int, *, speed: float, startup: float, extra: list[str]) -> list[str]:
    """``python -m validator.sim`` on ``port`` at a test speed."""
    return [
        sys.executable, "-m", "validator.sim", "--port", str(port), "--speed", str(speed),
        "--startup-seconds", str(startup), *extra,
    ]  # fmt: skip


@contextmanager
def sim_process(
    tmp: Path, *args: str, speed: float = 1000.0, startup: float = 0.3, wait_listen: bool = True
) -> Iterator[SimProcess]:
    """The simulator as a process; with ``wait_listen`` (default) returns once its port accepts
    connections, which under ``--refuse-until-ready`` is only after the load phase."""
    port = free_port()
    log = tmp / f"sglang-{port}.log"
    att = tmp / f"attestation-{port}.json"
    cmd = sim_command(
        port, speed=speed, startup=startup, extra=["--log", str(log), "--attestation", str(att), *args]
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if wait_listen:
            wait_listening(port, proc, what="simulator")
        yield SimProcess(proc, f"http://127.0.0.1:{port}", port, log, att)
    finally:
        stop(proc)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()


def wait_healthy(url: str, timeout: float = 20.0, headers: dict[str, str] | None = None) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if web.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url}/health never answered 200")
