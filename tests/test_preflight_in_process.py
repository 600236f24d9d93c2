"""The in-process preflight (tests/support/in_process.py: ``preflight_in_process``, the real ``preflight``
front door run in the test's process) is held to a real ``python -m validator preflight`` process: for the
shipped recipe (pass), a build that ignores the FP8 head (fail), a hub id with nothing local to read
(inconclusive, in JSON and text), a launch command SGLang refuses and an unknown pack (input errors) and a
usage error, both give the same exit code, the same stdout (the report, its clock aside) and the same
stderr. And an in-process run leaves nothing behind: the environment, the working directory, the loggers
and the registered secrets are as they were, so one test's run cannot change another's verdict.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.in_process import preflight_in_process
from tests.test_preflight import Server, _server
from validator import redact

HUB_ID = "inclusionAI/Ling-3.0-flash-fp4"


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("patched"), "patched")


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("stock"), "stock", fp8_lm_head=False, share_hook=False)


def _without_clock(value: Any) -> Any:
    """The report with the fields that read the clock (when it ran, how long it took) left out."""
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k not in CLOCK_FIELDS}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


CLOCK_FIELDS = frozenset(
    {"generated_at", "started_at", "finished_at", "duration_s", "elapsed_s", "duration_ms"}
)


# the text report's timing of a phase (`skip · 0.07 s`)
SECONDS = re.compile(r"\b\d+(?:\.\d+)? s\b")


def _same(env: dict[str, str], *args: str, rc: int, fmt: str = "json") -> None:
    real = run_cli("preflight", "--format", fmt, *args, env=env)
    here = preflight_in_process("--format", fmt, *args, env=env)
    assert "Traceback" not in real.stderr + here.stderr, (real.stderr[-2000:], here.stderr[-2000:])
    assert (real.returncode, here.returncode) == (rc, rc), (real.stderr[-600:], here.stderr[-600:])
    assert here.stderr == real.stderr
    if fmt == "json" and real.stdout.strip():
        assert _without_clock(json.loads(here.stdout)) == _without_clock(json.loads(real.stdout))
    else:
        assert SECONDS.sub("N s", here.stdout) == SECONDS.sub("N s", real.stdout)


def test_the_shipped_recipe_passes_in_process_as_in_a_process(patched: Server) -> None:
    _same(patched.env, "--launch-cmd", patched.cmd(), rc=0)


def test_a_failing_build_fails_in_process_as_in_a_process(stock: Server) -> None:
    _same(stock.env, "--launch-cmd", stock.cmd(), rc=78)


def test_nothing_local_is_inconclusive_in_process_as_in_a_process(patched: Server) -> None:
    hub = patched.cmd().replace(str(patched.model), HUB_ID)
    _same(patched.env, "--launch-cmd", hub, rc=69)
    _same(patched.env, "--launch-cmd", hub, rc=69, fmt="text")


def test_a_refused_launch_command_is_the_same_input_error(patched: Server) -> None:
    _same(patched.env, "--launch-cmd", patched.cmd("--no-such-flag"), rc=65)
    _same(patched.env, "--rules", "no-such-pack", "--launch-cmd", patched.cmd(), rc=65)


def test_a_usage_error_is_the_same_usage_error(patched: Server) -> None:
    _same(patched.env, "--no-such-option", rc=2)
    _same(patched.env, "--launch-cmd", patched.cmd(), rc=2, fmt="no-such-format")


def test_an_in_process_run_leaves_nothing_behind(patched: Server, tmp_path: Path) -> None:
    """A run with another environment, another working directory, a secret and a ``--log-level``
    SGLang refuses (whose check sets a logger's level) gives back this process's state unchanged."""
    env_before, cwd_before = dict(os.environ), os.getcwd()
    secrets_before = set(redact._REGISTERED)
    levels_before = {
        n: lg.level for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)
    }
    env = {
        **patched.env,
        "SPARK_VALIDATE_API_KEY": "sk-in-process-leak-test-0123456789",
        "IN_PROCESS_LEAK": "1",
    }
    cmd = patched.cmd("--api-key", "sk-in-process-leak-test-0123456789", "--log-level", "basic_format")
    proc = preflight_in_process("--format", "json", "--launch-cmd", cmd, env=env, cwd=tmp_path)
    assert proc.returncode == 65 and "Unknown level" in proc.stderr, proc.stderr[-600:]
    assert "spark_validate.log_level_check" in logging.root.manager.loggerDict
    assert "sk-in-process-leak-test-0123456789" not in proc.stdout + proc.stderr
    assert dict(os.environ) == env_before
    assert os.getcwd() == cwd_before
    assert set(redact._REGISTERED) == secrets_before
    after = {
        n: lg.level for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)
    }
    assert {n: after[n] for n in levels_before} == levels_before
    assert all(after[n] == logging.NOTSET for n in set(after) - set(levels_before))
