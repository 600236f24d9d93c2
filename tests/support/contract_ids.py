"""The check IDs that contract.md's "Check IDs" table defines, for the tests that hold the shipped rule pack
and the reports to that table (one list, so that a test cannot drift from another's copy)."""

from __future__ import annotations

CONTRACT_CHECK_IDS = (
    "server.ready",
    "moe.backend",
    "moe.humming_runtime",
    "lm_head.fp8",
    "lm_head.exclusive",
    "spec.config",
    "spec.lm_head_shared",
    "spec.accept_length",
    "checkpoint.layout",
)
# Only a running server shows these; preflight decides every other one before the start.
LIVE_ONLY_CHECK_IDS = ("server.ready", "spec.accept_length")
PREFLIGHT_CHECK_IDS = tuple(c for c in CONTRACT_CHECK_IDS if c not in LIVE_ONLY_CHECK_IDS)
