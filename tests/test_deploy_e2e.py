"""The alert path end to end: a real Prometheus (Debian's package) scrapes real `serve` sidecars that check
real simulator processes, with the shipped rules loaded, and its HTTP API shows which alerts fire.

One Prometheus scrapes two pods side by side: a `draft-head-weight-only` server (the integration trap: the
draft shares only the LM-head tensor, acceptance length 1.00) and a `healthy` one. Both sidecars and both
simulated servers are scraped with the job names the rules expect (`spark-validate`, `sglang`), so the
per-instance matching of the rules is exercised too. The rules are the shipped file with every `for:` cut to
1 s (the only change), scrape and evaluation every second. Everything listens on 127.0.0.1 and everything
started here is stopped in `finally` blocks, also when a test fails.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deploy_tools import (
    DEPLOY,
    RunningPrometheus,
    free_port,
    load_yaml,
    require_tool,
    running_prometheus,
    with_short_for,
)
from tests.support.loopback import stop, wait_listening

REPO = Path(__file__).resolve().parents[1]
RULES = DEPLOY / "prometheus" / "spark-validate.rules.yml"
# Re-check every second and probe every 2 s, so that SGLang's counters move between scrapes.
SIDECAR_ARGS = ("--interval", "1", "--probe-interval", "2", "--health-interval", "0.5", "--wait", "15")
PODS = {"broken": "draft-head-weight-only", "healthy": "healthy", "bare": "draft-head-weight-only"}
# The "bare" pod's sidecar runs as on a default install, with neither --log nor --attestation: server.log is
# skipped (it does not apply) and the attestation's checks are not proven; only real failures may page.
BARE = {"bare"}
# The healthy server takes a while to load, as a real one does (minutes there): its sidecar waits for it
# and exports no finished check meanwhile, which no alert but SparkValidateNotReady may take for a fault.
STARTUP_S = {"broken": 0.3, "healthy": 4.0, "bare": 0.3}
# After the first full check, how long the healthy pod must stay without a pending or firing alert.
QUIET_S = 6.0


@dataclass(frozen=True)
class Pod:
    """One simulated server and its sidecar, as Prometheus sees them (`instance` labels)."""

    scenario: str
    server: str
    sidecar: str


@dataclass(frozen=True)
class Stack:
    prom: RunningPrometheus
    pods: dict[str, Pod]


@contextmanager
def _process(argv: Sequence[str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A Python module run as a process (output to `log`, never a pipe that could fill), stopped on exit."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    try:
        wait_listening(port, proc, what=" ".join(argv), log=log)
        yield proc
    finally:
        stop(proc)


def _up(prom: RunningPrometheus, job: str) -> dict[str, str]:
    return {s["metric"]["instance"]: s["value"][1] for s in prom.query(f'up{{job="{job}"}}')}


def _value(prom: RunningPrometheus, expr: str) -> float | None:
    result = prom.query(expr)
    assert len(result) <= 1, f"{expr}: more than one series: {result}"
    return float(result[0]["value"][1]) if result else None


def _finite(value: float | None) -> bool:
    """A recorded ratio exists and is a number (0/0 before SGLang's counters have moved is NaN)."""
    return value is not None and math.isfinite(value)


def _nonzero(prom: RunningPrometheus, expr: str) -> Callable[[], bool]:
    return lambda: (_value(prom, expr) or 0.0) != 0.0


def _alerts_for(prom: RunningPrometheus, instance: str, state: str | None = None) -> list[dict[str, Any]]:
    return [a for a in prom.alerts(state) if a["labels"].get("instance") == instance]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Simulators first, then Prometheus (scraping the simulators and the sidecars-to-be), then sidecars.

    The sidecars start only once Prometheus has scraped both servers: SGLang's counters are then seen
    before and after each acceptance probe, which `rate()` in the recording rule needs.
    """
    require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("deploy-e2e")
    rules = tmp / "spark-validate.rules.yml"
    rules.write_text(yaml.safe_dump(with_short_for(load_yaml(RULES), "1s"), sort_keys=False))
    with ExitStack() as stack:
        servers: dict[str, tuple[int, Path, Path]] = {}
        for name, scenario in PODS.items():
            port, log, att = free_port(), tmp / f"{name}-server.log", tmp / f"{name}-attestation.json"
            # SGLang's counters need --enable-metrics; listening while loading lets the sidecar meet the
            # healthy pod's load phase (what "no verdict goes stale" is about) with Prometheus running
            argv = ["-m", "validator.sim", "--scenario", scenario, "--port", str(port), "--speed", "1000"]
            argv += ["--enable-metrics", "--answer-while-loading"]
            argv += ["--startup-seconds", str(STARTUP_S[name]), "--log", str(log), "--attestation", str(att)]
            stack.enter_context(_process(argv, port, tmp / f"{name}-sim.out"))
            servers[name] = (port, log, att)
        sidecar_ports = {name: free_port() for name in PODS}
        pods = {
            name: Pod(scenario, f"127.0.0.1:{servers[name][0]}", f"127.0.0.1:{sidecar_ports[name]}")
            for name, scenario in PODS.items()
        }
        scrape = [
            {"job_name": "sglang", "static_configs": [{"targets": [p.server for p in pods.values()]}]},
            {
                "job_name": "spark-validate",
                "static_configs": [{"targets": [p.sidecar for p in pods.values()]}],
            },
        ]
        prom = stack.enter_context(running_prometheus(tmp / "prometheus", scrape, [rules], interval="1s"))
        servers_up = {p.server: "1" for p in pods.values()}
        prom.wait_for("both servers scraped", lambda: _up(prom, "sglang") == servers_up, timeout=15)
        for name, (port, log, att) in servers.items():
            argv = ["-m", "validator", "serve", "--url", f"http://127.0.0.1:{port}"]
            argv += ["--listen", pods[name].sidecar]
            argv += [] if name in BARE else ["--attestation", str(att), "--log", str(log)]
            stack.enter_context(
                _process([*argv, *SIDECAR_ARGS], sidecar_ports[name], tmp / f"{name}-sidecar.out")
            )
        yield Stack(prom, pods)


def _wait_next_evaluation(prom: RunningPrometheus) -> None:
    """Until the alert rules have been evaluated again after now (so they have seen the latest scrape)."""
    start = time.time()

    def evaluated() -> bool:
        groups = [g for g in prom.api("rules")["groups"] if g["name"] == "spark-validate.alerts"]
        return bool(groups) and _rfc3339(groups[0]["lastEvaluation"]) > start + 1.0

    prom.wait_for("the next rule evaluation", evaluated, timeout=10)


def _rfc3339(stamp: str) -> float:
    """Prometheus's nanosecond RFC 3339 time (e.g. 2026-11-29T15:00:00.123456789Z) as a Unix time."""
    whole, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=timezone.utc).timestamp() + float(f"0.{frac or 0}")


def _first_full_check_scraped(prom: RunningPrometheus, pod: Pod, verdict: str) -> bool:
    runs = _value(prom, f'spark_validate_runs_total{{instance="{pod.sidecar}",verdict="{verdict}"}}')
    return runs is not None and runs >= 1


def test_broken_draft_fires_the_acceptance_and_critical_check_alerts(stack: Stack) -> None:
    prom, pod = stack.prom, stack.pods["broken"]
    prom.wait_for("a failing check scraped", lambda: _first_full_check_scraped(prom, pod, "fail"), 20)

    def firing() -> set[tuple[str, str]]:
        return {
            (a["labels"]["alertname"], a["labels"].get("check", ""))
            for a in _alerts_for(prom, pod.sidecar)
            if a["state"] == "firing"
        }

    expected = {
        ("SparkValidateAcceptLengthLow", ""),
        # the two critical checks the trap breaks, and only those
        ("SparkValidateCriticalCheckFailing", "spec.lm_head_shared"),
        ("SparkValidateCriticalCheckFailing", "spec.accept_length"),
        # the sidecar holds the pod out of service (with the shipped 15m this pages a quarter-hour later)
        ("SparkValidateNotReady", ""),
    }
    prom.wait_for(f"{sorted(expected)} firing", lambda: firing() >= expected, timeout=20)
    assert firing() == expected
    (accept,) = [
        a
        for a in _alerts_for(prom, pod.sidecar)
        if a["labels"]["alertname"] == "SparkValidateAcceptLengthLow"
    ]
    assert float(accept["value"]) == pytest.approx(1.0, abs=0.05)
    assert accept["labels"]["severity"] == "critical" and accept["labels"]["job"] == "spark-validate"
    assert accept["annotations"]["summary"] == f"spark-validate: acceptance length 1.00 on {pod.sidecar}"

    # The server's own counters tell the same story through the recording rule and its warning alert.
    served = f'instance_model:sglang_spec_accept_length:ratio_rate5m{{instance="{pod.server}"}}'
    # Completion tokens per verify forward. A request's first token comes from prefill, so each full check's
    # short server.progress request (4 tokens) lifts the trap's 1.00 a little (36/34 a round here); and it is
    # not streamed, so its tokens open their own is_streaming series, whose rate() has no value until its
    # second sample: the ratio reads low (0.0 seen) for a scrape or two before it settles
    prom.wait_for(
        "served accept length 1.00 recorded",
        lambda: abs((_value(prom, served) or 0.0) - 1.0) <= 0.1,
        timeout=40,
    )
    prom.wait_for(
        "SGLangServedAcceptLengthLow firing",
        lambda: any(
            a["labels"]["alertname"] == "SGLangServedAcceptLengthLow"
            for a in _alerts_for(prom, pod.server, "firing")
        ),
        timeout=20,
    )


def test_skipped_and_unproven_checks_page_nowhere(stack: Stack) -> None:
    """The trap on a default install (no --log, no --attestation): of its critical checks, server.log is
    skipped and spec.lm_head_shared and attestation.trust are not proven; the critical alert fires for
    the one that the probe proves failed, and for nothing else."""
    prom, pod = stack.prom, stack.pods["bare"]
    prom.wait_for("a failing check scraped", lambda: _first_full_check_scraped(prom, pod, "fail"), 20)
    status = f'spark_validate_check_status{{instance="{pod.sidecar}",severity="critical"}} == 1'
    statuses = {(s["metric"]["check"], s["metric"]["status"]) for s in prom.query(status)}
    assert ("server.log", "skip") in statuses and ("spec.lm_head_shared", "error") in statuses, statuses
    failing = {check for check, st in statuses if st == "fail"}
    assert failing == {"spec.accept_length"}, statuses

    def paged() -> set[str]:
        return {
            a["labels"]["check"]
            for a in _alerts_for(prom, pod.sidecar)
            if a["labels"]["alertname"] == "SparkValidateCriticalCheckFailing"
        }

    prom.wait_for("the failing check's alert", lambda: "spec.accept_length" in paged(), timeout=20)
    _wait_next_evaluation(prom)
    _wait_next_evaluation(prom)
    assert paged() == {"spec.accept_length"}
    # ALERTS keeps every pending or firing evaluation: no skipped or unproven check was ever "failing"
    ever = prom.query(
        f'count_over_time(ALERTS{{alertname="SparkValidateCriticalCheckFailing",instance="{pod.sidecar}"}}[10m])'
    )
    assert {s["metric"]["check"] for s in ever} == {"spec.accept_length"}, ever


def test_healthy_pod_stays_silent(stack: Stack) -> None:
    prom, pod = stack.prom, stack.pods["healthy"]
    prom.wait_for("a passing check scraped", lambda: _first_full_check_scraped(prom, pod, "pass"), 20)
    ready = f'spark_validate_ready{{instance="{pod.sidecar}"}}'
    prom.wait_for("ready scraped", lambda: _value(prom, ready) == 1.0)
    _wait_next_evaluation(prom)
    accept = _value(prom, f'spark_validate_spec_accept_length{{instance="{pod.sidecar}"}}')
    assert accept is not None and accept > 1.5
    # Bounded watch: every evaluation in this window sees the passing pod; nothing may even be pending.
    deadline, seen = time.monotonic() + QUIET_S, []
    while time.monotonic() < deadline:
        seen += [a["labels"] for inst in (pod.sidecar, pod.server) for a in _alerts_for(prom, inst)]
        time.sleep(0.25)
    assert seen == []
    served = f'instance_model:sglang_spec_accept_length:ratio_rate5m{{instance="{pod.server}"}}'
    prom.wait_for("served accept length recorded", lambda: _finite(_value(prom, served)), timeout=20)
    assert (_value(prom, served) or 0.0) > 1.5
    # Evaluated all along (the broken pod's alerts prove the rules run): the quiet is not a dead Prometheus.
    broken = stack.pods["broken"].sidecar
    prom.wait_for("the broken pod's alerts", lambda: bool(_alerts_for(prom, broken, "firing")), timeout=20)
    # The sidecars are present, so the absent-sidecar alert is silent too.
    assert not [a for a in prom.alerts() if a["labels"]["alertname"] == "SparkValidateAbsent"]


def test_no_verdict_goes_stale_while_the_first_check_runs(stack: Stack) -> None:
    """Before its first check ends a sidecar exports a last-run timestamp of 0; that is not a stale verdict
    (ALERTS keeps every pending or firing evaluation, so a blip between two polls still shows)."""
    prom = stack.prom
    for pod in stack.pods.values():
        last_run = f'spark_validate_last_run_timestamp_seconds{{instance="{pod.sidecar}"}}'
        prom.wait_for(f"{pod.sidecar}: a finished check scraped", _nonzero(prom, last_run), 20)
    _wait_next_evaluation(prom)
    assert prom.query('count_over_time(ALERTS{alertname="SparkValidateVerdictStale"}[10m])') == []
