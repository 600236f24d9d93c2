"""The shipped Alertmanager config's inhibit rules, behaviourally: a real Alertmanager (Debian's
``prometheus-alertmanager``) on loopback with ``deploy/prometheus/alertmanager.yml``, the alerts posted
through its API as Prometheus posts them (``POST /api/v2/alerts``: labels are the rule's plus the series'),
and each alert's ``status.inhibitedBy`` read back (``GET /api/v2/alerts``).

A stalled server pages once, for the stall: its pod's ``SparkValidateNotReady`` and its failing
``server.progress`` (``SparkValidateCriticalCheckFailing{check="server.progress"}``) are inhibited, on that
instance only; another check failing there, a broken draft there, and anything on another instance are not.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import web
from tests.support.deploy_tools import DEPLOY, require_tool
from tests.support.loopback import free_port, stop

CONFIG = DEPLOY / "prometheus" / "alertmanager.yml"
STALLED, OTHER = "spark-1:9464", "spark-2:9464"


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    """Alertmanager on a loopback port the kernel picked, its storage in tmp_path, no cluster gossip."""
    binary = require_tool("prometheus-alertmanager")
    port = free_port()
    log = (tmp_path / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={CONFIG}",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # a single instance: no gossip port
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _until(lambda: _ready(url, proc), "alertmanager /-/ready", tmp_path / "alertmanager.log")
        yield url
    finally:
        stop(proc)
        log.close()


def _ready(url: str, proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, f"alertmanager exited with {proc.returncode}"
    try:
        return web.get(f"{url}/-/ready", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _until(cond: Any, what: str, log: Path | None = None, limit: float = 30.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def _alert(name: str, instance: str, severity: str, **labels: str) -> dict[str, Any]:
    """An alert as Prometheus sends it: the rule's labels over the series' (job, instance, ...)."""
    now = dt.datetime.now(dt.timezone.utc)
    series = {"job": "spark-validate", "instance": instance, "cluster": "lab", **labels}
    return {
        "labels": {"alertname": name, "severity": severity, **series},
        "annotations": {"summary": f"{name} on {instance}"},
        "startsAt": now.isoformat(),
        "endsAt": (now + dt.timedelta(minutes=5)).isoformat(),
        "generatorURL": "http://prometheus.invalid/graph",
    }


def _key(a: dict[str, Any]) -> tuple[str, str, str]:
    labels = a["labels"]
    return labels["alertname"], labels["instance"], labels.get("check", "")


def test_a_stall_inhibits_its_not_ready_and_its_progress_failure_only(alertmanager: str) -> None:
    progress = {"check": "server.progress", "status": "fail"}
    sent = [
        _alert("SparkValidateServerStalled", STALLED, "critical", **progress),
        _alert("SparkValidateNotReady", STALLED, "warning"),
        _alert("SparkValidateCriticalCheckFailing", STALLED, "critical", **progress),
        _alert("SparkValidateCriticalCheckFailing", STALLED, "critical", check="moe.backend", status="fail"),
        _alert("SparkValidateAcceptLengthLow", STALLED, "critical"),
        _alert("SparkValidateNotReady", OTHER, "warning"),
        _alert("SparkValidateCriticalCheckFailing", OTHER, "critical", **progress),
    ]
    inhibited = {
        ("SparkValidateNotReady", STALLED, ""),
        ("SparkValidateCriticalCheckFailing", STALLED, "server.progress"),
    }
    assert web.post(f"{alertmanager}/api/v2/alerts", json=sent, timeout=10).status_code == 200
    got: dict[tuple[str, str, str], dict[str, Any]] = {}

    def settled() -> bool:
        got.clear()
        got.update({_key(a): a for a in web.get(f"{alertmanager}/api/v2/alerts", timeout=10).json()})
        return len(got) == len(sent) and all(bool(got[k]["status"]["inhibitedBy"]) for k in inhibited)

    _until(settled, "the stall's inhibitions")
    stall = got[("SparkValidateServerStalled", STALLED, "server.progress")]
    for key, alert in got.items():
        status = alert["status"]
        if key in inhibited:
            assert status["state"] == "suppressed" and status["inhibitedBy"] == [stall["fingerprint"]], key
        else:
            assert status["state"] == "active" and status["inhibitedBy"] == [], (key, status)
