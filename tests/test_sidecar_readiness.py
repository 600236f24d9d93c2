"""The sidecar's readiness under real operations, from the user's side: the real daemon process, the real
simulator, and a loopback proxy between them that the test turns flaky (the readiness hysteresis), plus
a server that refuses connections while it loads."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.support.cli import run_cli
from tests.support.daemon_process import DaemonProcess, daemon_process, sim_on_port, wait_for
from tests.support.loopback import free_port, stop
from tests.support.sim_process import REPO, sim_command

# HTTP alone leaves the draft head unproven: these sidecars accept that
FAST = [
    "--interval",
    "0.5",
    "--health-interval",
    "0.3",
    "--probe-interval",
    "60",
    "--wait",
    "20",
    "--allow-partial",
]  # HTTP alone leaves the draft head unproven


class _Flaky(ThreadingHTTPServer):
    upstream: str
    failing: bool = False  # every request but /health answers 503, as a server under a transient fault


class _Forward(BaseHTTPRequestHandler):
    server: _Flaky

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.server.failing and not self.path.startswith("/health"):
            self._reply(503, b'{"error": "transient"}', "application/json")
            return
        try:
            r = httpx.request(
                self.command,
                self.server.upstream + self.path,
                content=body,
                headers={
                    k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")
                },
                timeout=30,
            )
        except httpx.HTTPError:
            self._reply(502, b"upstream gone", "text/plain")
            return
        self._reply(r.status_code, r.content, r.headers.get("content-type", "application/json"))

    def _reply(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _forward

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@contextmanager
def flaky_proxy(upstream: str) -> Iterator[_Flaky]:
    srv = _Flaky(("127.0.0.1", 0), _Forward)
    srv.upstream = upstream
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=5)


def _verdict(d: object) -> str:
    return str(d.get("/report").json()["verdict"])  # type: ignore[attr-defined]


@contextmanager
def _ready_behind_a_flaky_proxy(tmp_path: Path, *args: str) -> Iterator[tuple[_Flaky, DaemonProcess]]:
    """A healthy simulator behind a proxy the test can turn flaky, and a sidecar (no retries: each fault
    reaches a re-check) that reads it through the proxy, once that sidecar is ready."""
    with sim_on_port("healthy") as sim, flaky_proxy(sim.url) as proxy:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        with daemon_process(tmp_path, url, *FAST, "--retries", "0", *args) as d:
            assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
            yield proxy, d


def test_a_transient_fault_keeps_the_only_backend_ready(tmp_path: Path) -> None:
    with _ready_behind_a_flaky_proxy(tmp_path) as (proxy, d):
        proxy.failing = True
        seen_inconclusive = False
        deadline = time.monotonic() + 3.0  # several re-checks, all inconclusive
        while time.monotonic() < deadline:
            assert d.get("/readyz").status_code == 200, d.get("/report").text[-1500:]
            seen_inconclusive = seen_inconclusive or _verdict(d) == "inconclusive"
            time.sleep(0.1)
        assert seen_inconclusive, "the fault never reached a re-check"
        proxy.failing = False
        assert wait_for(lambda: _verdict(d) == "pass", timeout=10)
        assert d.get("/readyz").status_code == 200
        assert '"event": "readiness held"' in d.log()


def test_an_inconclusive_state_that_lasts_drops_readiness_after_unready_after(tmp_path: Path) -> None:
    with _ready_behind_a_flaky_proxy(tmp_path, "--unready-after", "1.5") as (proxy, d):
        proxy.failing = True
        t0 = time.monotonic()
        assert wait_for(lambda: d.get("/readyz").status_code == 503, timeout=10)
        held = time.monotonic() - t0
        assert 1.5 <= held <= 4.0, held  # the hold, plus at most one re-check interval
        assert d.get("/livez").status_code == 200
        proxy.failing = False
        assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=20), d.log()[-2000:]


def test_unready_after_must_be_a_duration(tmp_path: Path) -> None:
    for bad in ("-1", "nan", "inf"):
        res = run_cli("serve", "--url", "http://127.0.0.1:9", "--unready-after", bad)
        assert res.returncode == 2 and "--unready-after" in res.stderr, res.stderr


def test_a_server_still_loading_and_refusing_connections_is_not_crashed(tmp_path: Path) -> None:
    """A real launcher binds its port only once loaded: until then every connect is refused. The sidecar
    must wait (connecting), stay alive, and never call that a crash or a restart."""
    port = free_port()
    with daemon_process(tmp_path, f"http://127.0.0.1:{port}", *FAST) as d:
        time.sleep(1.5)  # nothing listens yet
        cmd = sim_command(port, speed=1000.0, startup=3.0, extra=["--refuse-until-ready"])
        sim = subprocess.Popen(
            cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 2.5  # the simulator loads, refusing connections throughout
            while time.monotonic() < deadline:
                assert d.get("/livez").status_code == 200
                ready = d.get("/readyz")
                assert ready.status_code == 503 and ready.json()["phase"] == "connecting", ready.text
                time.sleep(0.2)
            assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=30), d.log()[-3000:]
            # Read the log while the server still runs: stopping it is a real outage the sidecar must report.
            log = d.log()
        finally:
            stop(sim)
        for word in ("crash", "restarted", "readiness dropped", "traceback"):
            assert word not in log.lower(), log[-3000:]
