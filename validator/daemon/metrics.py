"""The sidecar's Prometheus metrics: exactly the contract's names, types and labels, on a private registry.

Gauges carry current state (goss #867: counters of past results cannot say what holds now). Every check run
is a full run of every check (the probe's result is reused between probes), so ``runs_total`` and the
timestamps move on every run. The exposition is rendered by prometheus-client once per change and cached:
a scrape then costs a dictionary lookup, not a walk of the registry.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric

from validator import __version__
from validator.report import Report, Verdict
from validator.report_metrics import ReportGauges

if TYPE_CHECKING:
    from validator.facts import NodeFacts
    from validator.sources.launch.state import LaunchState


NODE_INFO_LABELS = (
    "cluster",
    "node",
    "role",
    "node_rank",
    "args_hash",
    "build_hash",
    "nccl_hash",
    "interface",
)


class _FleetLabelled:
    """The registry's samples with the fleet labels (``cluster``, ``node``, ``role``, ``node_rank``,
    ``pack``) added to each, for Prometheus rules that compare or group a cluster's nodes without
    relabelling in every scrape config. A sample's own label of the same name wins."""

    def __init__(self, registry: CollectorRegistry, labels: dict[str, str]) -> None:
        self.registry = registry
        self.labels = labels

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            for s in family.samples:
                out.add_sample(s.name, {**self.labels, **s.labels}, s.value, s.timestamp, s.exemplar)
            yield out


class DaemonMetrics:
    def __init__(self, fleet_labels: dict[str, str] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.fleet_labels = dict(fleet_labels or {})  # empty: the series carry only their own labels
        r = self.registry
        self.checks = ReportGauges(r)  # check_passed, check_status, coverage: as --format prom writes them
        self.ready = Gauge("spark_validate_ready", "1 when /readyz answers 200", registry=r)
        self.accept_length = Gauge(
            "spark_validate_spec_accept_length", "acceptance length measured by the last probe", registry=r
        )
        self.server_accept_length = Gauge(
            "spark_validate_server_accept_length",
            "the server's own sglang:spec_accept_length as last read from its /metrics (NaN when absent)",
            registry=r,
        )
        self.last_run = Gauge(
            "spark_validate_last_run_timestamp_seconds", "end of the last full check", registry=r
        )
        self.last_success = Gauge(
            "spark_validate_last_success_timestamp_seconds",
            "end of the last check whose verdict was pass",
            registry=r,
        )
        self.duration = Gauge(
            "spark_validate_run_duration_seconds", "duration of the last full check", registry=r
        )
        self.runs = Counter("spark_validate_runs", "full checks run", ["verdict"], registry=r)
        self.build_info = Gauge(
            "spark_validate_build_info", "always 1", ["version", "sglang_version", "model"], registry=r
        )
        self.node_info = Gauge(
            "spark_validate_node_info",
            "always 1: this node of a (multi-node) launch and the hashes every node of its cluster shares",
            list(NODE_INFO_LABELS),
            registry=r,
        )
        self.node_arg = Gauge(
            "spark_validate_node_arg",
            "always 1: one launch argument every node of the cluster shares (all but --node-rank) and a hash "
            "of its value, so that the cluster rules name the flag a node sets otherwise than its head",
            ["flag", "value_hash"],
            registry=r,
        )
        self._node: tuple[str, ...] | None = None
        self._node_args: dict[str, str] = {}
        self._launch: LaunchState | None = None
        self._launch_gauges: tuple[Gauge, Gauge, Gauge, Gauge] | None = None  # only with --launch-state
        self._launch_readable: bool | None = None
        for v in Verdict:
            self.runs.labels(verdict=v.value)  # every verdict series exists from the start, at 0
        self.accept_length.set(math.nan)  # no probe has measured anything yet
        self.server_accept_length.set(math.nan)  # no /metrics read yet
        self._build: tuple[str, str, str] | None = None
        self.set_build_info("unknown", "unknown")
        self._cache: bytes | None = None

    def set_build_info(self, sglang_version: str, model: str) -> None:
        labels = (__version__, sglang_version or "unknown", model or "unknown")
        if labels == self._build:
            return
        self.build_info.clear()
        self.build_info.labels(*labels).set(1)
        self._build = labels
        self._cache = None

    def set_node(self, node: NodeFacts | None) -> None:
        """The node the last check read (a running server's process): its info series, and its fleet
        labels on every series (flags and the environment name the cluster and node; the process its
        role and rank)."""
        self._set_node_args({} if node is None else node.arg_hashes)
        if node is None:  # no server process found: this node's info goes (its absence is the alert)
            if self._node is not None:
                self.node_info.clear()
                self._node = None
                self._cache = None
            return
        labels = tuple(str(getattr(node, name)) for name in NODE_INFO_LABELS)  # each its field's value
        given = {k: v for k, v in self.fleet_labels.items() if k in ("cluster", "node") and v}
        fleet = {**node.labels(), **given}
        if labels == self._node and fleet == self.fleet_labels:
            return
        self.node_info.clear()
        self.node_info.labels(*labels).set(1)
        self._node = labels
        self.fleet_labels = fleet
        self._cache = None

    def _set_node_args(self, args: dict[str, str]) -> None:
        if args == self._node_args:
            return
        self.node_arg.clear()
        for flag, value_hash in args.items():
            self.node_arg.labels(flag, value_hash).set(1)
        self._node_args = dict(args)
        self._cache = None

    def set_launch_state(self, state: LaunchState | None, readable: bool) -> None:
        """The launch state as last read; None and ``readable``: no launch has written one yet. Its series
        are registered on the first call, so that a sidecar without ``--launch-state`` exports none."""
        first = self._launch_gauges is None
        if self._launch_gauges is None:
            r = self.registry
            self._launch_gauges = (
                Gauge(
                    "spark_validate_launch_refused",
                    "1 when the last spark-validate launch refused to start the server, 0 when it exec'd it",
                    ["verdict", "exit_code"],
                    registry=r,
                ),
                Gauge(
                    "spark_validate_launch_blocking",
                    "1 for each critical check that blocked the last launch",
                    ["check"],
                    registry=r,
                ),
                Gauge("spark_validate_launch_timestamp_seconds", "when the last launch decided", registry=r),
                Gauge(
                    "spark_validate_launch_state_readable",
                    "0 when the launch state file exists but cannot be used (the other launch series are "
                    "then absent)",
                    registry=r,
                ),
            )
        refused, blocking, when, ok = self._launch_gauges
        if readable != self._launch_readable:
            ok.set(1 if readable else 0)
            self._launch_readable = readable
            self._cache = None
        if state == self._launch and not first:
            return
        refused.clear()
        blocking.clear()
        if state is None:
            when.set(math.nan)
        else:
            refused.labels(verdict=state.verdict, exit_code=str(state.exit_code)).set(
                0 if state.started else 1
            )
            for check_id in () if state.started else state.blocking:  # a start was blocked by nothing
                blocking.labels(check=check_id).set(1)
            when.set(state.time)
        self._launch = state
        self._cache = None

    def forget_checks(self) -> None:
        """The server restarted: the previous process's check statuses and acceptance lengths are no
        answer about the new one (absent and NaN until it is judged)."""
        self.checks.clear()
        self.accept_length.set(math.nan)
        self.server_accept_length.set(math.nan)
        self._cache = None

    def set_ready(self, ready: bool) -> None:
        self.ready.set(1 if ready else 0)
        self._cache = None

    def observe(
        self, report: Report, *, end: float, probed: bool, server_accept_length: float | None = None
    ) -> None:
        """One finished check run. ``probed``: this run measured a new acceptance length;
        ``server_accept_length``: the server's own gauge as this run read it (None: absent or unread)."""
        self.server_accept_length.set(math.nan if server_accept_length is None else server_accept_length)
        self.checks.observe(report)
        if probed:
            al = report.probe.accept_length if report.probe is not None else None
            self.accept_length.set(math.nan if al is None else al)
        self.last_run.set(end)
        if report.verdict is Verdict.PASS:
            self.last_success.set(end)
        self.duration.set(report.duration_s)
        self.runs.labels(verdict=report.verdict.value).inc()
        self._cache = None

    def render(self) -> bytes:
        if self._cache is None:
            source = _FleetLabelled(self.registry, self.fleet_labels) if self.fleet_labels else self.registry
            self._cache = generate_latest(source)  # any object with collect() will do
        return self._cache
