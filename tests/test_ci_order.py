"""How a CI run hands out its files and waits for what builds beside it (tests/conftest.py).

The files go to xdist workers longest first (``tests/wall_by_file.txt``), and a test needing SGLang's
environment waits, bounded, for the file .ci/run's build step writes when it ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest

TESTS = Path(__file__).resolve().parent


def test_every_file_of_the_wall_table_is_a_test_file() -> None:
    assert conftest._walls(), "tests/wall_by_file.txt is empty"
    assert [name for name in conftest._walls() if not (TESTS / name).is_file()] == []


def test_files_go_out_longest_first_and_unlisted_ones_last_in_their_order() -> None:
    walls = conftest._walls()
    longest, second = sorted(walls, key=lambda n: -walls[n])[:2]
    names = ["test_new_b.py", second, "test_new_a.py", longest, second]
    items = [SimpleNamespace(path=TESTS / n, n=i) for i, n in enumerate(names)]
    conftest._longest_first(items)  # type: ignore[arg-type]
    assert [(i.path.name, i.n) for i in items] == [
        (longest, 3), (second, 1), (second, 4), ("test_new_b.py", 0), ("test_new_a.py", 2)
    ]  # fmt: skip


def test_a_built_environment_lets_the_test_run(tmp_path: Path) -> None:
    status = tmp_path / "sglang-environment.status"
    status.write_text("0 97\n")
    conftest.wait_for_build(status, 5)


def test_a_test_waits_for_the_build_to_end(tmp_path: Path) -> None:
    status = tmp_path / "sglang-environment.status"
    written = tmp_path / "sglang-environment.status.new"

    def finish() -> None:  # as .ci/run's step writes it: the whole line, then renamed into place
        written.write_text("0 97\n")
        written.replace(status)

    timer = threading.Timer(1.0, finish)
    timer.start()
    try:
        conftest.wait_for_build(status, 60)
    finally:
        timer.cancel()
    assert status.exists()


def test_a_failed_build_fails_the_test_naming_its_log(tmp_path: Path) -> None:
    status = tmp_path / "sglang-environment.status"
    status.write_text("1 12\n")
    with pytest.raises(
        pytest.fail.Exception, match=r"failed to build \(exit 1\): see .*sglang-environment\.log"
    ):
        conftest.wait_for_build(status, 5)


def test_a_build_that_never_ends_fails_the_test_within_the_bound(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"not built within 0\.6 s"):
        conftest.wait_for_build(tmp_path / "sglang-environment.status", 0.6)


def test_the_build_status_variable_stays_out_of_the_tests_children(tmp_path: Path) -> None:
    """A pytest run given the variable (as .ci/run gives it) takes it out of its environment, so the tests'
    children never carry it: a SPARK_VALIDATE_ variable is part of what launch.drift compares between a
    running server and its declaration (a CI run once saw 'warn' for 'pass' from it)."""
    status = tmp_path / "sglang-environment.status"
    status.write_text("0 97\n")
    env = {**os.environ, conftest.SGLANG_ENV_STATUS: str(status), "SV_TEST_CI_ORDER_CHILD": "1"}
    test = f"{Path(__file__).relative_to(TESTS.parent)}::test_a_tests_environment_holds_no_build_status"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr


def test_a_tests_environment_holds_no_build_status() -> None:
    """Run as a child by the test above, with the variable given; alone, the same holds."""
    assert conftest.SGLANG_ENV_STATUS not in os.environ
    if os.environ.get("SV_TEST_CI_ORDER_CHILD"):
        assert conftest._sglang_env_status, "the variable was given but not taken"
