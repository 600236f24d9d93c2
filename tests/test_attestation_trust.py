"""``attestation.trust`` end to end: forged attestations never make a broken server pass, and
a FIFO at the attestation path never freezes the sidecar.

A real simulator in the ``draft-head-weight-only`` state (the trap: its own attestation says
``shared_module`` false) runs on loopback; a healthy simulator supplies a genuine healthy document for the
forger to start from. Each forgery is the one of the issue: a foreign hostname with nulls, then the broken
server's real PID with its start time (both world-readable in /proc) but the wrong port, owner or mode.
``check`` runs as a real subprocess.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import web
from tests.support.check_helpers import run_check
from tests.support.daemon_process import daemon_process, wait_for
from tests.support.sim_process import SimProcess, sim_process
from validator.attestation import writer
from validator.sources.server.attestation import read_attestation

ATTACKER_UID = 54321


def _wait_file(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    assert path.exists(), path


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimProcess, SimProcess]]:
    tmp = tmp_path_factory.mktemp("trust")
    with (
        sim_process(tmp, "--scenario", "draft-head-weight-only") as broken,
        sim_process(tmp, "--scenario", "healthy") as healthy,
    ):
        _wait_file(broken.attestation)
        _wait_file(healthy.attestation)
        yield broken, healthy


def _forge(tmp_path: Path, healthy: SimProcess, **changes: Any) -> Path:
    """A healthy-looking document (the healthy server's own), rewritten by the forger."""
    doc = read_attestation(healthy.attestation)
    process = dataclasses.replace(doc.process, **changes.pop("process", {}))
    server = dataclasses.replace(doc.server, **changes.pop("server", {}))
    doc = dataclasses.replace(doc, process=process, server=server, **changes)
    path = tmp_path / "forged" / "attestation.json"
    writer.write_document(path, doc)
    return path


def _forge_with_real_identity(tmp_path: Path, broken: SimProcess, healthy: SimProcess, *, port: int) -> Path:
    """The healthy document, claiming the broken server's real PID and start time (what /proc shows anyone
    about it) and serving on ``port``."""
    real = read_attestation(broken.attestation).process
    return _forge(
        tmp_path, healthy, process={"pid": real.pid, "start_time": real.start_time}, server={"port": port}
    )


def _assert_not_a_pass(run: Any) -> None:
    assert run.report is not None, run.explain()
    assert run.report["verdict"] != "pass" and run.rc in (69, 78), run.explain()
    trust = run.check("attestation.trust")
    assert trust["status"] == "error", run.explain()
    shared = run.check("spec.lm_head_shared")
    assert shared["status"] != "pass", run.explain()
    assert "attestation" not in shared["sources"] or shared["status"] == "error", run.explain()


def test_the_broken_servers_own_attestation_fails_it(servers: tuple[SimProcess, SimProcess]) -> None:
    broken, _ = servers
    run = run_check(broken.url, "--wait", "20", "--no-probe", "--attestation", str(broken.attestation))
    assert run.rc == 78, run.explain()
    assert run.status("attestation.trust") == "pass"
    assert run.status("spec.lm_head_shared") == "fail"


def test_foreign_hostname_and_nulls(servers: tuple[SimProcess, SimProcess], tmp_path: Path) -> None:
    broken, healthy = servers
    raw = json.loads(healthy.attestation.read_text())
    raw["process"].update(hostname="build-box-7", start_time=None, tp_size=None, load_weight_s=None)
    raw["server"].update(host=None, port=None)
    raw["sglang"]["version"] = None
    path = tmp_path / "forged" / "attestation.json"
    writer.write_document(path, json.dumps(raw).encode())
    run = run_check(broken.url, "--wait", "20", "--no-probe", "--attestation", str(path))
    _assert_not_a_pass(run)
    message = run.check("attestation.trust")["message"]
    assert "written on host 'build-box-7'" in message and "no HTTP host and port" in message


def test_real_pid_and_start_time_but_the_wrong_port(
    servers: tuple[SimProcess, SimProcess], tmp_path: Path
) -> None:
    broken, healthy = servers
    path = _forge_with_real_identity(tmp_path, broken, healthy, port=healthy.port)
    run = run_check(broken.url, "--wait", "20", "--no-probe", "--attestation", str(path))
    _assert_not_a_pass(run)
    assert f"the URL is port {broken.port}" in run.check("attestation.trust")["message"]


def test_real_pid_and_port_but_another_owner(servers: tuple[SimProcess, SimProcess], tmp_path: Path) -> None:
    broken, healthy = servers
    path = _forge_with_real_identity(tmp_path, broken, healthy, port=broken.port)
    if os.geteuid() == 0:
        os.chown(path, ATTACKER_UID, ATTACKER_UID)  # what a second local user's file looks like
        os.chown(path.parent, ATTACKER_UID, ATTACKER_UID)
        needle = f"owned by UID {ATTACKER_UID}"
    else:  # the forger can only be ourselves: claim another writer UID than the file's owner
        raw = json.loads(path.read_text())
        raw["process"]["uid"] = os.geteuid() + 1
        writer.write_document(path, json.dumps(raw).encode())
        needle = "but the file is owned by UID"
    run = run_check(broken.url, "--wait", "20", "--no-probe", "--attestation", str(path))
    _assert_not_a_pass(run)
    assert needle in run.check("attestation.trust")["message"]


@pytest.mark.parametrize("target", ["file", "dir"])
def test_real_pid_and_port_but_writable_by_others(
    servers: tuple[SimProcess, SimProcess], tmp_path: Path, target: str
) -> None:
    broken, healthy = servers
    path = _forge_with_real_identity(tmp_path, broken, healthy, port=broken.port)
    os.chmod(path if target == "file" else path.parent, 0o666 if target == "file" else 0o777)
    run = run_check(broken.url, "--wait", "20", "--no-probe", "--attestation", str(path))
    _assert_not_a_pass(run)
    assert "writable by its group or others" in run.check("attestation.trust")["message"]


def test_fifo_at_the_attestation_path_does_not_freeze_the_sidecar(
    servers: tuple[SimProcess, SimProcess], tmp_path: Path
) -> None:
    """As found once: a FIFO at the path stopped /livez and /metrics (it was read on the event loop)."""
    broken, _ = servers
    fifo = tmp_path / "att" / "attestation.json"
    fifo.parent.mkdir(mode=0o700)
    os.mkfifo(fifo)
    fast = ["--interval", "1", "--health-interval", "0.3", "--probe-interval", "60", "--wait", "15"]
    with daemon_process(tmp_path, broken.url, *fast, "--attestation", str(fifo)) as d:

        def ran_twice() -> bool:
            text = d.get("/metrics").text
            runs = [ln for ln in text.splitlines() if ln.startswith("spark_validate_runs_total{")]
            return sum(float(ln.rsplit(" ", 1)[1]) for ln in runs) >= 2

        assert wait_for(ran_twice, timeout=40), d.log()[-3000:]
        worst = 0.0
        for _ in range(20):
            t0 = time.monotonic()
            assert d.get("/livez", timeout=2.0).status_code == 200
            worst = max(worst, time.monotonic() - t0)
        assert worst < 1.0, worst
        report = web.get(f"{d.base}/report", timeout=5).json()
        trust = next(c for c in report["checks"] if c["id"] == "attestation.trust")
        assert trust["status"] == "error" and "a FIFO, not a regular file" in trust["message"]
