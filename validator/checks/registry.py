"""The builtin check families: one module each under ``validator/checks/``, imported here by name so that
their ``@builtin`` registrations run and the import graph shows every family. Adding a family is a new
module and one line below; ``tests/test_rulepack_lint.py`` fails when a family module is not listed.

Kept apart from ``base.py`` so that families import ``base`` and nothing imports back (no cycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from validator.checks import (
    attestation,
    checkpoint,
    env,
    host,
    launch,
    lm_head,
    log,
    moe,
    server,
    sglang,
    spec,
    spec_dspark,
)
from validator.checks.base import REGISTRY, Builtin

FAMILIES: tuple[ModuleType, ...] = (
    attestation,
    checkpoint,
    env,
    host,
    launch,
    lm_head,
    log,
    moe,
    server,
    sglang,
    spec,
    spec_dspark,
)


def builtins() -> Mapping[str, Builtin]:
    """Every builtin check, by ID (the families registered themselves when imported above)."""
    return REGISTRY
