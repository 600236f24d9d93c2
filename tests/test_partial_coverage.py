"""Partial coverage is visible in every output, from the user's side:
the real CLI and the real sidecar against the simulator on loopback, and the real ``promtool``.

Over HTTP alone (no attestation) the draft head's identity cannot be proven, so ``spec.lm_head_shared`` is
unproven; ``--allow-partial`` accepts that and the verdict is a PASS that rests on less than every
critical invariant. Each output must say so: the text verdict line, JUnit's ``partial`` property and a
skipped case with the reason, ``/readyz`` and ``/report``, ``/readyz?verbose``, and ``/metrics``
(``spark_validate_check_status`` tells the unproven check from a failing one; ``spark_validate_coverage``).
The reports of ``check`` come from the real front door run in this process against the ``sim`` command's own
server (tests/support/in_process.py, held to real processes by tests/test_live_in_process.py); the sidecar
is a real process against a real simulator.
"""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon_process import daemon_process, wait_for
from tests.support.deploy_tools import require_tool
from tests.support.in_process import InProcessSim, check_in_process, sim_in_process
from tests.support.sim_process import SimProcess, sim_process

UNPROVEN = "spec.lm_head_shared"
FAST = ["--interval", "1", "--health-interval", "0.3", "--probe-interval", "60", "--wait", "15"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with sim_process(tmp_path_factory.mktemp("sim")) as s:
        yield s


@pytest.fixture(scope="module")
def inproc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessSim]:
    with sim_in_process(tmp_path_factory.mktemp("inproc")) as s:
        yield s


def _partial_args(sim: SimProcess | InProcessSim) -> tuple[str, ...]:
    return ("--wait", "20", "--log", str(sim.log))


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every series of ``name`` in a Prometheus exposition: (labels, value)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$", line)
        if m and m.group(1) == name:
            out.append((dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")), float(m.group(3))))
    return out


def promtool_check_metrics(text: str) -> None:
    """``promtool check metrics`` reads the exposition on stdin and lints it (exit 0: clean)."""
    res = subprocess.run(
        [require_tool("promtool"), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_text_verdict_line_says_partial(inproc: InProcessSim) -> None:
    run = check_in_process(inproc, *_partial_args(inproc), "--allow-partial", fmt="text")
    assert run.rc == 0, run.stdout + run.stderr
    verdict = next(ln for ln in run.stdout.splitlines() if ln.startswith("verdict: "))
    assert verdict.startswith("verdict: PASS (partial: 1 unproven) · "), verdict
    assert run.stdout.splitlines()[-1].startswith("proved ") and UNPROVEN in run.stdout.splitlines()[-1]
    full = check_in_process(
        inproc, "--wait", "20", "--log", str(inproc.log), "--attestation", str(inproc.attestation)
    )
    assert full.rc == 0 and full.report is not None and full.report["partial"] is False
    text = check_in_process(inproc, "--wait", "20", "--attestation", str(inproc.attestation), fmt="text")
    assert re.search(r"^verdict: PASS · ", text.stdout, re.M), text.stdout  # no note on a full pass


def test_junit_carries_partial_and_the_unproven_check_skipped_with_its_reason(inproc: InProcessSim) -> None:
    run = check_in_process(inproc, *_partial_args(inproc), "--allow-partial", fmt="junit")
    assert run.rc == 0, run.stdout + run.stderr
    suite = ET.fromstring(run.stdout)
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["partial"] == "true" and props["verdict"] == "pass"
    case = next(c for c in suite.iter("testcase") if c.get("name") == UNPROVEN)
    skipped = case.find("skipped")
    assert skipped is not None and case.find("error") is None
    assert (skipped.get("message") or "").startswith("not proven: ") and "--attestation" in (
        skipped.get("message") or ""
    )
    assert suite.get("errors") == "0" and int(suite.get("skipped") or 0) >= 1
    # not accepted: the same check is an error, and the run is not a pass
    strict = check_in_process(inproc, *_partial_args(inproc), fmt="junit")
    assert strict.rc == 69
    suite = ET.fromstring(strict.stdout)
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["partial"] == "true" and props["verdict"] == "inconclusive"
    case = next(c for c in suite.iter("testcase") if c.get("name") == UNPROVEN)
    assert case.find("error") is not None


def test_format_prom_is_valid_exposition_and_tells_unproven_from_failing(inproc: InProcessSim) -> None:
    run = check_in_process(inproc, *_partial_args(inproc), "--allow-partial", fmt="prom")
    assert run.rc == 0, run.stderr
    promtool_check_metrics(run.stdout)
    status = samples(run.stdout, "spark_validate_check_status")
    for labels, value in status:
        assert labels["mode"] == "check" and value in (0.0, 1.0)
    current = {(lb["check"], lb["status"]) for lb, v in status if v == 1.0}
    checks = {c for c, _ in current}
    assert len(current) == len(checks)  # exactly one current status per check
    assert (UNPROVEN, "error") in current and ("moe.backend", "pass") in current
    per_check = {lb["check"] for lb, _ in status}
    assert all(sum(1 for lb, _ in status if lb["check"] == c) == 6 for c in per_check)  # every status
    cov = {lb["kind"]: v for lb, v in samples(run.stdout, "spark_validate_coverage")}
    assert cov["not_proven"] == 1.0 and cov["proven"] == cov["critical"] - 1
    verdict = {lb["verdict"]: (v, lb["partial"]) for lb, v in samples(run.stdout, "spark_validate_verdict")}
    assert verdict["pass"] == (1.0, "true") and verdict["inconclusive"][0] == 0.0


def test_preflight_format_prom_for_the_textfile_collector(tmp_path: Path) -> None:
    """What a cron job writes into node_exporter's textfile directory: one file, renamed into place."""
    from tests.support.cli import run_cli

    out = tmp_path / "spark-validate-preflight.prom"
    cmd = "python -m sglang.launch_server --model-path /m --moe-runner-backend auto"
    proc = run_cli("preflight", "--format", "prom", "--output", str(out), "--launch-cmd", cmd)
    assert proc.returncode == 78, proc.stderr
    text = out.read_text()
    promtool_check_metrics(text)
    current = {lb["check"]: lb["status"] for lb, v in samples(text, "spark_validate_check_status") if v}
    assert current["moe.backend"] == "fail"
    verdict = {lb["verdict"]: v for lb, v in samples(text, "spark_validate_verdict")}
    assert verdict == {"pass": 0.0, "fail": 1.0, "inconclusive": 0.0}
    assert [lb["mode"] for lb, _ in samples(text, "spark_validate_build_info")] == ["preflight"]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary left for the collector to read


def test_sidecar_says_partial_on_readyz_report_verbose_and_metrics(tmp_path: Path, sim: SimProcess) -> None:
    with daemon_process(tmp_path, sim.url, *FAST, "--log", str(sim.log), "--allow-partial") as d:
        assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
        assert d.get("/readyz").json()["partial"] is True
        report = d.get("/report").json()
        assert report["partial"] is True and UNPROVEN in report["coverage"]["not_proven"]
        verbose = d.get("/readyz?verbose")
        assert verbose.status_code == 200 and verbose.headers["content-type"].startswith("text/plain")
        lines = verbose.text.splitlines()
        assert lines[-1] == "readyz check passed"
        assert "[+]moe.backend ok" in lines
        (line,) = [ln for ln in lines if ln.startswith(f"[+]{UNPROVEN} ")]
        assert "not proven (accepted by --allow-partial): " in line
        assert len(lines) == len(report["checks"]) + 1
        metrics = d.get("/metrics").text
    promtool_check_metrics(metrics)
    current = {lb["check"]: lb["status"] for lb, v in samples(metrics, "spark_validate_check_status") if v}
    assert current[UNPROVEN] == "error" and current["moe.backend"] == "pass"
    passed = {lb["check"]: v for lb, v in samples(metrics, "spark_validate_check_passed")}
    assert passed[UNPROVEN] == 0.0 and passed["moe.backend"] == 1.0  # the old gauge, unchanged beside it
    cov = {lb["kind"]: v for lb, v in samples(metrics, "spark_validate_coverage")}
    assert cov["not_proven"] == 1.0 and cov["critical"] == report["coverage"]["critical"]
    assert cov["proven"] == report["coverage"]["proven"]


def test_readyz_verbose_names_the_failing_check(tmp_path: Path) -> None:
    with (
        sim_process(tmp_path, "--scenario", "backend-auto") as bad,
        daemon_process(tmp_path, bad.url, *FAST, "--attestation", str(bad.attestation)) as d,
    ):
        assert wait_for(lambda: d.get("/report").status_code == 200, timeout=40), d.log()[-3000:]
        verbose = d.get("/readyz?verbose")
    assert verbose.status_code == 503
    lines = verbose.text.splitlines()
    assert lines[-1] == "readyz check failed"
    (line,) = [ln for ln in lines if ln.startswith("[-]moe.backend ")]
    assert line.startswith("[-]moe.backend failed: ")
