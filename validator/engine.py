"""The engine: run a rule pack's checks over gathered facts and produce the one report.

Severity decides what a failure means: a failed ``critical`` check fails the verdict, a failed
``warning`` or ``info`` check is reported as ``warn``. An active waiver keeps the result visible but
stops it from blocking; an expired one no longer applies.
"""

from __future__ import annotations

import datetime as _dt
import time

from validator.checks.base import CheckContext, Outcome, registry
from validator.checks.expect import evaluate_expect
from validator.facts import Facts
from validator.report import (
    CheckResult,
    ProbeResult,
    Report,
    Severity,
    Status,
    Waiver,
    decide_verdict,
    utc_now_iso,
)
from validator.rulepack import LoadedPack


def run_checks(
    facts: Facts,
    loaded: LoadedPack,
    *,
    mode: str,
    strict: bool = False,
    today: _dt.date | None = None,
    only: set[str] | None = None,
) -> list[CheckResult]:
    pack = loaded.pack
    checks = registry()
    results: list[CheckResult] = []
    for spec in pack.checks:
        if mode not in spec.modes or (only is not None and spec.id not in only):
            continue
        ctx = CheckContext(spec=spec, expect=pack.expect, mode=mode, strict=strict)
        if spec.expect is not None:
            outcome = evaluate_expect(facts, spec)
        elif spec.id in checks:
            try:
                outcome = checks[spec.id](facts, ctx)
            except Exception as exc:  # a bug in a check must not hide the others
                outcome = Outcome(Status.ERROR, f"internal error in check: {type(exc).__name__}: {exc}")
        else:
            outcome = Outcome(Status.ERROR, f"no builtin check {spec.id!r} and no 'expect' in the pack")
        results.append(_result(spec.id, spec.severity, outcome, loaded, today))
    return results


def _result(
    check_id: str, severity: Severity, outcome: Outcome, loaded: LoadedPack, today: _dt.date | None
) -> CheckResult:
    spec = loaded.pack.check(check_id)
    status = outcome.status
    if status is Status.FAIL and severity is not Severity.CRITICAL:
        status = Status.WARN
    remedy = None
    if status in (Status.FAIL, Status.WARN):
        remedy = outcome.remedy or spec.remedy
    elif status is Status.ERROR:
        remedy = outcome.remedy  # the pack's remedy fixes a misconfiguration, not missing evidence
    waiver = loaded.pack.waiver_for(check_id, today)
    waived = None
    if waiver is not None and status in (Status.FAIL, Status.WARN, Status.ERROR):
        waived = Waiver(check=waiver.check, justification=waiver.justification, expires=str(waiver.expires))
    return CheckResult(
        id=check_id,
        status=status,
        severity=severity,
        message=outcome.message,
        evidence=outcome.evidence,
        sources=outcome.sources,
        remedy=remedy,
        why=spec.why if status in (Status.FAIL, Status.WARN) else None,
        waived=waived,
    )


def build_report(
    results: list[CheckResult],
    loaded: LoadedPack,
    *,
    mode: str,
    started_at: str,
    started_monotonic: float,
    strict: bool = False,
    probe: ProbeResult | None = None,
    target: str | None = None,
) -> Report:
    return Report(
        mode=mode,
        verdict=decide_verdict(results, strict=strict),
        rule_pack=loaded.name,
        started_at=started_at,
        duration_s=round(time.monotonic() - started_monotonic, 4),
        checks=results,
        probe=probe,
        target=target,
        strict=strict,
    )


__all__ = ["build_report", "run_checks", "utc_now_iso"]
