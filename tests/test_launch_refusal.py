"""A refused start reaches Prometheus: ``launch`` records each decision in its state file, the sidecar
(``serve --launch-state``), which outlives the refusal, exports it, and a real Prometheus with the shipped
rules fires ``SparkValidateLaunchRefused``; a later launch that starts the server clears it.

The server is spark-validate's simulator behind ``launch`` (``launch -- python -m validator sim``), with
and without the recipe's FP8 variable: launch judges the command the simulator stands in for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from tests.support import web
from tests.support.cli import run_cli
from tests.support.daemon_process import daemon_process, wait_for
from tests.support.deploy_tools import DEPLOY, load_yaml, running_prometheus, with_short_for
from tests.support.loopback import free_port, stop
from validator.sources.launch.state import LaunchState, read_state, write_state

REPO = Path(__file__).resolve().parents[1]


def _launch_sim(state: Path, port: int, env: dict[str, str], *flags: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "validator", "launch", "--report-to", "none", *flags, "--",
           sys.executable, "-m", "validator", "sim", "--scenario", "healthy", "--port", str(port),
           "--speed", "1000", "--startup-seconds", "0.1"]  # fmt: skip
    full = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_VALIDATE_LAUNCH_STATE": str(state), **env}
    if "SGLANG_ENABLE_FP8_LM_HEAD" not in env:
        full.pop("SGLANG_ENABLE_FP8_LM_HEAD", None)
    return subprocess.Popen(cmd, cwd=REPO, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _metric_lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " ")]


def test_refused_launch_is_exported_alerted_and_cleared_by_a_start(tmp_path: Path) -> None:
    state = tmp_path / "launch-state.json"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    rules = tmp_path / "rules.yml"
    rules.write_text(
        yaml.safe_dump(with_short_for(load_yaml(DEPLOY / "prometheus" / "spark-validate.rules.yml"), "1s"))
    )
    with daemon_process(
        tmp_path, url, "--launch-state", str(state), "--no-probe", "--health-interval", "0.2", "--wait", "1"
    ) as sidecar:
        assert not _metric_lines(sidecar.get("/metrics").text, "spark_validate_launch_refused")  # none yet
        refused = _launch_sim(state, port, {})
        assert refused.wait(timeout=60) == 78  # FP8 head not requested: a critical check fails
        first = read_state(state)[0]
        assert first is not None and not first.started and "lm_head.fp8" in first.blocking

        def exported(expect: str) -> bool:
            return any(
                expect in line
                for line in _metric_lines(sidecar.get("/metrics").text, "spark_validate_launch_refused")
            )

        assert wait_for(lambda: exported('{exit_code="78",verdict="fail"} 1.0'), 10), sidecar.get(
            "/metrics"
        ).text
        assert 'spark_validate_launch_blocking{check="lm_head.fp8"} 1.0' in sidecar.get("/metrics").text
        scrape = [
            {"job_name": "spark-validate", "static_configs": [{"targets": [f"127.0.0.1:{sidecar.port}"]}]}
        ]
        with running_prometheus(tmp_path / "prom", scrape, rule_files=[rules]) as prom:

            def firing() -> list[dict[str, str]]:
                return [
                    a["labels"]
                    for a in prom.alerts("firing")
                    if a["labels"]["alertname"] == "SparkValidateLaunchRefused"
                ]

            prom.wait_for("SparkValidateLaunchRefused firing", lambda: bool(firing()), timeout=30)
            (labels,) = firing()
            assert (
                labels["verdict"] == "fail"
                and labels["exit_code"] == "78"
                and labels["severity"] == "critical"
            )
            # the same server command with the recipe's variable: launch approves and execs the simulator
            started = _launch_sim(state, port, {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}, "--allow-partial")
            try:
                assert wait_for(lambda: exported('{exit_code="0",verdict="pass"} 0.0'), 20)
                # a start that went ahead under --allow-partial (critical checks unproven) blocked nothing:
                # the runbook's first step greps spark_validate_launch_blocking
                after = read_state(state)[0]
                assert after is not None and after.started and after.blocking == (), after
                metrics = sidecar.get("/metrics").text
                assert not _metric_lines(metrics, "spark_validate_launch_blocking"), metrics
                prom.wait_for(
                    "SparkValidateLaunchRefused resolved",
                    lambda: (
                        not any(
                            a["labels"]["alertname"] == "SparkValidateLaunchRefused" for a in prom.alerts()
                        )
                    ),
                    timeout=30,
                )
                assert started.poll() is None  # exec'd: the simulator runs under launch's PID

                def answers() -> bool:  # the state is written before exec: the server binds a little later
                    try:
                        return web.get(f"{url}/health", timeout=2).status_code in (200, 503)
                    except httpx.HTTPError:
                        return False

                assert wait_for(answers, 30)
            finally:
                stop(started)


def test_an_unusable_state_file_is_reported_not_fatal(tmp_path: Path) -> None:
    state = tmp_path / "launch-state.json"
    state.write_text('{"schema": "something else"}')
    with daemon_process(
        tmp_path, f"http://127.0.0.1:{free_port()}", "--launch-state", str(state), "--no-probe",
        "--health-interval", "0.2", "--wait", "1",
    ) as sidecar:  # fmt: skip
        assert wait_for(
            lambda: "spark_validate_launch_state_readable 0.0" in sidecar.get("/metrics").text, 10
        )
        assert not _metric_lines(sidecar.get("/metrics").text, "spark_validate_launch_refused")
        assert sidecar.get("/livez").status_code == 200
        time.sleep(0.5)
        assert sidecar.log().count("launch state unusable") == 1, sidecar.log()


def test_launch_state_write_failure_never_blocks_or_hides_the_refusal(tmp_path: Path) -> None:
    proc = run_cli(
        "launch", "--state-file", str(tmp_path / "missing-dir" / "state.json"), "--report-to", "none", "--",
        "python3", "-m", "sglang.launch_server", "--model-path", "/nope",
    )  # fmt: skip
    assert proc.returncode == 78
    assert "cannot write the launch state" in proc.stderr and "Traceback" not in proc.stderr


def test_malformed_input_is_recorded_as_an_error(tmp_path: Path) -> None:
    """An env file launch cannot read (exit 65) is a refusal too: recorded with verdict error."""
    state = tmp_path / "state.json"
    bad = tmp_path / "bad"
    bad.write_text("not = a valid \x00 file\n")
    proc = run_cli(
        "launch",
        "--state-file",
        str(state),
        "--env-file",
        str(bad),
        "--",
        "python3",
        "-m",
        "sglang.launch_server",
    )
    recorded = read_state(state)[0]
    assert recorded is not None and recorded.verdict == "error" and recorded.exit_code == proc.returncode != 0


def test_a_state_that_started_exports_no_blocking_check(tmp_path: Path) -> None:
    """A state file from an older launch that listed unproven checks although it started the server: the
    sidecar exports launch_refused 0 and no spark_validate_launch_blocking series."""
    from validator.sources.launch.state import LaunchState, write_state

    state = tmp_path / "launch-state.json"
    started = LaunchState(
        time.time(), "pass", 0, True, ("lm_head.fp8", "spec.lm_head_shared"), None, "started"
    )
    assert write_state(state, started) is None
    with daemon_process(
        tmp_path, f"http://127.0.0.1:{free_port()}", "--launch-state", str(state), "--no-probe",
        "--health-interval", "0.2", "--wait", "1",
    ) as sidecar:  # fmt: skip
        assert wait_for(
            lambda: (
                'spark_validate_launch_refused{exit_code="0",verdict="pass"} 0.0'
                in sidecar.get("/metrics").text
            ),
            10,
        ), sidecar.get("/metrics").text
        assert not _metric_lines(sidecar.get("/metrics").text, "spark_validate_launch_blocking")


def test_a_state_file_holding_anything_but_what_launch_writes_is_unusable_as_a_whole(tmp_path: Path) -> None:
    """Read strictly, like every document (``validator.validation``): a blocking "check ID" that would be a
    Prometheus label of someone's choosing, or a string where launch writes a number, refuses the file
    (it was read with the odd entry dropped or replaced); what launch writes reads back whole."""
    state = tmp_path / "launch-state.json"
    written = LaunchState(1.5, "fail", 78, False, ("lm_head.fp8",), "ling", "refused")
    assert write_state(state, written) is None and read_state(state) == (written, None)
    good = json.loads(state.read_text())
    for key, value, said in (
        ("exit_code", "78", "exit_code: Input should be a valid integer"),
        ("pack", 7, "pack: Input should be a valid string"),
        ("blocking", ['lm_head.fp8"} 1\nspark_validate_up{x="'], "blocking[0]: String should match pattern"),
    ):
        state.write_text(json.dumps({**good, key: value}))
        found, why = read_state(state)
        assert (
            found is None and why is not None and why.startswith(f"{state}: malformed launch state ({said}")
        )
    with daemon_process(
        tmp_path, f"http://127.0.0.1:{free_port()}", "--launch-state", str(state), "--no-probe",
        "--health-interval", "0.2", "--wait", "1",
    ) as sidecar:  # fmt: skip
        assert wait_for(
            lambda: "spark_validate_launch_state_readable 0.0" in sidecar.get("/metrics").text, 10
        )
        assert not _metric_lines(sidecar.get("/metrics").text, "spark_validate_launch_refused")
