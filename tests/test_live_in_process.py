"""The live job judged in-process against the simulator's ASGI app (``LiveInputs.transport``), the seam for
moving verdict-only live tests off two interpreters per test: the same scenario gives the same statuses
in-process as through the real ``check`` process against the simulator on loopback, where the subject is
what HTTP alone proves (no attestation, no log)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.asgi_check import statuses_in_process
from tests.support.check_helpers import run_check
from tests.support.sim_process import sim_process


@pytest.mark.parametrize("scenario", ["healthy", "draft-head-weight-only"])
def test_in_process_statuses_are_the_real_processes(tmp_path: Path, scenario: str) -> None:
    (tmp_path / "inside").mkdir()
    inside = asyncio.run(statuses_in_process(scenario, tmp_path / "inside"))
    with sim_process(tmp_path, "--scenario", scenario) as sim:
        run = run_check(sim.url, "--wait", "20")
    assert run.report is not None, run.explain()
    outside = {c["id"]: c["status"] for c in run.report["checks"]} | {"verdict": run.report["verdict"]}
    assert inside == outside
