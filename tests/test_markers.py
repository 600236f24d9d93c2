"""The marker table in tests/conftest.py names only tests that exist: a renamed test or module would
otherwise silently lose its marker (and a test needing a real tool would land in the quick run)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import conftest

TESTS = Path(__file__).resolve().parent


def _defined(module: str) -> set[str]:
    tree = ast.parse((TESTS / f"{module}.py").read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_key_of_the_marker_tables_names_a_real_module_or_test() -> None:
    stale = []
    for key in [*conftest.NEEDS, *conftest.SLOW]:
        module, _, test = key.partition("::")
        if not (TESTS / f"{module}.py").is_file() or (test and test not in _defined(module)):
            stale.append(key)
    assert stale == []
    assert {m for ms in conftest.NEEDS.values() for m in ms} <= set(conftest.TOOL_MARKERS)


def test_a_test_needing_a_tool_is_left_out_of_the_quick_run() -> None:
    """Run as a user would: the quick selection holds none of the tool tests, the full one all of them."""
    import subprocess
    import sys

    def collected(*args: str) -> set[str]:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", *args,
             str(TESTS / "test_deploy_compose.py"), str(TESTS / "test_markers.py")],
            capture_output=True, text=True, timeout=120, check=False, cwd=TESTS.parent,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        return {line for line in out.stdout.splitlines() if "::" in line}

    markers = "tests/test_markers.py::"
    quick = collected("-m", "not slow")
    # this test starts a process (subprocess, here): slow, found from its code; the table test is quick
    assert quick == {f"{markers}test_every_key_of_the_marker_tables_names_a_real_module_or_test"}
    assert {t.split("::")[0] for t in collected("-m", "compose")} == {"tests/test_deploy_compose.py"}
