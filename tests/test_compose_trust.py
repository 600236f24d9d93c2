"""A Compose project's directory and its ``.env``, present or absent, attacked by a real second local user.

``docker compose up`` reads the project's ``.env`` when it starts, and ``${MOE_BACKEND:-humming}`` takes its
value from there. A root-owned ``compose.yaml`` in a directory anyone can write (a sticky ``/tmp``-like
scratch area), with no ``.env`` yet, is refused (65) as a missing optional ``EnvironmentFile=-`` in such a
place is: another user could write ``.env`` after the verdict and choose the backend. The controls: the same
file in a directory only root can write is read, with and without ``.env``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.in_process import preflight_json_in_process
from tests.support.second_user import User, run_as

COMPOSE = """\
services:
  sglang:
    image: lmsysorg/sglang:spark
    command: >-
      python3 -m sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 --trust-remote-code
      --moe-runner-backend ${MOE_BACKEND:-humming}
      --speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1
      --speculative-num-draft-tokens 4 --speculative-draft-model-path /models/Ling-3.0-flash-fp4
      --mem-fraction-static 0.6 --host 0.0.0.0 --port 30000
    environment:
      SGLANG_ENABLE_FP8_LM_HEAD: "1"
"""


@pytest.fixture
def sticky() -> Iterator[Path]:
    """A root-owned scratch directory as ``/tmp`` is: mode 1777."""
    path = Path(tempfile.mkdtemp(prefix="sv-compose-sticky-", dir="/tmp"))
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _preflight(compose: Path) -> tuple[int, dict[str, object], str]:
    return preflight_json_in_process({"PATH": "/usr/bin:/bin"}, "--compose", str(compose), "--allow-partial")


def _backend(report: dict[str, object]) -> str:
    checks = report["checks"]
    assert isinstance(checks, list)
    (moe,) = [c for c in checks if c["id"] == "moe.backend"]
    return str(moe["evidence"]["moe_runner_backend"])


def _refused(rc: int, err: str, *needles: str) -> None:
    assert rc == 65, (rc, err)
    line = err.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    for needle in needles:
        assert needle in line, (needle, line)


def test_compose_without_env_in_a_shared_directory_is_refused_before_and_after_the_plant(
    attacker: User, sticky: Path
) -> None:
    compose = sticky / "compose.yaml"
    compose.write_text(COMPOSE)
    os.chmod(compose, 0o644)  # root's own file, which nobody else can change
    rc, _, err = _preflight(compose)
    _refused(rc, err, str(sticky / ".env"), "anyone could create it", "docker compose up")
    # the attack it refuses: the other user writes .env, and Compose would start with `auto`
    done = run_as(attacker, ["sh", "-c", "printf 'MOE_BACKEND=auto\\n' > .env"], cwd=str(sticky))
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert (sticky / ".env").stat().st_uid == attacker.uid
    rc, _, err = _preflight(compose)
    _refused(rc, err, str(sticky / ".env"))
    # and a .env the other user links to root's own file is judged where the link is
    (sticky / ".env").unlink()
    mine = Path(tempfile.mkdtemp(prefix="sv-compose-mine-")) / "site.env"
    try:
        mine.write_text("MOE_BACKEND=humming\n")
        done = run_as(attacker, ["ln", "-s", str(mine), str(sticky / ".env")])
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        rc, _, err = _preflight(compose)
        _refused(rc, err, str(sticky))
    finally:
        shutil.rmtree(mine.parent, ignore_errors=True)


def test_the_same_compose_file_in_a_private_directory_is_read_with_and_without_env(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    compose = project / "compose.yaml"
    compose.write_text(COMPOSE)
    rc, report, err = _preflight(compose)
    assert rc != 65 and report, (rc, err)
    assert _backend(report) == "humming"
    (project / ".env").write_text("MOE_BACKEND=auto\n")
    rc, report, err = _preflight(compose)
    assert rc == 78 and _backend(report) == "auto", (rc, err)


def test_an_override_beside_a_default_named_file_is_refused_naming_it(tmp_path: Path) -> None:
    """``docker compose up`` merges compose.override.yaml over compose.yaml; the reader does not, so the
    file alone is not what runs: refused (65) naming the override; control: the same pair under a name
    Compose does not pick up by itself (``-f site.yaml`` merges nothing) is read."""
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    (project / "compose.yaml").write_text(COMPOSE)
    override = project / "compose.override.yaml"
    override.write_text("services:\n  sglang:\n    environment:\n      SGLANG_ENABLE_FP8_LM_HEAD: '0'\n")
    rc, _, err = _preflight(project / "compose.yaml")
    _refused(rc, err, str(override), "docker compose config > resolved.yaml")
    (project / "compose.yaml").rename(project / "site.yaml")
    rc, report, err = _preflight(project / "site.yaml")
    assert rc != 65 and _backend(report) == "humming", (rc, err)
