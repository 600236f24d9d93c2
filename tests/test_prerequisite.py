"""A missing prerequisite fails under CI and skips elsewhere, at test and at module level: run through a
real pytest subprocess, as CI and a contributor run the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

IN_TEST = """
from tests.support.prerequisite import missing

def test_needs_a_tool():
    missing("frobnicate not found (apt: frobnicate)")
"""

AT_MODULE = """
from tests.support.prerequisite import missing

missing("frobnicate not found (apt: frobnicate)")

def test_never_collected():
    raise AssertionError("the module should have stopped")
"""


def _pytest(tmp_path: Path, source: str, ci: bool) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_needs_frobnicate.py"
    test.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider", str(test)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("source", [IN_TEST, AT_MODULE], ids=["in-test", "at-module"])
def test_fails_under_ci_and_skips_elsewhere(tmp_path: Path, source: str) -> None:
    ci = _pytest(tmp_path, source, ci=True)
    assert ci.returncode != 0, ci.stdout
    assert "frobnicate not found (apt: frobnicate)" in ci.stdout and "skipped" not in ci.stdout, ci.stdout

    local = _pytest(tmp_path, source, ci=False)
    assert local.returncode in (0, 5), local.stdout  # 5: a module that skipped whole collected no test
    assert "1 skipped" in local.stdout and "frobnicate not found (apt: frobnicate)" in local.stdout
