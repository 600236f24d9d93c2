"""Every module of ``bench/`` and ``scripts/`` imports, as ``python -m bench.NAME`` would start it.

A bench that needs a GPU (``bench/trap_physics_cuda.py``) or a long run is exercised by no other test, so a
helper moved under ``tests/support/`` broke its import unseen (ea24cb8). Importing each module is cheap and
runs none of them: their work is behind ``if __name__ == "__main__"``.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from tests.support.prerequisite import missing

REPO = Path(__file__).resolve().parents[1]
MODULES = sorted(
    f"{folder}.{path.stem}" for folder in ("bench", "scripts") for path in (REPO / folder).glob("*.py")
)
NEEDS_TORCH = {"bench.trap_physics", "bench.trap_physics_cuda"}  # CPU torch is enough to import them


@pytest.mark.parametrize("module", MODULES)
def test_module_imports(module: str) -> None:
    if module in NEEDS_TORCH and importlib.util.find_spec("torch") is None:
        missing("torch not installed (pip install torch==2.13.0, CPU build)")
    importlib.import_module(module)


def test_every_runnable_module_waits_for_main() -> None:
    """Importing must not run a bench: each module with code to run keeps it behind the main guard."""
    unguarded = [
        m
        for m in MODULES
        if not m.endswith(".__init__")
        and 'if __name__ == "__main__"' not in (REPO / Path(*m.split("."))).with_suffix(".py").read_text()
    ]
    assert not unguarded, unguarded
