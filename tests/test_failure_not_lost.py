"""A failure found before the deadline is reported, whatever else did not finish (issue 28, item 4).

``npd`` and ``check`` with no ``--url`` judge every server on the node. Ten decoys whose argv is a healthy
server's and whose port accepts and never answers used to spend the whole budget one after another, and
the broken server's ``FAIL moe.backend`` became ``UNKNOWN did not finish`` (npd exit 2). Each test runs a
real node in a PID namespace of its own (``tests/support/node_scenario.py``): the simulator as the broken
server, the decoys as this user or as a real second local user, then the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.support.cli import REPO
from tests.support.namespaces import in_pid_namespace

BUDGET = "15"


def run_node(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = in_pid_namespace([sys.executable, "-m", "tests.support.node_scenario"])
    done = subprocess.run(
        [*argv, json.dumps(spec)], cwd=REPO, env=env, capture_output=True, text=True, timeout=400, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


NPD = ["npd", "--timeout", BUDGET, "--max-output-length", "400"]
CHECK = ["check", "--no-probe", "--deadline", BUDGET, "--format", "json"]


@pytest.mark.parametrize("decoy_user", ["same", "second"])
def test_ten_decoys_that_never_answer_cannot_hide_a_found_failure(decoy_user: str) -> None:
    node = run_node(
        {"scenario": "backend-auto", "decoys": 10, "decoy_user": decoy_user, "commands": [NPD, CHECK]}
    )
    npd, check = node["results"]
    server = node["server"]
    line = npd["stdout"].strip()
    assert npd["rc"] == 1, npd
    assert line.startswith("FAIL ") and f"moe.backend@{server}" in line, line
    assert npd["seconds"] < float(BUDGET) + 5, npd  # answered within its own --timeout
    assert check["rc"] == 78, check["stderr"]
    reports = json.loads(check["stdout"])
    reports = reports if isinstance(reports, list) else [reports]
    mine = [r for r in reports if str(r["target"]).startswith(f"PID {server} ")]
    assert len(mine) == 1 and mine[0]["verdict"] == "fail", [r["target"] for r in reports]
    backend = {c["id"]: c for c in mine[0]["checks"]}["moe.backend"]
    assert backend["status"] == "fail", backend
    # no decoy was judged as passing: each is ignored, or inconclusive because it never answered
    for report in reports:
        if not str(report["target"]).startswith(f"PID {server} "):
            assert report["verdict"] != "pass", report["target"]
    assert check["seconds"] < float(BUDGET) + 20, check["seconds"]


def test_control_the_decoys_alone_never_answer_and_the_broken_server_alone_fails() -> None:
    """What the test above stands on: each decoy is judged and never answers (its live half is an error:
    not a pass, not a finding about the server), and the broken server alone is npd's problem (1)."""
    hung = run_node({"scenario": None, "decoys": 3, "decoy_user": "same", "commands": [CHECK]})
    (check,) = hung["results"]
    reports = json.loads(check["stdout"])
    assert sorted(int(r["target"].split()[1]) for r in reports) == sorted(hung["decoys"])
    for report in reports:
        ready = {c["id"]: c for c in report["checks"]}["server.ready"]
        assert ready["status"] == "error" and report["verdict"] != "pass", ready
    broken = run_node({"scenario": "backend-auto", "decoys": 0, "commands": [NPD]})
    (npd,) = broken["results"]
    assert npd["rc"] == 1 and f"moe.backend@{broken['server']}" in npd["stdout"], npd
