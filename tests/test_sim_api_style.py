"""``check`` against each simulated build family (``sim --api-style``): a healthy server in any family's
HTTP shapes passes, its acceptance read from whatever fields that family sends; the broken draft fails in
every family. The families come from real artifacts (tests/corpus/, validator/sim/api_style.py). The
broken draft's verdict comes from the real ``check`` front door in this process against the ``sim``
command's own server (tests/support/in_process.py, held to real processes by tests/test_live_in_process.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import web
from tests.support.check_helpers import evidence_files, run_check
from tests.support.in_process import check_in_process, sim_in_process
from tests.support.sim_process import sim_process, wait_healthy


@pytest.mark.parametrize("style", ["docs-2026", "legacy", "aliases"])
def test_a_healthy_server_of_each_family_passes(tmp_path: Path, style: str) -> None:
    with sim_process(tmp_path, "--api-style", style) as sim:
        wait_healthy(sim.url)
        info = web.get(f"{sim.url}/get_server_info", timeout=10).json()
        assert not {"startup_time", "launch_command", "frontend", "kv_events"} & set(info)
        assert (web.get(f"{sim.url}/server_info", timeout=10).status_code == 404) == (style == "legacy")
        run = run_check(sim.url, "--wait", "20", *evidence_files(sim))
    assert run.rc == 0, run.explain()
    acc = run.check("spec.accept_length")
    assert acc["status"] == "pass" and acc["evidence"]["accept_length"] > 2.5, run.explain()
    config = run.check("spec.config")
    assert config["status"] == "pass" and "launch_command" not in config["message"], run.explain()


@pytest.mark.parametrize("style", ["legacy", "aliases"])
def test_the_broken_draft_fails_in_every_family(tmp_path: Path, style: str) -> None:
    with sim_in_process(tmp_path, "--api-style", style, "--scenario", "draft-head-weight-only") as sim:
        run = check_in_process(sim, "--wait", "20", *evidence_files(sim))
    assert run.rc == 78, run.explain()
    assert run.check("spec.accept_length")["status"] == "fail", run.explain()
    assert run.check("probe.output")["status"] == "pass", run.explain()  # the schema is no verdict on text
