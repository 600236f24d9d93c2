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


# Suite helpers for the test below. The test reaches the starter two calls away through _b_direct, and
# through _a1 -> _a2 -> _b_direct it meets _b_direct at the third level, where the starter is beyond reach.
def _starter() -> None:
    Popen()  # type: ignore[name-defined]  # noqa: F821 (a name only: never called)


def _b_direct() -> None:
    _starter()


def _a2() -> None:
    _b_direct()


def _a1() -> None:
    _a2()


def _a_test_reaching_a_starter_by_two_roads() -> None:
    _a1()
    _b_direct()


def test_a_helper_met_first_far_away_is_followed_again_nearer() -> None:
    """Whether a test starts a process does not hang on the order its names are visited in: ``_b_direct``
    met first at the end of the long road (too deep to follow to the starter) is followed again where the
    test calls it itself. A set's order changes with each process's hash seed, and xdist refuses to run
    when its workers classify tests differently (the quick run under -n did, 2026-12-07)."""
    assert conftest._starts_process(_a_test_reaching_a_starter_by_two_roads, {})
    seen: dict[object, int] = {}
    assert not conftest._starts_process(_a1, seen, depth=1)  # the long road alone: the starter is too deep
    assert conftest._starts_process(_b_direct, seen, depth=1)  # the same helper nearer: followed, found
