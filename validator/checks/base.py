"""What a check is: a pure function from facts (and the pack's expectations) to an outcome.

Builtin checks register under their contract ID with ``@builtin("moe.backend")``; the engine looks
them up by the IDs a rule pack lists. A check never reads files or sockets: sources did that already.
It returns an ``Outcome``; the engine adds severity, the pack's remedy and waivers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from validator.facts import Facts
from validator.report import Status
from validator.rulepack import CheckSpec, Expectations


@dataclass
class Outcome:
    status: Status
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    remedy: str | None = None  # overrides the pack's generic remedy when the fix is more specific


@dataclass(frozen=True)
class CheckContext:
    spec: CheckSpec
    expect: Expectations
    mode: str  # "preflight" or "check"
    strict: bool = False


CheckFn = Callable[[Facts, CheckContext], Outcome]
_REGISTRY: dict[str, CheckFn] = {}


def builtin(check_id: str) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        if check_id in _REGISTRY:
            raise RuntimeError(f"check {check_id} registered twice")
        _REGISTRY[check_id] = fn
        return fn

    return register


def registry() -> dict[str, CheckFn]:
    # Importing the families registers their checks.
    from validator.checks import (  # noqa: F401
        attestation,
        checkpoint,
        install,
        launch,
        lm_head,
        log,
        moe,
        server,
        spec,
    )

    return _REGISTRY


def passed(message: str, sources: list[str], **evidence: Any) -> Outcome:
    return Outcome(Status.PASS, message, evidence, sources)


def failed(message: str, sources: list[str], remedy: str | None = None, **evidence: Any) -> Outcome:
    return Outcome(Status.FAIL, message, evidence, sources, remedy)


def warned(message: str, sources: list[str], remedy: str | None = None, **evidence: Any) -> Outcome:
    return Outcome(Status.WARN, message, evidence, sources, remedy)


def skipped(message: str, sources: list[str] | None = None, **evidence: Any) -> Outcome:
    return Outcome(Status.SKIP, message, evidence, sources or [])


def errored(message: str, sources: list[str], **evidence: Any) -> Outcome:
    return Outcome(Status.ERROR, message, evidence, sources)


def env_bool(value: str | None) -> bool | None:
    """SGLang's EnvBool: true/1/yes/y and false/0/no/n (any case); anything else is invalid (None), and
    SGLang then warns and uses the default (False)."""
    if value is None:
        return False
    v = value.strip().lower()
    if v in ("true", "1", "yes", "y"):
        return True
    if v in ("false", "0", "no", "n"):
        return False
    return None


def first_error(facts: Facts, *sources: str) -> str | None:
    for s in sources:
        if s in facts.errors:
            return f"{s}: {facts.errors[s]}"
    return None


def probe_not_run(facts: Facts) -> str:
    """Why there is no probe result: the server was never ready, speculation is off, or the user chose so.
    Saying '--no-probe' when the user did not pass it sends them looking in the wrong place."""
    if facts.server is None:
        return "the acceptance probe was not run: the server is not available"
    if not facts.server.server_info.get("speculative_algorithm"):
        return "the acceptance probe was not run: speculative decoding is off on the server"
    return "the acceptance probe was not run (--no-probe)"
