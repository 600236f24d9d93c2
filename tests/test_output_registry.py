"""The output registry holds every format module: one that registers with ``@output`` but is missing from
``MODULES`` would be invisible to ``--format`` and to the secret-redaction tests that run over the
registry."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import validator.outputs
from validator.outputs import MODULES, formats


def test_every_format_module_is_registered() -> None:
    here = Path(validator.outputs.__file__).parent
    registering = {
        m.name for m in pkgutil.iter_modules([str(here)]) if "@output(" in (here / f"{m.name}.py").read_text()
    }
    assert registering and registering == set(MODULES)
    assert len(formats()) >= len(MODULES)  # each module registers at least one --format name
