"""The builtin check families: one module each under ``validator/checks/``, imported here by name so that
their ``@builtin`` registrations run and the import graph shows every family. Adding a family is a new
module and one name below; ``tests/test_rulepack_lint.py`` fails when a family module is not imported.

Kept apart from ``base.py`` so that families import ``base`` and nothing imports back (no cycle).
"""

from __future__ import annotations

from collections.abc import Mapping

from validator.checks import (  # noqa: F401 (imported for their registrations)
    attestation,
    checkpoint,
    cluster,
    env,
    host,
    launch,
    lm_head,
    moe,
    perf,
    probe,
    server,
    sglang,
    spec,
    spec_dspark,
)
from validator.checks.base import REGISTRY, Builtin


def builtins() -> Mapping[str, Builtin]:
    """Every builtin check, by ID (the families registered themselves when imported above)."""
    return REGISTRY
