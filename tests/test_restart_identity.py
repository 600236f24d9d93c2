"""Restart detection on builds without ``startup_time``: SGLang's docs builds serve no ``startup_time``, so
the sidecar keys on what every build has (``random_seed``, drawn at each start) and on the process that
listens on the port (its ``/proc`` start time). A restart that ``/health`` never sees (between two polls)
still drops readiness at the next re-check, and the new process is proven again."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.support.daemon_process import daemon_process, sim_on_port, wait_for
from validator.sources.server.identity import ServerIdentity, listener_of


def test_listener_identity_of_a_local_server(tmp_path: Path) -> None:
    with sim_on_port("healthy", extra=("--api-style", "docs-2026")) as sim:
        first = listener_of(sim.url)
        assert first is not None and first[0] == sim.proc.pid
        sim.restart()
        second = listener_of(sim.url)
    assert second is not None and second != first
    assert not ServerIdentity(listener_pid=first[0], listener_start=first[1]).same_server(
        ServerIdentity(listener_pid=second[0], listener_start=second[1])
    )
    assert listener_of("http://192.0.2.1:30000") is None  # another host: not visible from here


def test_restart_between_health_polls_is_seen_without_startup_time(tmp_path: Path) -> None:
    # /health is polled once a minute: only the identity at the next re-check can show the restart
    args = ["--interval", "4", "--health-interval", "60", "--probe-interval", "600", "--wait", "15"]
    with (
        sim_on_port("healthy", extra=("--api-style", "docs-2026")) as sim,
        daemon_process(tmp_path, sim.url, *args, "--no-probe", "--allow-partial") as d,
    ):
        assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
        sim.restart()
        assert wait_for(lambda: "identity changed" in d.log(), timeout=30), d.log()[-3000:]
        assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
        time.sleep(0.1)
    dropped = [json.loads(line) for line in d.log().splitlines() if '"readiness dropped"' in line]
    assert any("identity changed" in str(e.get("reason")) for e in dropped), dropped
