"""CPU each test costs, its children included, when ``$SPARK_VALIDATE_CPU_PROFILE`` names a directory.

Why CPU and not ``--durations``: on a shared two-core machine a test's wall time says how busy the machine
was; user + system CPU of pytest's process and of the children it waited for (``RUSAGE_CHILDREN``) is the
figure that adds up to what a run costs. A test's record spans its setup, call and teardown, so a module
or session fixture is charged to the test that set it up or tore it down; a child never waited for
(killed and left) is not counted. Each process that runs tests (an xdist worker, or pytest alone)
appends JSON lines to
``<dir>/<worker>-<pid>.jsonl``: one per test, and one ``collection`` line with the CPU the process had
spent when collection finished (interpreter start, imports, collecting every test module).
``python -m bench.cpu_by_file DIR`` prints the table.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO

import pytest

ENV = "SPARK_VALIDATE_CPU_PROFILE"


def cpu_now() -> tuple[float, float]:
    """(this process's user + system CPU, that of its waited-for children) in seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


class CpuRecorder:
    """The plugin object registered by :func:`pytest_configure` when the variable is set."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.worker = worker
        self._fh: IO[str] = (out / f"{worker}-{os.getpid()}.jsonl").open("a", encoding="utf-8")

    def _write(self, record: dict[str, object]) -> None:
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        own, kids = cpu_now()
        self._write({"collection": own + kids, "worker": self.worker, "items": len(session.items)})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        own0, kids0 = cpu_now()
        wall0 = time.monotonic()
        yield
        own1, kids1 = cpu_now()
        self._write(
            {
                "test": item.nodeid,
                "self": round(own1 - own0, 4),
                "children": round(kids1 - kids0, 4),
                "wall": round(time.monotonic() - wall0, 4),
                "worker": self.worker,
            }
        )

    def record(self, what: str, cpu: float) -> None:
        """CPU spent outside any test, charged to ``what`` (a pseudo test ID): the zygotes' own, say."""
        self._write(
            {"test": what, "self": 0.0, "children": round(cpu, 4), "wall": 0.0, "worker": self.worker}
        )

    def pytest_unconfigure(self) -> None:
        self._fh.close()


def pytest_configure(config: pytest.Config) -> None:
    """The xdist controller runs no test and leaves the variable to the workers it starts; a process that
    runs tests takes it out of its environment, so that a test's own ``pytest`` child (whose CPU is
    already this test's children's) writes nothing."""
    if getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        return
    where = os.environ.pop(ENV, "").strip()
    if where and not config.pluginmanager.has_plugin("cpu-profile"):
        config.pluginmanager.register(CpuRecorder(Path(where)), "cpu-profile")
