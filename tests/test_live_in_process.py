"""The in-process harness (tests/support/in_process.py: the real ``check`` front door in this process, its
HTTP carried to the ``sim`` command's own server through ``LiveInputs.transport``) is held to the real
processes: for each scenario the harness stands in for, a ``python -m validator check`` process against a
``python -m validator.sim`` process on loopback gives the same exit code, verdict and status of every
check, with the attestation and the log read as files, so the seam the verdict tests rely on cannot drift
silently. The rows span what the harness emulates: a clean pass, wrong heads, a log style, a stall (a
request the server holds), malformed replies, a crash after ready (the port closes mid-check), a start
that dies while loading (the port never listens) and an API key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.check_helpers import CheckRun, evidence_files, run_check
from tests.support.in_process import check_in_process, sim_in_process
from tests.support.sim_process import sim_process
from validator.sim.scenarios import SCENARIOS, resolve

SCENARIO_ROWS = [
    "healthy",
    "draft-head-weight-only",
    "fp8-ignored",
    "stall",
    "malformed-json",
    "crash-after-ready",
    "dspark-ring-16",
    "auth-required",
]


def _statuses(run: CheckRun) -> dict[str, str]:
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.report is not None, run.explain()
    checks = {str(c["id"]): str(c["status"]) for c in run.report["checks"]}
    return checks | {"verdict": str(run.report["verdict"]), "rc": str(run.rc)}


def _both(tmp_path: Path, scenario: str, *sim_args: str) -> tuple[dict[str, str], dict[str, str]]:
    check_args = ["--rules", SCENARIOS[scenario].pack, "--wait", "20"]
    args = ["--scenario", scenario, *sim_args]
    if SCENARIOS[scenario].overrides.get("auth"):
        key = tmp_path / "api-key"
        key.write_text("differential-key-7\n")
        args += ["--api-key-file", str(key)]
        check_args += ["--api-key-file", str(key)]
    listens = resolve(scenario).ring_error is None
    (tmp_path / "inside").mkdir()
    with sim_in_process(tmp_path / "inside", *args, wait_listen=listens) as sim:
        inside = _statuses(check_in_process(sim, *check_args, *evidence_files(sim)))
    (tmp_path / "outside").mkdir()
    with sim_process(tmp_path / "outside", *args, wait_listen=listens) as proc:
        outside = _statuses(run_check(proc.url, *check_args, *evidence_files(proc)))
    return inside, outside


@pytest.mark.parametrize("scenario", SCENARIO_ROWS)
def test_in_process_statuses_are_the_real_processes(tmp_path: Path, scenario: str) -> None:
    inside, outside = _both(tmp_path, scenario)
    assert inside == outside
    assert inside["verdict"] == SCENARIOS[scenario].verdict  # the row itself, not two equal mistakes


def test_in_process_reads_a_log_style_as_the_real_processes(tmp_path: Path) -> None:
    inside, outside = _both(tmp_path, "backend-auto", "--log-style", "dataclass-ranked")
    assert inside == outside and inside["moe.backend"] == "fail"


def test_in_process_check_over_http_alone_is_the_real_processes(tmp_path: Path) -> None:
    """``check --url`` with no --attestation and no --log: HTTP alone, as a user on another host sees it;
    the in-process run's report matches the real one, names the URL it was given and leaves the head's
    dtype unproven (the real check's answer, not the simulator's scenario)."""
    with sim_in_process(tmp_path, "--scenario", "fp8-ignored") as sim:
        inside = check_in_process(sim, "--wait", "20")
    with sim_process(tmp_path, "--scenario", "fp8-ignored") as proc:
        outside = run_check(proc.url, "--wait", "20")
    assert _statuses(inside) == _statuses(outside)
    assert inside.report is not None and inside.report["target"] == sim.url
    assert inside.status("attestation.trust") == "skip" and inside.status("lm_head.fp8") == "error"


def test_each_in_process_check_reads_its_pack_as_a_new_process_does(tmp_path: Path) -> None:
    """A pack rewritten between two checks is judged as it is now: the validator's functools caches (the
    pack cache is keyed by path) start empty at each in-process check, as in each ``check`` process."""
    site = tmp_path / "site.yaml"
    head = "apiVersion: spark-validate/v1\nkind: RulePack\nextends: ling-3.0-flash-dgx-spark\nmetadata:\n"
    with sim_in_process(tmp_path, "--scenario", "healthy") as sim:
        names = []
        for name in ("site-one", "site-two"):
            site.write_text(f"{head}  name: {name}\n  version: '1'\n")
            run = check_in_process(sim, "--wait", "20", "--no-probe", "--rules", str(site))
            assert run.report is not None, run.explain()
            names.append(run.report["rule_pack"])
    assert names == ["site-one", "site-two"]
