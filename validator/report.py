"""The one report every output is rendered from (contract: "JSON report").

Plain dataclasses, written as JSON by pydantic (``validator.validation.dump``); the same object feeds the
text, JSON and JUnit outputs, the sidecar's `/report` and its metrics.
"""

from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from validator import TOOL_NAME, __version__
from validator.facts import SERVER, ProbeResult


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"  # does not apply to this deployment as configured; never counted as a pass
    ERROR = "error"  # the evidence could not be gathered
    INFO = "info"  # an info-severity finding: worth knowing, never a failure (not even with --strict)


class Severity(str, Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


class Verdict(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


@dataclass(kw_only=True)
class Waiver:
    check: str
    justification: str
    expires: str  # ISO date, as written in the pack


@dataclass(kw_only=True)
class CheckResult:
    id: str
    status: Status
    severity: Severity
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    remedy: str | None = None
    why: str | None = None  # one sentence: why this invariant matters
    waived: Waiver | None = None  # set when a waiver turned a failure into a non-blocking result
    # the check whose error this one follows from (``server.ready`` for a server that was not reached):
    # the text report says the root cause once and folds the checks that depend on it under it
    caused_by: str | None = None


@dataclass(kw_only=True)
class NotProven:
    id: str
    reason: str  # the check's own message
    input: str | None = None  # what would let it run
    caused_by: str | None = None  # the check whose error this one follows from


@dataclass(kw_only=True)
class Coverage:
    """The report's ``"coverage"``: ``not_proven`` lists the IDs of the critical checks whose evidence could
    not be gathered; ``missing`` says, per check, why and which input would let it run."""

    critical: int  # critical checks that apply here (a skip does not apply)
    proven: int  # ...that passed
    not_proven: list[str] = field(default_factory=list)
    missing: list[NotProven] = field(default_factory=list)
    skipped_on_request: list[str] = field(default_factory=list)  # critical, left out by --check/--skip

    def line(self) -> str:
        """The text report's last line: ``proved 7 of 9 critical invariants; not proven: X (why...)``."""
        head = f"proved {self.proven} of {self.critical} critical invariants"
        if self.skipped_on_request:
            head += f" (skipped on request: {', '.join(self.skipped_on_request)})"
        if not self.missing:
            return head
        groups: dict[tuple[str, str | None], list[str]] = {}  # one reason said once, for all its checks
        roots = {m.id for m in self.missing}
        following: dict[str, list[str]] = {}  # a root cause's id -> the checks that follow from it
        for m in self.missing:
            if m.caused_by in roots:
                following.setdefault(m.caused_by, []).append(m.id)
            else:
                groups.setdefault((m.reason, m.input), []).append(m.id)
        parts = []
        for (reason, needed), ids in groups.items():
            after = [i for root in ids for i in following.get(root, ())]
            also = f" and {len(after)} that need it ({', '.join(after)})" if after else ""
            parts.append(f"{', '.join(ids)} ({reason}{'; needs ' + needed if needed else ''}){also}")
        return f"{head}; not proven: " + "; ".join(parts)


@dataclass(kw_only=True)
class Report:
    tool: str = TOOL_NAME
    version: str = __version__
    mode: str
    verdict: Verdict
    rule_pack: str
    started_at: str
    duration_s: float
    checks: list[CheckResult]
    probe: ProbeResult | None = None
    target: str | None = None  # URL or launch-command origin the report is about
    strict: bool = False
    coverage: Coverage | None = None
    partial: bool = False  # some critical invariant could not be proven (a pass only with --allow-partial)


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def decide_verdict(checks: list[CheckResult], strict: bool = False, allow_partial: bool = False) -> Verdict:
    """fail if a critical check failed (or, strict, anything warned or failed); else inconclusive if a
    critical check's evidence is missing (strict: any), unless ``allow_partial``, which never covers an
    unreached server; else pass. Waived, ``info`` and ``skip`` results never block."""
    blocking = [c for c in checks if c.waived is None]
    if any(c.status is Status.FAIL and c.severity is Severity.CRITICAL for c in blocking):
        return Verdict.FAIL
    if strict and any(c.status in (Status.FAIL, Status.WARN) for c in blocking):
        return Verdict.FAIL
    if allow_partial and not any(_unreached(c) for c in checks):
        return Verdict.PASS
    if any(c.status is Status.ERROR and c.severity is Severity.CRITICAL for c in blocking):
        return Verdict.INCONCLUSIVE
    if strict and any(c.status is Status.ERROR for c in blocking):
        return Verdict.INCONCLUSIVE
    return Verdict.PASS


def unreached_report(
    message: str, *, rule_pack: str, target: str | None, duration_s: float, source: str
) -> Report:
    """The report of a check that never reached its server (no process found, a run that did not finish
    or raised): one critical ``server.ready`` error from ``source``, and the verdict that follows."""
    checks = [
        CheckResult(
            id="server.ready",
            status=Status.ERROR,
            severity=Severity.CRITICAL,
            message=message,
            sources=[source],
        )
    ]
    return Report(
        mode="check",
        verdict=decide_verdict(checks),
        rule_pack=rule_pack,
        started_at=utc_now_iso(),
        duration_s=duration_s,
        checks=checks,
        target=target,
    )


def _unreached(check: CheckResult) -> bool:
    """The server itself could not be read for a critical check (waived or not): no partial run."""
    return (
        check.status is Status.ERROR and check.sources[:1] == [SERVER] and check.severity is Severity.CRITICAL
    )
