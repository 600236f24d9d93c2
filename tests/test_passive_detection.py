"""Passive monitoring: a sidecar with ``--no-probe`` drops ``/readyz`` when the server's own acceptance
collapses to 1.00 under production traffic, from ``/metrics`` alone, without one probe token.

The timing is measured by ``bench/passive_detection.py``; this pins the behaviour: ready on the healthy
server, not ready after the collapse, ``spec.accept_length`` failing on the server's gauge (source
``metrics``), ``spark_validate_server_accept_length`` at 1, and the server having served the traffic's
requests only.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.passive_collapse import run_collapse


def test_sidecar_drops_readiness_on_the_servers_own_gauge_without_probing(tmp_path: Path) -> None:
    run = run_collapse(tmp_path, interval_s=1.0, collapse_after_s=3.0, speed=20.0, timeout_s=60.0)
    assert run.ready_before, run.sidecar_metrics
    assert run.first_broken_at is not None and run.dropped_at is not None, run
    assert run.dropped_at > run.first_broken_at  # it dropped on the collapse, not before
    assert run.probe_requests == 0, run  # every request the server served was the traffic's
    assert run.report is not None and run.report["verdict"] == "fail"
    checks = run.report["checks"]
    assert isinstance(checks, list)
    acc = next(c for c in checks if c["id"] == "spec.accept_length")
    assert acc["status"] == "fail" and acc["sources"] == ["metrics"], acc
    assert acc["evidence"]["server_accept_length"] == 1.0 and acc["evidence"]["server_decoding"] is True
    assert "spark_validate_server_accept_length 1.0" in run.sidecar_metrics
