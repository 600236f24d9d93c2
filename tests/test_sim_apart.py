"""The simulator stands apart from the production path: ``check --url`` against a real server (here a
simulator process on loopback) loads no module of ``validator/sim/``. Only the paths that read processes
(discovery, ``--pid``, ``launch``, the sidecar) register the simulator's command-line mapping.

The child interpreter runs the CLI's own ``main`` with the real arguments and then writes the
``validator.sim`` modules it holds to a file, so that what is asserted is what that command loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.sim_process import REPO, sim_process

pytestmark = pytest.mark.timeout(120)

# argv: OUT_FILE CLI_ARGS...; the exit code and the simulator modules loaded go to OUT_FILE as JSON
CHILD = """
import json, sys
from validator.cli import main
out, args = sys.argv[1], sys.argv[2:]
code = main(args)
sim = sorted(m for m in sys.modules if m == "validator.sim" or m.startswith("validator.sim."))
with open(out, "w") as f:
    json.dump({"rc": code, "sim": sim}, f)
"""


def _loaded(tmp: Path, *args: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    out = tmp / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("SPARK_VALIDATE_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=90,
    )
    assert out.exists(), proc.stderr[-2000:]
    found: dict[str, Any] = json.loads(out.read_text())
    return found, proc


def test_check_url_loads_no_simulator_module(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--scenario", "healthy") as sim:
        args = ("--attestation", str(sim.attestation), "--log", str(sim.log))
        found, proc = _loaded(tmp_path, "check", "--url", sim.url, "--wait", "20", "--format", "json", *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    # the live checks really ran and passed: the server was read over HTTP, the probe answered
    assert found["rc"] == 0 and report["verdict"] == "pass", proc.stdout[-2000:]
    assert found["sim"] == [], found["sim"]


def test_a_process_path_does_register_the_simulator(tmp_path: Path) -> None:
    """Control: the listing sees the simulator's modules where a path that reads processes loads them
    (``--pid`` of a process that does not exist: discovery starts, finds nothing, exits 69)."""
    found, proc = _loaded(tmp_path, "check", "--pid", "999999999", "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "validator.sim.process_view" in found["sim"], (found, proc.stderr[-1000:])
