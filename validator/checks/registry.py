"""The builtin check families: one module each under ``validator/checks/``, imported here so that their
``@builtin`` registrations run. Adding a family is a new module and one name in ``FAMILIES``.

Kept apart from ``base.py`` so that families import ``base`` and nothing imports back (no cycle).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from validator.checks.base import REGISTRY, Builtin

FAMILIES = (
    "attestation",
    "checkpoint",
    "host",
    "install",
    "launch",
    "lm_head",
    "log",
    "moe",
    "server",
    "spec",
)


def builtins() -> Mapping[str, Builtin]:
    for family in FAMILIES:
        importlib.import_module(f"validator.checks.{family}")
    return REGISTRY
