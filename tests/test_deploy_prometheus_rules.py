"""deploy/prometheus: `promtool check rules` and `promtool test rules` pass, the unit tests cover every alert
both firing and silent, mutated rules make them fail, and a real Prometheus loads the rules.

The end-to-end test against real sidecars and simulated servers is tests/test_deploy_e2e.py.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deploy_tools import (
    DEPLOY,
    free_port,
    load_yaml,
    require_tool,
    run_tool,
    running_prometheus,
    with_short_for,
)

PROM = DEPLOY / "prometheus"
RULES = PROM / "spark-validate.rules.yml"
UNIT_TESTS = PROM / "spark-validate.rules.test.yml"
SERVER_METRICS = (
    Path(__file__).resolve().parents[1]
    / ".cache/sglang-0.5.23-site/sglang/srt/observability/metrics_collector.py"
)


def _alerts() -> list[dict[str, Any]]:
    return [r for g in load_yaml(RULES)["groups"] for r in g["rules"] if "alert" in r]


def _promtool_test(workdir: Path, rules_text: str) -> tuple[int, str]:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / RULES.name).write_text(rules_text)
    shutil.copy(UNIT_TESTS, workdir / UNIT_TESTS.name)
    result = run_tool([require_tool("promtool"), "test", "rules", UNIT_TESTS.name], cwd=workdir)
    return result.returncode, result.stdout + result.stderr


def test_promtool_check_rules() -> None:
    result = run_tool([require_tool("promtool"), "check", "rules", str(RULES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in load_yaml(RULES)['groups'])} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = run_tool([require_tool("promtool"), "test", "rules", UNIT_TESTS.name], cwd=PROM)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_firing_and_silent() -> None:
    tested = [t for case in load_yaml(UNIT_TESTS)["tests"] for t in case.get("alert_rule_test", [])]
    for alert in _alerts():
        name = alert["alert"]
        cases = [t for t in tested if t["alertname"] == name]
        assert any(t["exp_alerts"] for t in cases), f"{name}: no test where it fires"
        assert any(not t["exp_alerts"] for t in cases), f"{name}: no test where it stays silent"


def test_alerts_carry_for_severity_summary_description_and_runbook() -> None:
    anchors = {
        _slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+)$", (DEPLOY / "README.md").read_text(), re.M)
    }
    for alert in _alerts():
        assert re.fullmatch(r"\d+[smh]", alert["for"]), alert["alert"]
        assert alert["labels"]["severity"] in {"critical", "warning"}
        annotations = alert["annotations"]
        assert annotations["summary"] and annotations["description"]
        # absolute: Alertmanager and its receivers have no base to resolve a relative path against
        path, _, anchor = annotations["runbook_url"].partition("#")
        assert path == _runbooks_url(), f"{alert['alert']}: runbook_url is not the project's Runbooks URL"
        assert anchor in anchors, f"{alert['alert']}: no heading for #{anchor}"


def _runbooks_url() -> str:
    """pyproject's [project.urls] Runbooks: deploy/README.md where the project publishes it."""
    import tomllib

    url: str = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]["urls"]["Runbooks"]
    assert url.startswith("https://") and url.endswith("/deploy/README.md")
    return url


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            'spark_validate_check_status{severity="critical",status="fail"} == 1',
            'spark_validate_check_status{severity="x",status="fail"} == 1',
        ),
        # the old rule (a check not passing) pages on skipped and unproven checks: the cases catch it
        (
            'spark_validate_check_status{severity="critical",status="fail"} == 1',
            'spark_validate_check_passed{severity="critical"} == 0',
        ),
        (
            'spark_validate_check_status{severity="critical",status="fail"} == 1',
            'spark_validate_check_status{severity="critical",status!="pass"} == 1',
        ),
        (
            "unless on (job, instance) spark_validate_ready == 1\n        for: 5m",
            "unless on (job, instance) spark_validate_ready == 2\n        for: 5m",
        ),
        ("spark_validate_spec_accept_length < 1.5", "spark_validate_spec_accept_length < 0.5"),
        ("ratio_rate5m < 1.5", "ratio_rate5m > 1.5"),
        ("spark_validate_ready == 0\n", "spark_validate_ready == 2\n"),
        ("> 1800", "> 99999"),
        ("spark_validate_last_run_timestamp_seconds > 0", "spark_validate_last_run_timestamp_seconds >= 0"),
        ('absent(up{job="spark-validate"})', 'absent(up{job="sglang"})'),
        ("for: 15m", "for: 1m"),
        ('{kind="not_proven"} > 0', '{kind="not_proven"} > 5'),
        (
            "and on (job, instance) spark_validate_ready == 1",
            "and on (job, instance) spark_validate_ready >= 0",
        ),
    ],
)
def test_unit_tests_catch_a_broken_rule(tmp_path: Path, old: str, new: str) -> None:
    text = RULES.read_text()
    assert old in text
    code, output = _promtool_test(tmp_path, text.replace(old, new, 1))
    assert code != 0, f"promtool test rules still passed with {old!r} -> {new!r}:\n{output}"


def test_recording_rule_uses_sglangs_real_counter_names() -> None:
    source = SERVER_METRICS.read_text()
    expr = next(r["expr"] for g in load_yaml(RULES)["groups"] for r in g["rules"] if "record" in r)
    for name in re.findall(r"sglang:[a-z_]+", expr):
        assert f'name="{name}"' in source, f"{name} is not a metric of SGLang 0.5.23"


def test_real_prometheus_scrapes_itself_and_evaluates_the_shipped_rules(tmp_path: Path) -> None:
    """The helper works: Prometheus scrapes itself, loads the rules, and the absent-sidecar alert fires."""
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(with_short_for(load_yaml(RULES), "1s")))
    port = free_port()
    scrape = [{"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]
    with running_prometheus(tmp_path / "prom", scrape, [rules], port=port) as prom:
        prom.wait_for("self-scrape up==1", lambda: [s["value"][1] for s in prom.query("up")] == ["1"])
        loaded = {r["name"] for g in prom.api("rules")["groups"] for r in g["rules"]}
        assert loaded == {
            r.get("alert", r.get("record")) for g in load_yaml(RULES)["groups"] for r in g["rules"]
        }
        prom.wait_for(
            "SparkValidateAbsent firing",
            lambda: any(a["labels"]["alertname"] == "SparkValidateAbsent" for a in prom.alerts("firing")),
        )
        firing = {a["labels"]["alertname"] for a in prom.alerts()}
        assert firing == {"SparkValidateAbsent"}, firing
    assert prom.process.poll() is not None, "prometheus still running after the context exited"


def test_grafana_dashboard_queries_are_valid_promql_over_known_metrics(tmp_path: Path) -> None:
    """Each panel query parses (promtool checks it as a recording rule) and names only real metrics."""
    dashboard = json.loads((DEPLOY / "grafana" / "spark-validate.json").read_text())
    exprs = [t["expr"].replace("$instance", ".*") for p in dashboard["panels"] for t in p["targets"]]
    records = [{"record": f"panel:q{i}", "expr": e} for i, e in enumerate(exprs)]
    (tmp_path / "dash.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    result = run_tool([require_tool("promtool"), "check", "rules", str(tmp_path / "dash.yml")])
    assert result.returncode == 0, result.stdout + result.stderr
    recorded = {r["record"] for g in load_yaml(RULES)["groups"] for r in g["rules"] if "record" in r}
    server_source = SERVER_METRICS.read_text()
    for name in {n for e in exprs for n in re.findall(r"[a-z_]+:[a-z_:0-9]+|spark_validate_[a-z_]+", e)}:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        known = name in recorded or f'name="{base}"' in server_source or name in CONTRACT_METRICS
        assert known, f"dashboard names unknown metric {name}"


CONTRACT_METRICS = {
    "spark_validate_check_passed",
    "spark_validate_ready",
    "spark_validate_spec_accept_length",
    "spark_validate_last_run_timestamp_seconds",
    "spark_validate_last_success_timestamp_seconds",
    "spark_validate_run_duration_seconds",
    "spark_validate_runs_total",
    "spark_validate_build_info",
    "spark_validate_check_status",
    "spark_validate_coverage",
    "spark_validate_node_info",
}
