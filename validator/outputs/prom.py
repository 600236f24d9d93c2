"""``--format prom``: the report as Prometheus text, for node_exporter's textfile collector.

Hosts with no sidecar can still alert: an ``ExecStartPre=`` writes ``preflight --format prom --output
FILE`` (renamed over, never half-written). The series are ``report_metrics``'s plus verdict, end time and
duration, each with ``mode``; only IDs, statuses and numbers, so nothing a server said reaches a label.
"""

from __future__ import annotations

import math
from datetime import datetime

from validator import __version__
from validator.outputs import output
from validator.report import Report, Verdict
from validator.report_metrics import ReportGauges


def _end_timestamp(report: Report) -> float:
    try:
        started = datetime.fromisoformat(report.started_at.replace("Z", "+00:00"))
    except ValueError:
        return math.nan
    return started.timestamp() + report.duration_s


@output("prom", "Prometheus text for node_exporter's textfile collector", messages=False, rank=3)
def render(report: Report, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    # here: prometheus_client is loaded only when this format is asked for (preflight starts fast)
    from prometheus_client import CollectorRegistry, Gauge
    from prometheus_client.exposition import generate_latest

    registry = CollectorRegistry(auto_describe=True)
    mode = {"mode": report.mode}
    ReportGauges(registry, mode).observe(report)
    verdict = Gauge(
        "spark_validate_verdict",
        "1 for the run's verdict (pass, fail, inconclusive), 0 for the others",
        ["mode", "verdict", "partial"],
        registry=registry,
    )
    partial = "true" if report.partial else "false"
    for v in Verdict:
        verdict.labels(report.mode, v.value, partial).set(1 if report.verdict is v else 0)
    Gauge(
        "spark_validate_last_run_timestamp_seconds", "end of the last full check", ["mode"], registry=registry
    ).labels(report.mode).set(_end_timestamp(report))
    Gauge(
        "spark_validate_run_duration_seconds", "duration of the last full check", ["mode"], registry=registry
    ).labels(report.mode).set(report.duration_s)
    Gauge(
        "spark_validate_build_info", "always 1", ["mode", "version", "rule_pack"], registry=registry
    ).labels(report.mode, __version__, report.rule_pack).set(1)
    if report.probe is not None:
        al = report.probe.accept_length
        Gauge(
            "spark_validate_spec_accept_length",
            "acceptance length measured by the last probe",
            ["mode"],
            registry=registry,
        ).labels(report.mode).set(math.nan if al is None else al)
    return generate_latest(registry).decode("utf-8")
