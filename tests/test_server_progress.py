"""``server.progress`` from the user's side: a server that answers ``/health`` and completes nothing.

The real simulator in its ``stall`` scenarios (requests accepted, no token, SGLang's own metric names) and
the real ``check`` and ``serve`` processes: ``check`` fails the stall on its own bounded request and does
not run the acceptance probe into it; the sidecar, with traffic and the server's ``/metrics``, drops
readiness (never liveness) on a stall and returns when work completes again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.check_helpers import evidence_files, run_check
from tests.support.daemon_process import daemon_process, sim_on_port, wait_for
from tests.support.sim_process import sim_process


def test_check_fails_a_stalled_server_on_its_own_request_and_spares_the_probe(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--scenario", "stall") as sim:
        run = run_check(sim.url, "--wait", "20", *evidence_files(sim))
    assert run.rc == 78 and run.report is not None, run.explain()
    progress = run.check("server.progress")
    assert progress["status"] == "fail", run.explain()
    assert progress["evidence"]["source"] == "request" and progress["evidence"]["request_tokens"] == 0
    assert progress["remedy"] and "py-spy dump" in progress["remedy"]
    # not a broken draft: the probe was not sent into the stall, and says why
    assert run.report["probe"] is None
    assert "stalled" in run.check("spec.accept_length")["message"], run.explain()
    assert run.with_status("fail") == {"server.progress"}, run.explain()


def test_check_passes_progress_on_a_healthy_server(tmp_path: Path) -> None:
    with sim_process(tmp_path) as sim:
        run = run_check(sim.url, "--wait", "20", *evidence_files(sim))
    progress = run.check("server.progress")
    assert progress["status"] == "pass" and progress["evidence"]["request_tokens"] > 0, run.explain()


@contextmanager
def traffic(url: str, clients: int = 3) -> Iterator[list[int]]:
    """Clients sending /generate back to back until the block ends; yields the count of answered ones."""
    done = [0]
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(timeout=60) as c:
            while not stop.is_set():
                body = {"text": "traffic", "sampling_params": {"max_new_tokens": 64, "temperature": 0.6}}
                try:
                    if c.post(f"{url}/generate", json=body).status_code == 200:
                        done[0] += 1
                except httpx.HTTPError:
                    stop.wait(0.2)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    try:
        yield done
    finally:
        stop.set()


def _ready(d: object) -> bool:
    return d.get("/readyz").status_code == 200  # type: ignore[attr-defined,no-any-return]


def test_sidecar_drops_readiness_on_a_stall_under_traffic_and_returns_when_it_recovers(
    tmp_path: Path,
) -> None:
    """Traffic keeps the server busy; 15 s after ready its scheduler completes nothing for 15 s. The
    sidecar's re-checks read it from /metrics (no request of its own): readiness drops, liveness stays,
    and readiness returns once the held requests complete."""
    sim_args = (
        "--enable-metrics",
        "--stall-after",
        "15",
        "--stall-for",
        "15",
        "--idle-metrics-interval",
        "1",
    )
    with sim_on_port("healthy", extra=sim_args) as sim, traffic(sim.url) as answered:
        sidecar = [
            "--interval", "1", "--health-interval", "0.3", "--probe-interval", "600", "--wait", "20",
            "--allow-partial", "--stall-after", "2",
        ]  # fmt: skip
        with daemon_process(tmp_path, sim.url, *sidecar) as d:
            assert wait_for(lambda: _ready(d), 40), d.log()[-3000:]

            def stalled() -> bool:
                checks = {c["id"]: c for c in d.get("/report").json().get("checks", [])}
                return bool(checks.get("server.progress", {}).get("status") == "fail")

            assert wait_for(stalled, 60), d.log()[-3000:]
            report = d.get("/report").json()
            progress = {c["id"]: c for c in report["checks"]}["server.progress"]
            assert progress["evidence"]["source"] == "metrics", progress
            assert progress["evidence"]["requests_in_flight"] > 0, progress
            assert d.get("/readyz").status_code == 503
            assert d.get("/livez").status_code == 200  # never liveness: nothing restarts the server for it
            # the status page says stall, not a failing configuration or draft
            assert "not ready: server stalled" in d.get("/").text
            assert (
                'spark_validate_check_status{check="server.progress",severity="critical",status="fail"} 1'
                in (d.get("/metrics").text)
            )
            before = answered[0]
            assert wait_for(lambda: _ready(d), 60), d.log()[-3000:]
            assert answered[0] > before  # the held requests completed: that is what brought it back


def test_sidecar_without_metrics_sees_a_stall_by_its_own_request_and_returns_after_it(tmp_path: Path) -> None:
    """No /metrics, no traffic: the first full check's own request is held past its 30 s bound (the
    scheduler stalls from the first request for 40 s); readiness is never given. Full checks come every
    interval while stalled, so the first one after the stall ends runs the probe and readiness comes."""
    with sim_on_port("stall-then-recover", extra=("--stall-for", "40")) as sim:
        sidecar = ["--interval", "1", "--health-interval", "0.3", "--probe-interval", "600", "--wait", "20",
                   "--allow-partial"]  # fmt: skip
        with daemon_process(tmp_path, sim.url, *sidecar) as d:

            def progress() -> str:  # "" until the first check has reported
                checks = {c["id"]: c for c in d.get("/report").json().get("checks", [])}
                return str(checks.get("server.progress", {}).get("status", ""))

            assert wait_for(lambda: progress() == "fail", 60), d.log()[-3000:]
            assert d.get("/readyz").status_code == 503 and d.get("/livez").status_code == 200
            report = d.get("/report").json()
            ev = {c["id"]: c for c in report["checks"]}["server.progress"]["evidence"]
            assert ev["source"] == "request" and ev["request_tokens"] == 0, ev
            assert wait_for(lambda: _ready(d), 90), d.log()[-3000:]
            assert progress() == "pass"
