"""tests/support/run_cache.py: what one fixture builds for a whole run is built once, by whichever worker
asks first, and a failed build is built again by the next to ask."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.support.run_cache import built_once


def test_two_askers_at_once_get_one_build(tmp_path_factory: pytest.TempPathFactory) -> None:
    name, builds, got = f"t-{uuid.uuid4().hex}", [], []

    def build(where: Path) -> None:
        builds.append(where)
        time.sleep(0.5)  # the other asker arrives while this build runs
        (where / "artifact").write_text("built")

    def ask() -> None:
        got.append(built_once(tmp_path_factory, name, build))

    askers = [threading.Thread(target=ask) for _ in range(2)]
    for t in askers:
        t.start()
    for t in askers:
        t.join(timeout=30)
    assert len(builds) == 1 and len(got) == 2 and got[0] == got[1] == builds[0]
    assert (got[0] / "artifact").read_text() == "built"
    assert built_once(tmp_path_factory, name, build) == got[0] and len(builds) == 1


def test_a_failed_build_is_built_again_by_the_next_asker(tmp_path_factory: pytest.TempPathFactory) -> None:
    name = f"t-{uuid.uuid4().hex}"

    def broken(where: Path) -> None:
        (where / "half").write_text("")
        raise RuntimeError("build failed")

    with pytest.raises(RuntimeError):
        built_once(tmp_path_factory, name, broken)
    where = built_once(tmp_path_factory, name, lambda w: (w / "artifact").write_text("built"))
    assert sorted(p.name for p in where.iterdir()) == [".complete", "artifact"]  # nothing of the failed one
