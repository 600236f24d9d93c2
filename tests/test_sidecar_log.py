"""The server log under real operations, from the user's side: the real sidecar and ``check`` processes
against the real simulator on loopback, with the log truncated, rotated or missing as logrotate and
operators leave it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.support import web
from tests.support.cli import run_cli
from tests.support.daemon_process import daemon_process, sim_on_port, wait_for
from tests.support.loopback import stop
from tests.support.sim_process import sim_process, wait_healthy

FAST = ["--interval", "0.5", "--health-interval", "0.3", "--probe-interval", "60", "--wait", "15"]


def _attestation(log: Path) -> Path:
    """Where a simulator logging to ``log`` attests: one path per test directory (the test's own private
    directory), so that a restarted server replaces the document the sidecar reads. With it the sidecar
    can prove the draft's head identity, and the only thing a test varies is the log."""
    return log.parent / "attestation.json"


def _check(url: str, *args: str) -> tuple[int, dict[str, object]]:
    res = run_cli("check", "--url", url, "--format", "json", *args, timeout=120)
    return res.returncode, json.loads(res.stdout)


def _by_id(report: dict[str, object]) -> dict[str, dict[str, object]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return {c["id"]: c for c in checks}


def _runs(d: object) -> float:
    text = d.get("/metrics").text  # type: ignore[attr-defined]
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("spark_validate_runs_total{")
    )


def test_copytruncate_on_a_healthy_server_keeps_it_ready(tmp_path: Path) -> None:
    """A false alarm once found: the log truncated under a healthy server made lm_head.fp8 fail ("log says
    bfloat16") and /readyz 503 until the server restarted."""
    log = tmp_path / "sglang.log"
    with sim_on_port(log=log, attestation=_attestation(log)) as sim:
        url = sim.url
        wait_healthy(url)
        evidence = ["--log", str(log), "--attestation", str(_attestation(log))]
        with daemon_process(tmp_path, url, *FAST, *evidence) as d:
            assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
            (tmp_path / "sglang.log.1").write_bytes(log.read_bytes())  # copytruncate: copy, then truncate
            os.truncate(log, 0)
            start = _runs(d)
            deadline = time.monotonic() + 30
            while _runs(d) < start + 4:  # four re-checks read the truncated log
                assert d.get("/readyz").status_code == 200, d.get("/report").text[-2000:]
                assert time.monotonic() < deadline, "the sidecar stopped re-checking"
                time.sleep(0.1)
            checks = _by_id(d.get("/report").json())
            assert checks["lm_head.fp8"]["status"] == "pass", checks["lm_head.fp8"]
            assert checks["server.log"]["status"] == "pass", checks["server.log"]
            assert checks["server.log"]["evidence"]["truncations"] == 1  # type: ignore[index]
            # the same truncated log read from scratch holds no start: error, never a BF16 head
            rc, report = _check(url, "--no-probe", "--log", str(log))
            assert rc == 69 and report["verdict"] == "inconclusive"
            one = _by_id(report)
            assert one["server.log"]["status"] == "error" and one["server.log"]["severity"] == "critical"
            assert "is empty: the log was truncated" in str(one["server.log"]["message"])
            assert one["lm_head.fp8"]["status"] != "fail", one["lm_head.fp8"]


def test_missing_or_unreadable_logs_are_errors_not_silence(tmp_path: Path) -> None:
    with sim_process(tmp_path) as sim:
        wait_healthy(sim.url)
        fifo = tmp_path / "fifo.log"
        os.mkfifo(fifo)
        for bad, why in (
            ("/nonexistent", "/nonexistent: cannot read server log"),
            (str(tmp_path), "server log is a directory"),
            (str(fifo), "server log is a FIFO"),
        ):
            rc, report = _check(sim.url, "--no-probe", "--attestation", str(sim.attestation), "--log", bad)
            check = _by_id(report)["server.log"]
            assert rc == 69 and check["status"] == "error" and why in str(check["message"]), check
        att = ["--attestation", str(sim.attestation), "--allow-partial"]  # --no-probe leaves one unproven
        rc, report = _check(sim.url, "--no-probe", *att, "--log", str(sim.log))
        assert rc == 0 and _by_id(report)["server.log"]["status"] == "pass", report
        rc, report = _check(sim.url, "--no-probe", *att)  # no --log: the check does not apply
        assert _by_id(report)["server.log"]["status"] == "skip"


def test_no_probe_fails_on_the_logs_own_accept_len(tmp_path: Path) -> None:
    """``--no-probe`` used to pass a broken server whose own log showed accept len 1.00."""
    with sim_process(tmp_path, "--scenario", "draft-head-weight-only") as sim:
        wait_healthy(sim.url)
        for _ in range(3):  # real traffic: a few hundred decode steps, logged every 40
            r = web.post(
                f"{sim.url}/generate",
                json={"text": "Count to one hundred.", "sampling_params": {"max_new_tokens": 120}},
                timeout=60,
            )
            assert r.status_code == 200
        rc, report = _check(sim.url, "--no-probe", "--log", str(sim.log))
        checks = _by_id(report)
        assert rc == 78 and checks["spec.accept_length"]["status"] == "fail", checks["spec.accept_length"]
        assert "accept len 1.00" in str(checks["spec.accept_length"]["message"])
        assert checks["server.log"]["status"] == "pass"
    with sim_process(tmp_path, "--scenario", "healthy") as sim:
        wait_healthy(sim.url)
        web.post(
            f"{sim.url}/generate",
            json={"text": "Count to one hundred.", "sampling_params": {"max_new_tokens": 300}},
            timeout=60,
        )
        rc, report = _check(
            sim.url, "--no-probe", "--attestation", str(sim.attestation), "--log", str(sim.log)
        )
        # no probe and nothing wrong logged: not proven, never a pass and never a failure
        assert rc == 69 and _by_id(report)["spec.accept_length"]["status"] == "error", report


def test_the_sidecar_follows_the_journal_across_a_restart(tmp_path: Path) -> None:
    """``serve --log journal:UNIT``: the real journalctl over a journal file; a new invocation of the unit
    is a new start, and the previous invocation's lines never describe it."""
    from tests.test_log_follow import FakeHost

    host = FakeHost(tmp_path)
    log = tmp_path / "sglang.log"
    with sim_on_port(log=log, attestation=_attestation(log)) as sim:
        url = sim.url
        wait_healthy(url)
        first = host.start()
        host.log(first, log.read_text(encoding="utf-8").splitlines())
        evidence = ["--log", "journal:sglang.service", "--attestation", str(_attestation(log))]
        with daemon_process(tmp_path, url, *FAST, *evidence, env=host.env()) as d:
            assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
            checks = _by_id(d.get("/report").json())
            assert checks["server.log"]["status"] == "pass" and checks["lm_head.fp8"]["status"] == "pass"
            # the unit restarts: a new process, a new invocation whose start is not in the journal yet
            stop(sim.proc)
            assert wait_for(lambda: d.get("/readyz").status_code == 503, timeout=5)
            second = host.start()
            log2 = tmp_path / "sglang-2.log"
            sim.restart(log=log2)  # the same attestation path: the new start replaces the document
            wait_healthy(url)
            runs = _runs(d)
            assert wait_for(lambda: _runs(d) >= runs + 2, timeout=30)
            assert d.get("/readyz").status_code == 503  # the old invocation's start proves nothing
            message = _by_id(d.get("/report").json())["server.log"]["message"]
            assert "current invocation has logged no server start" in str(message), message
            host.log(second, log2.read_text(encoding="utf-8").splitlines())
            assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
            assert d.get("/livez").status_code == 200


def test_the_logs_accept_len_cross_checks_the_probe(tmp_path: Path) -> None:
    """A probe that passes while the server's own log shows real traffic accepting nothing: the sources
    disagree, and server.log says so (critical)."""
    from tests.test_server_log import _decode

    with sim_process(tmp_path) as sim:
        wait_healthy(sim.url)
        log = tmp_path / "copy.log"
        lines = sim.log.read_text(encoding="utf-8").splitlines()
        log.write_text("\n".join([*lines, *[_decode(1.00, 0.00, 24.0)] * 8]) + "\n", encoding="utf-8")
        rc, report = _check(sim.url, "--log", str(log))
        checks = _by_id(report)
        assert checks["spec.accept_length"]["status"] == "pass"  # the probe measured a healthy draft
        assert checks["server.log"]["status"] == "fail", checks["server.log"]
        assert "accept len 1.00 in all of its last 8 decode intervals" in str(checks["server.log"]["message"])
        assert rc == 78
