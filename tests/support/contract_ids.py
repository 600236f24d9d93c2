"""The core check IDs users depend on (the README's checks table; an ID is stable once shipped), for the
tests that hold the shipped rule pack and the reports to them (one list, so that a test cannot drift from
another's copy)."""

from __future__ import annotations

CONTRACT_CHECK_IDS = (
    "server.ready",
    "server.progress",
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
LIVE_ONLY_CHECK_IDS = ("server.ready", "server.progress", "spec.accept_length")
PREFLIGHT_CHECK_IDS = tuple(c for c in CONTRACT_CHECK_IDS if c not in LIVE_ONLY_CHECK_IDS)
