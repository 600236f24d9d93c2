"""What a check is: a pure function from facts (and the pack's expectations) to an outcome.

Builtins register under their contract ID and mode with what they read from the pack
(``@builtin("moe.backend", "preflight", needs=(...), remedies=("auto",))``). A check reads no files or
sockets and holds no recipe values or remedy texts: it returns an ``Outcome`` naming a remedy variant, and
the engine adds severity, the pack's remedy text and waivers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

from validator.facts import LAUNCH, PROBE, SERVER, SGLANG, Facts, Mode, Progress
from validator.pack_schema import CheckSpec, Expectations
from validator.report import Status
from validator.sglang_env import env_bool as env_bool  # the check API's name for it


@dataclass
class Outcome:
    status: Status
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    remedy: str | None = None  # a named variant of the pack's remedies; None: the check's default remedy
    params: dict[str, object] = field(default_factory=dict)  # template fields for the pack's texts
    # the message is this text of the check's entry in the pack, a template the engine fills with the
    # pack's values and ``params`` (a declarative check's pass_message or fail_message); None: ``message``
    message_from: Literal["pass_message", "fail_message"] | None = None


@dataclass(frozen=True)
class CheckContext:
    """What a check reads besides the facts: its own entry in the pack (``spec``), the pack's expectations,
    the mode it judges, and ``--strict``, which makes the in-process evidence required (``attestation.trust``
    and ``lm_head.fp8`` are then ``error`` without an attestation, as under ``require_attestation``)."""

    spec: CheckSpec
    expect: Expectations
    mode: Mode
    strict: bool = False


CheckFn = Callable[[Facts, CheckContext], Outcome]


@dataclass
class Builtin:
    """One builtin check: a function per mode, and what it reads from the pack."""

    forms: dict[Mode, CheckFn] = field(default_factory=dict)
    needs: dict[Mode, set[str]] = field(default_factory=dict)  # expectations (or ``probe``) per mode
    remedies: dict[Mode, set[str]] = field(default_factory=dict)  # remedy variants per mode
    params: set[str] = field(default_factory=set)  # template fields the check supplies

    def needs_in(self, modes: Iterable[Mode]) -> set[str]:
        return set().union(*(self.needs.get(m, set()) for m in modes))

    def remedies_in(self, modes: Iterable[Mode]) -> set[str]:
        return set().union(*(self.remedies.get(m, set()) for m in modes))


REGISTRY: dict[str, Builtin] = {}


def builtin(
    check_id: str,
    *modes: Mode,
    needs: Iterable[str] = (),
    remedies: Iterable[str] = (),
    params: Iterable[str] = (),
) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the form of ``check_id`` for ``modes`` (default: both)."""

    def register(fn: CheckFn) -> CheckFn:
        b = REGISTRY.setdefault(check_id, Builtin())
        for mode in modes or ("preflight", "check"):
            if mode in b.forms:
                raise RuntimeError(f"check {check_id} ({mode}) registered twice")
            b.forms[mode] = fn
            b.needs[mode] = set(needs)
            b.remedies[mode] = set(remedies)
        b.params.update(params)
        return fn

    return register


T = TypeVar("T")


class MissingExpectation(RuntimeError):
    """A check read an expectation the pack does not give (loading a pack rules this out)."""


def need(value: T | None, name: str) -> T:
    """An expectation the check registered in ``needs``: present once the pack has loaded."""
    if value is None:
        raise MissingExpectation(f"the rule pack gives no expect.{name}")
    return value


def passed(message: str, sources: list[str], **evidence: Any) -> Outcome:
    return Outcome(Status.PASS, message, evidence, sources)


def _finding(
    status: Status,
    /,
    message: str,
    sources: list[str],
    remedy: str | None = None,
    *,
    params: dict[str, object] | None = None,
    **evidence: Any,
) -> Outcome:
    """A finding the pack's remedy answers: ``remedy`` names its variant, ``params`` fill its template.
    ``status`` is positional-only so that an evidence field of that name stays evidence."""
    return Outcome(status, message, evidence, sources, remedy, params or {})


# A failure and a warning are the same finding at two statuses (partial keeps the signature for mypy).
failed = partial(_finding, Status.FAIL)
warned = partial(_finding, Status.WARN)


def skipped(message: str, sources: list[str] | None = None, **evidence: Any) -> Outcome:
    return Outcome(Status.SKIP, message, evidence, sources or [])


def errored(message: str, sources: list[str], *, remedy: str | None = None, **evidence: Any) -> Outcome:
    return Outcome(Status.ERROR, message, evidence, sources, remedy)


def no_launch(facts: Facts) -> Outcome:
    """The launch command could not be read (or none was given): nothing to judge before start."""
    return errored(facts.errors.get(LAUNCH, "no launch command given"), [LAUNCH])


def no_server(facts: Facts) -> Outcome:
    """Every check but ``server.ready`` when the server's own state could not be read: ``server.ready``
    tells why, once, instead of every check repeating it (a missing API key, say)."""
    return errored("the server was not reached (see server.ready)", [SERVER])


def sglang_note(facts: Facts) -> str:
    """Why the installed SGLang could not be read."""
    sg = facts.sglang
    return (sg.note if sg is not None else None) or facts.errors.get(SGLANG, "no SGLang installation found")


def no_probe(facts: Facts) -> Outcome:
    """Why there is no probe result, as coverage counts it: the server was never ready or the user
    chose ``--no-probe`` (not proven: ``error``), or speculation is off (the probe measures speculation:
    it does not apply). Saying '--no-probe' when the user did not pass it sends them looking elsewhere."""
    if facts.server is None:
        return no_server(facts)
    if PROBE in facts.errors:
        return errored(f"probe failed: {facts.errors[PROBE]}", [PROBE])
    if not facts.server.settings.speculative:
        return skipped("the acceptance probe was not run: speculative decoding is off on the server", [PROBE])
    if facts.progress is not None and facts.progress.state is Progress.STALLED:
        return errored("the acceptance probe was not run: the server is stalled (server.progress)", [PROBE])
    return errored("the acceptance probe was not run (--no-probe): not proven", [PROBE])
