"""The scenario table is a contract: ``check --rules PACK`` against each row's simulator reaches the row's
verdict and fails exactly the row's check IDs.

Rows are collected for the packs this checkout ships (``validator/data/rules``): the DSpark, cookbook and
baseline rows join as their packs land (``spark-validate rules list``), with no change here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.check_helpers import evidence_files, run_check
from tests.support.sim_process import sim_process
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
    with sim_process(tmp_path, *args, wait_listen=not dies_loading) as sim:
        run = run_check(sim.url, *check_args, *evidence_files(sim))
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.report is not None, run.explain()
    assert run.report["verdict"] == entry.verdict, run.explain()
    assert run.rc == EXIT[str(entry.verdict)], run.explain()
    assert run.with_status("fail") == set(entry.fails), run.explain()
