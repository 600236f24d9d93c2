"""The suite does not depend on where the checkout lives: a copy under ``/tmp`` in a directory whose name
has spaces runs the tests that write and read trusted files (packs, env files, attestations) and they pass.
Below ``/tmp`` (mode 1777) nothing can be trusted, so the copy's tests must find their private base
elsewhere (tests/support/private_dir.py) and never take the checkout's own path on trust."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.private_dir import ENV
from validator.trusted_files import creatable_by_others

REPO = Path(__file__).resolve().parents[1]
# Files whose tests write trusted files into tmp_path or read the shipped packs by path.
AFFECTED = ("test_cluster_checks.py", "test_rulepack_extends.py", "test_env_file.py", "test_trusted_files.py")


@pytest.fixture(scope="module")
def copy_under_tmp() -> Iterator[Path]:
    """The tracked files of this checkout (as a fresh clone has them) under /tmp/sv-location-*/a b/."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "validator", "tests", "rules", "deploy", "pyproject.toml"],
        cwd=REPO, capture_output=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    top = Path(tempfile.mkdtemp(prefix="sv-location-", dir="/tmp"))
    copy = top / "a b"
    try:
        for name in filter(None, listed.decode().split("\0")):
            source, target = REPO / name, copy / name
            if source.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        yield copy
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTEST_DEBUG_TEMPROOT", ENV, "PYTEST_XDIST_WORKER")
    }
    return {**env, "CI": "true"}


def test_the_copy_under_tmp_finds_a_private_base_outside_itself(copy_under_tmp: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from tests.support.private_dir import private_base; print(private_base())"],
        cwd=copy_under_tmp, env=_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    base = Path(out.stdout.strip())
    assert not base.is_relative_to("/tmp") and not base.is_relative_to(copy_under_tmp)
    assert creatable_by_others(base / "pack.yaml", ()) == []  # the validator's own rule: only we can write


def test_the_trusted_file_tests_pass_from_a_copy_under_tmp_with_spaces(copy_under_tmp: Path) -> None:
    """As root (CI), every test runs and passes: ``CI`` makes a missing prerequisite a failure. Unprivileged,
    the tests that need root (a second local user) skip, each saying so, and nothing else may skip."""
    env, argv = _env(), [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    root = os.geteuid() == 0
    if not root:
        env.pop("CI")  # their one line, a skip here: with CI set it is a failure
        argv.append("-rs")
    out = subprocess.run(
        [*argv, *(f"tests/{f}" for f in AFFECTED)],
        cwd=copy_under_tmp, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "failed" not in out.stdout
    if root:
        assert "skipped" not in out.stdout, out.stdout[-4000:]
    skips = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("needs root" in line for line in skips), skips


def test_no_private_base_is_one_line_naming_each_candidate(tmp_path: Path) -> None:
    """Asked to use a world-writable directory, the suite stops before any test with one line saying why."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_markers.py"],
        cwd=REPO, env={**_env(), ENV: str(shared)}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 4, out.stdout + out.stderr
    assert f"{shared}: directory {shared} is writable by its group or others (mode 0777)" in out.stderr
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
