"""Exit codes and messages of the front doors as an operator meets them: bad options are usage
errors, a pipe closed by ``head`` ends quietly, a program that is not SGLang is not waited on, a refused
key and a missing key are told apart, and a malformed checkpoint still leaves the requested report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.cli import run_cli
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.sim_process import sim_process
from tests.test_preflight import REPO, _server

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def spark(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=ENV, timeout=timeout)


def one_line(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["check", "--url", "http://127.0.0.1:99999"], "--url"),
        (["check", "--url", "http://user:hunter22@127.0.0.1:99999"], "--url"),
        (["check", "--url", "http://:30000"], "names no host"),
        (["check", "--url", "ftp://127.0.0.1:30000"], "http://"),
        (["check", "--url", "http://127.0.0.1:30000", "--wait", "-1"], "--wait"),
        (["check", "--url", "http://127.0.0.1:30000", "--wait", "nan"], "--wait"),
        (["check", "--url", "http://127.0.0.1:30000", "--retries", "-2"], "--retries"),
        (["serve", "--url", "http://127.0.0.1:30000", "--wait", "-1"], "--wait"),
    ],
)
def test_bad_live_options_are_usage_errors(args: list[str], needle: str) -> None:
    """`--url http://127.0.0.1:99999` used to end in `internal error: ExceptionGroup` (exit 1)."""
    res = spark(*args, timeout=30)
    assert res.returncode == 2, res.stderr
    line = one_line(res.stderr)
    assert needle in line and "hunter22" not in line


def test_a_reader_that_closes_the_pipe_ends_quietly() -> None:
    """`spark-validate rules list | head -1`: no `internal error: BrokenPipeError`, the SIGPIPE status."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write, as after `head -1` had its line
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "validator", "rules", "list"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            cwd=REPO,
            timeout=30,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 128 + 13
    assert proc.stderr == ""


def test_a_server_that_is_not_sglang_is_not_waited_on(tmp_path: Path) -> None:
    """`python3 -m http.server` answers 404 on /health: it is not loading, it is the wrong program."""
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_listening(port, web, what="http.server")
        t0 = time.monotonic()
        res = spark("check", "--url", f"http://127.0.0.1:{port}", "--wait", "120", "--no-probe", timeout=100)
        took = time.monotonic() - t0
    finally:
        stop(web)
        if web.stderr:
            web.stderr.close()
    assert res.returncode == 69, res.stderr
    assert took < 30, took  # not the whole --wait
    assert "not an SGLang server" in res.stdout


def test_wrong_and_missing_api_keys_are_told_apart(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("the-right-key-1234\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("a-wrong-key-5678\n")
    with sim_process(tmp_path, "--api-key-file", str(key)) as sim:
        missing = spark("check", "--url", sim.url, "--wait", "20", "--no-probe")
        refused = spark("check", "--url", sim.url, "--wait", "20", "--no-probe", "--api-key-file", str(wrong))
    assert missing.returncode == 69 and refused.returncode == 69
    assert "needs an API key and none was given" in missing.stdout
    assert "refused the API key" not in missing.stdout
    assert "refused the API key given" in refused.stdout
    assert "none was given" not in refused.stdout
    assert "a-wrong-key-5678" not in refused.stdout


@pytest.mark.parametrize("fmt", ["json", "junit"])
def test_truncated_safetensors_still_writes_the_requested_report(tmp_path: Path, fmt: str) -> None:
    """A malformed checkpoint used to abort before any output: CI asked for a JUnit file and got none."""
    server = _server(tmp_path, "srv")
    model = tmp_path / "model"
    write_checkpoint(model, small=True)
    shard = next(model.glob("*.safetensors"))
    shard.write_bytes(shard.read_bytes()[:6])
    out = tmp_path / f"report.{fmt}"
    res = run_cli(
        "preflight", "--launch-cmd", server.cmd(), "--model-dir", str(model), "--format", fmt, "--output",
        str(out), env=server.env,
    )  # fmt: skip
    assert res.returncode == 65
    assert shard.name in one_line(res.stderr)
    text = out.read_text()
    if fmt == "json":
        layout = next(c for c in json.loads(text)["checks"] if c["id"] == "checkpoint.layout")
        assert layout["status"] == "error" and shard.name in layout["message"]
    else:
        assert "checkpoint.layout" in text and shard.name in text


def test_sim_refuses_an_attestation_directory_others_can_write_before_it_starts(tmp_path: Path) -> None:
    """The simulator writes its attestation once loaded, seconds after it listens; a directory the
    private writer refuses is a usage error at once, naming the path, never an internal error later."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    att = shared / "att.json"
    res = spark("sim", "--port", str(free_port()), "--attestation", str(att), timeout=30)
    assert res.returncode == 2, res.stderr
    assert f"--attestation {att}" in res.stderr and "refusing to write the attestation" in res.stderr
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr
    assert not att.exists()
