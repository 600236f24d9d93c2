"""The report as Prometheus series, one definition for the sidecar's ``/metrics`` and ``--format prom``.

``spark_validate_check_passed{check,severity}`` (the contract's first metric; cannot tell fail from error),
``spark_validate_check_status{check,severity,status}`` (one series per status, kube-state-metrics style)
and ``spark_validate_coverage{kind}`` (critical, proven, not_proven). ``extra`` labels come first
(``--format prom`` adds ``mode`` so preflight's and check's files never collide).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from validator.coverage import coverage_of
from validator.report import Report, Status

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

COVERAGE_KINDS = ("critical", "proven", "not_proven")


class ReportGauges:
    def __init__(self, registry: CollectorRegistry, extra: Mapping[str, str] | None = None) -> None:
        # here: prometheus_client (with http.server, wsgiref and ssl) is loaded only when series
        # are made; the output registry imports every format's module, preflight's included
        from prometheus_client import Gauge

        self.extra = dict(extra or {})
        names = list(self.extra)
        self.check_passed = Gauge(
            "spark_validate_check_passed",
            "1 when the check's last status was pass, else 0",
            [*names, "check", "severity"],
            registry=registry,
        )
        self.check_status = Gauge(
            "spark_validate_check_status",
            "1 for the check's current status (pass, fail, warn, skip, error, info), 0 for the others",
            [*names, "check", "severity", "status"],
            registry=registry,
        )
        self.coverage = Gauge(
            "spark_validate_coverage",
            "critical invariants: that apply (critical), proven (proven), not provable here (not_proven)",
            [*names, "kind"],
            registry=registry,
        )
        self._checks: set[tuple[str, str]] = set()
        self.clear()

    def clear(self) -> None:
        """No report describes the server now (it restarted and is not judged yet): every check's series
        goes, so that no alert reads a previous process's status as current; coverage reads 0."""
        self._drop(self._checks)
        self._checks = set()
        for kind in COVERAGE_KINDS:
            self.coverage.labels(*self.extra.values(), kind).set(0)

    def _drop(self, keys: set[tuple[str, str]]) -> None:  # the series of these (check, severity) pairs
        extra = tuple(self.extra.values())
        for key in keys:
            self.check_passed.remove(*extra, *key)
            for status in Status:
                self.check_status.remove(*extra, *key, status.value)

    def observe(self, report: Report) -> None:
        """Set every series from ``report``; a check no longer reported loses its series (it does not go
        stale at its last value)."""
        extra = tuple(self.extra.values())
        seen: set[tuple[str, str]] = set()
        for c in report.checks:
            key = (c.id, c.severity.value)
            seen.add(key)
            self.check_passed.labels(*extra, *key).set(1 if c.status is Status.PASS else 0)
            for status in Status:
                self.check_status.labels(*extra, *key, status.value).set(1 if c.status is status else 0)
        self._drop(self._checks - seen)
        self._checks = seen
        cov = report.coverage if report.coverage is not None else coverage_of(report.checks)
        self.coverage.labels(*extra, "critical").set(cov.critical)
        self.coverage.labels(*extra, "proven").set(cov.proven)
        self.coverage.labels(*extra, "not_proven").set(len(cov.not_proven))
