"""A sidecar with ``--no-probe`` watching a simulator whose draft breaks mid-run, under production traffic.

Shared by ``tests/test_passive_detection.py`` (the behaviour: readiness drops, no probe token spent) and
``bench/passive_detection.py`` (the latency). The simulator serves ``/metrics`` (``--enable-metrics``) and
breaks its draft ``collapse_after`` seconds after it is ready (``--collapse-after``): from then on every
verify round accepts nothing, and its ``sglang:spec_accept_length`` gauge reads 1.00 at the next
``decode_log_interval``. A client thread plays the production traffic (short greedy ``/generate`` calls,
back to back); the first reply whose drafts were all rejected marks when the collapse became observable.
The sidecar must see it from the server's own gauge alone and drop ``/readyz``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import web
from tests.support.daemon_process import daemon_process, wait_for
from tests.support.loopback import free_port, stop
from tests.support.sim_process import REPO, sim_command


@dataclass
class Traffic:
    """Back-to-back greedy requests; records when each was sent and whether it accepted any draft."""

    url: str
    max_new_tokens: int = 48
    sent: int = 0
    first_broken_at: float | None = None  # monotonic send time of the first reply accepting nothing
    last_healthy_at: float | None = None
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="traffic")
        self._thread.start()

    def _run(self) -> None:
        body = {"text": "production traffic", "sampling_params": {"max_new_tokens": self.max_new_tokens}}
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    meta = client.post(f"{self.url}/generate", json=body).json()["meta_info"]
                except (httpx.HTTPError, ValueError, KeyError):
                    self.errors += 1
                    self._stop.wait(0.05)
                    continue
                self.sent += 1
                if meta.get("spec_verify_ct"):
                    if meta.get("spec_num_correct_drafts") == 0:
                        if self.first_broken_at is None:
                            self.first_broken_at = t0
                    else:
                        self.last_healthy_at = t0

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


@dataclass
class CollapseRun:
    ready_before: bool  # the sidecar was ready on the healthy server
    dropped_at: float | None  # monotonic time /readyz stopped answering 200
    first_broken_at: float | None
    traffic_requests: int
    server_requests: float | None  # the simulator's own sglang:num_requests_total at the end
    report: dict[str, object] | None  # the sidecar's /report after the drop
    sidecar_metrics: str

    @property
    def latency_s(self) -> float | None:
        if self.dropped_at is None or self.first_broken_at is None:
            return None
        return self.dropped_at - self.first_broken_at

    @property
    def probe_requests(self) -> float | None:
        """Requests the server served beyond the traffic's: what the sidecar spent (0 with --no-probe)."""
        return None if self.server_requests is None else self.server_requests - self.traffic_requests


def _sample(text: str, name: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    total = None
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                total = (total or 0.0) + float(s.value)
    return total


def run_collapse(
    tmp: Path, *, interval_s: float, collapse_after_s: float, speed: float = 20.0, timeout_s: float = 60.0
) -> CollapseRun:
    """One run: healthy server, sidecar ready, traffic, collapse, and the moment ``/readyz`` drops."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    att = tmp / f"attestation-{port}.json"
    cmd = sim_command(
        port,
        speed=speed,
        startup=0.3,
        extra=["--enable-metrics", "--attestation", str(att), "--collapse-after", str(collapse_after_s)],
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    sim = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    traffic = Traffic(url)
    try:
        args = [
            "--no-probe", "--allow-partial", "--attestation", str(att), "--wait", "30",
            "--interval", f"{interval_s:g}", "--probe-interval", "3600", "--health-interval", "5",
        ]  # fmt: skip
        with daemon_process(tmp, url, *args) as d:
            ready = wait_for(lambda: d.get("/readyz").status_code == 200, 40)
            traffic.start()
            dropped = None
            deadline = time.monotonic() + collapse_after_s + timeout_s
            while ready and time.monotonic() < deadline:
                try:
                    if d.get("/readyz").status_code != 200:
                        dropped = time.monotonic()
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.02)
            traffic.stop()
            report = d.get("/report").json() if dropped is not None else None
            sidecar_metrics = d.get("/metrics").text
        server_requests = None
        with contextlib.suppress(httpx.HTTPError):
            text = web.get(f"{url}/metrics", timeout=10).text
            server_requests = _sample(text, "sglang:num_requests_total")
        return CollapseRun(
            ready_before=ready,
            dropped_at=dropped,
            first_broken_at=traffic.first_broken_at,
            traffic_requests=traffic.sent,
            server_requests=server_requests,
            report=report,
            sidecar_metrics=sidecar_metrics,
        )
    finally:
        traffic.stop()
        stop(sim)
