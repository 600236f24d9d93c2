"""Run spark-validate's command line (``python -m validator ARGS``) as a real subprocess, as an operator
meets it: exit code, stdout and stderr as text.

Why one helper: the front-door tests, the deploy tests and ``scripts/behaviour_snapshot.py`` each started
the CLI the same way (this interpreter, captured text streams, a bounded wait, the checkout first on the
child's import path) with a copy of the same ``subprocess.run`` call; what differs between them (the
environment, the working directory, the deadline) are the arguments here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support import zygote

REPO = Path(__file__).resolve().parents[2]


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, cwd: str | Path = REPO, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -m validator ARGS``. ``env`` is the child's whole environment (default: this process's);
    ``PYTHONPATH`` is always this checkout, so that the child runs the code under test whatever the
    caller's environment says. The child is forked from a warm interpreter where the test opted in
    (tests/support/zygote.py), and exec'd otherwise."""
    child_env = {**(os.environ if env is None else env), "PYTHONPATH": str(REPO)}
    return zygote.run([sys.executable, "-m", "validator", *args], env=child_env, cwd=cwd, timeout=timeout)


def json_report(stdout: str) -> dict[str, Any]:
    """The JSON report a run printed, or ``{}`` where it printed none (a usage or input error prints only
    its one line on stderr)."""
    if not stdout.strip().startswith("{"):
        return {}
    report: dict[str, Any] = json.loads(stdout)
    return report


def preflight_json(
    env: Mapping[str, str], *args: str, cwd: str | Path = REPO, timeout: float = 60
) -> tuple[int, dict[str, Any], str]:
    """``preflight --format json ARGS`` in the environment ``env``: exit code, report (``{}`` if none),
    stderr."""
    proc = run_cli("preflight", "--format", "json", *args, env=env, cwd=cwd, timeout=timeout)
    return proc.returncode, json_report(proc.stdout), proc.stderr
