"""The scenario table is a contract: ``check --rules PACK`` against each row's simulator reaches the row's
verdict and fails exactly the row's check IDs.

Rows are collected for the packs this checkout ships (``validator/data/rules``): the DSpark, cookbook and
baseline rows join as their packs land (``spark-validate rules list``), with no change here.

The subject is the verdict, so each row runs the real ``check`` front door in this process against the
``sim`` command's own server (tests/support/in_process.py), attestation and log read as files;
tests/test_live_in_process.py holds that harness to real processes row by row.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.check_helpers import evidence_files
from tests.support.in_process import check_in_process, sim_in_process
from validator.rulepack import list_builtin_packs
from validator.sim.scenarios import SCENARIOS, resolve

SHIPPED = {p.stem for p in list_builtin_packs()}
ROWS = [n for n, e in SCENARIOS.items() if e.verdict is not None and e.pack in SHIPPED]
EXIT = {"pass": 0, "fail": 78, "inconclusive": 69}


def test_every_row_with_a_verdict_is_collected_for_the_default_pack() -> None:
    assert "ling-3.0-flash-dgx-spark" in SHIPPED
    default_rows = {n for n, e in SCENARIOS.items() if e.pack == "ling-3.0-flash-dgx-spark" and e.verdict}
    assert default_rows <= set(ROWS) and "healthy" in ROWS


@pytest.mark.parametrize("name", ROWS)
def test_check_reaches_the_rows_verdict(name: str, tmp_path: Path) -> None:
    entry = SCENARIOS[name]
    args = ["--scenario", name]
    check_args = ["--rules", entry.pack, "--wait", "20"]
    if entry.overrides.get("auth"):
        key = tmp_path / "api-key"
        key.write_text("table-test-key-9\n")
        args += ["--api-key-file", str(key)]
        check_args += ["--api-key-file", str(key)]
    # a row whose server dies while loading never binds its port (as a real launcher): check waits on it
    dies_loading = resolve(name).ring_error is not None
    with sim_in_process(tmp_path, *args, wait_listen=not dies_loading) as sim:
        run = check_in_process(sim, *check_args, *evidence_files(sim))
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.report is not None, run.explain()
    assert run.report["verdict"] == entry.verdict, run.explain()
    assert run.rc == EXIT[str(entry.verdict)], run.explain()
    assert run.with_status("fail") == set(entry.fails), run.explain()
