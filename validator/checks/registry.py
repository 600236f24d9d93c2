"""The builtin checks: every module of ``validator/checks/`` imported, so that their ``@builtin``
registrations run. A family is one module named by its ID prefix and nothing else: there is no list of
families to forget. ``tests/test_check_registry.py`` fails for a check function nobody registers and for a
registered form no shipped pack lists; loading a pack fails for a listed check nobody registered.

Kept apart from ``base.py`` so that families import ``base`` and nothing imports back (no cycle).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping

import validator.checks
from validator.checks.base import REGISTRY, Builtin

for _module in pkgutil.iter_modules(validator.checks.__path__):
    importlib.import_module(f"validator.checks.{_module.name}")


def builtins() -> Mapping[str, Builtin]:
    """Every builtin check, by ID (the families registered themselves when imported above)."""
    return REGISTRY
