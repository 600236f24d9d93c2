"""The engine's verdict rules (severity, waivers, strict, inconclusive) and the three output formats
rendered from one report, secrets redacted in each."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from validator.engine import build_report, run_checks
from validator.facts import Facts, LaunchFacts, ServerFacts
from validator.outputs import formats, render
from validator.report import CheckResult, Severity, Status, Verdict, decide_verdict
from validator.rulepack import LoadedPack, load_pack, parse_pack

RECIPE_ARGS = {
    "model_path": "/models/Ling-3.0-flash-fp4",
    "moe_runner_backend": "humming",
    "speculative_moe_runner_backend": None,
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "speculative_draft_model_path": "/models/Ling-3.0-flash-fp4",
    "enable_fp32_lm_head": False,
    "mem_fraction_static": 0.6,
}


def launch(**over: object) -> LaunchFacts:
    args = {**RECIPE_ARGS, **over}
    return LaunchFacts(
        origin="test",
        argv=[],
        entry="launch_server",
        interpreter=None,
        args=args,
        explicit=set(args),
        env={"SGLANG_ENABLE_FP8_LM_HEAD": "1"},
    )


def _result(status: Status, severity: Severity, waived: bool = False) -> CheckResult:
    from validator.report import Waiver

    w = Waiver(check="x.y", justification="because", expires="2030-01-01") if waived else None
    return CheckResult(id="x.y", status=status, severity=severity, message="m", waived=w)


def test_verdict_rules() -> None:
    C, W = Severity.CRITICAL, Severity.WARNING
    assert decide_verdict([_result(Status.PASS, C)]) is Verdict.PASS
    assert decide_verdict([_result(Status.FAIL, C)]) is Verdict.FAIL
    assert decide_verdict([_result(Status.FAIL, C, waived=True)]) is Verdict.PASS
    assert decide_verdict([_result(Status.ERROR, C)]) is Verdict.INCONCLUSIVE
    assert decide_verdict([_result(Status.ERROR, C), _result(Status.FAIL, C)]) is Verdict.FAIL
    assert decide_verdict([_result(Status.WARN, W)]) is Verdict.PASS
    assert decide_verdict([_result(Status.WARN, W)], strict=True) is Verdict.FAIL
    assert decide_verdict([_result(Status.SKIP, C)]) is Verdict.PASS


def test_allow_partial_accepts_missing_evidence_never_an_unreached_server() -> None:
    """The one verdict rule holds the unreached-server rule too (it was build_report's): --allow-partial
    accepts a critical check that could not run, not a server that could not be read, waived or not."""
    C = Severity.CRITICAL
    log = replace(_result(Status.ERROR, C), sources=["log"])
    server = replace(_result(Status.ERROR, C), sources=["server", "attestation"])
    assert decide_verdict([log], allow_partial=True) is Verdict.PASS
    assert decide_verdict([log, server], allow_partial=True) is Verdict.INCONCLUSIVE
    assert decide_verdict([server], allow_partial=False) is Verdict.INCONCLUSIVE
    waived = replace(_result(Status.ERROR, C, waived=True), sources=["server"])
    # a waiver lets the unreached check itself pass, never --allow-partial accept the rest without a server
    assert decide_verdict([waived], allow_partial=True) is Verdict.PASS
    assert decide_verdict([log, waived], allow_partial=True) is Verdict.INCONCLUSIVE
    assert decide_verdict([log, server, _result(Status.FAIL, C)], allow_partial=True) is Verdict.FAIL


def test_noncritical_failure_is_a_warning_and_mem_fraction_rule_is_data() -> None:
    loaded = load_pack(None)
    facts = Facts(launch=launch(mem_fraction_static=0.8))
    results = {r.id: r for r in run_checks(facts, loaded, mode="preflight", only={"host.mem_fraction"})}
    r = results["host.mem_fraction"]
    assert r.status is Status.WARN and r.severity is Severity.WARNING
    assert "0.8" in r.message and r.remedy and "0.68" in r.remedy
    facts = Facts(launch=launch(mem_fraction_static=None))
    r = run_checks(facts, loaded, mode="preflight", only={"host.mem_fraction"})[0]
    assert r.status is Status.PASS


def test_waiver_keeps_result_visible_but_not_blocking(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[1] / "rules" / "ling-3.0-flash-dgx-spark.yaml").read_text()
    text = text.replace(
        "waivers: []",
        "waivers:\n  - check: moe.backend\n    justification: benchmarking "
        "flashinfer for ticket PERF-7\n    expires: 2027-01-31",
    )
    p = tmp_path / "p.yaml"
    p.write_text(text)
    loaded = LoadedPack(parse_pack(p), p)
    facts = Facts(launch=launch(moe_runner_backend="flashinfer_mxfp4"))
    before = run_checks(facts, loaded, mode="preflight", only={"moe.backend"}, today=dt.date(2027, 1, 1))[0]
    after = run_checks(facts, loaded, mode="preflight", only={"moe.backend"}, today=dt.date(2027, 2, 1))[0]
    assert before.status is Status.FAIL and before.waived is not None
    assert decide_verdict([before]) is Verdict.PASS
    assert after.status is Status.FAIL and after.waived is None
    assert decide_verdict([after]) is Verdict.FAIL


def _live_report(secret: str) -> tuple[LoadedPack, object]:
    loaded = load_pack(None)
    info = {
        **RECIPE_ARGS,
        "speculative_algorithm": "EAGLE",
        "launch_command": "python -m sglang.launch_server --speculative-algorithm NEXTN",
        "version": "0.5.23",
        "api_key": secret,
        "admin_api_key": secret,
    }
    facts = Facts(mode="check", server=ServerFacts(url="http://127.0.0.1:1", healthy=True, server_info=info))
    results = run_checks(facts, loaded, mode="check")
    return loaded, build_report(
        results,
        loaded,
        mode="check",
        started_at="2026-11-29T15:00:00Z",
        started_monotonic=0.0,
        target="http://127.0.0.1:1",
    )


def test_json_report_has_the_contract_shape() -> None:
    _loaded, report = _live_report("sk-abc")
    data = json.loads(render(report, "json"))  # type: ignore[arg-type]
    assert set(data) >= {
        "tool",
        "version",
        "mode",
        "verdict",
        "rule_pack",
        "started_at",
        "duration_s",
        "checks",
        "probe",
        "coverage",
        "partial",
    }
    assert data["tool"] == "spark-validate" and data["mode"] == "check"
    assert data["rule_pack"] == "ling-3.0-flash-dgx-spark"
    for c in data["checks"]:
        assert set(c) >= {"id", "status", "severity", "message", "evidence", "sources", "remedy"}
        assert c["status"] in {"pass", "fail", "warn", "skip", "error", "info"}
    by_id = {c["id"]: c for c in data["checks"]}
    assert by_id["moe.backend"]["status"] == "pass"
    assert by_id["spec.config"]["status"] == "pass"
    # without probe, attestation or log: identity and dtype cannot be proven: error, not pass
    assert by_id["spec.lm_head_shared"]["status"] == "error"
    assert by_id["lm_head.fp8"]["status"] == "error"
    assert by_id["spec.accept_length"]["status"] == "error"  # the probe was not run
    assert data["verdict"] == "inconclusive" and data["partial"] is True
    assert {"spec.lm_head_shared", "lm_head.fp8", "spec.accept_length"} <= set(data["coverage"]["not_proven"])


def test_secrets_never_rendered_in_any_format() -> None:
    secret = "sk-live-5f3c9a"
    _loaded, report = _live_report(secret)
    # evidence that carries a secret-named key (e.g. a check quoting server_info) is redacted too
    report.checks[0].evidence["api_key"] = secret  # type: ignore[attr-defined]
    for fmt in formats():
        out = render(report, fmt)  # type: ignore[arg-type]
        assert secret not in out, fmt


def test_junit_maps_statuses() -> None:
    loaded = load_pack(None)
    facts = Facts(launch=launch(moe_runner_backend="auto"))
    results = run_checks(facts, loaded, mode="preflight")
    report = build_report(
        results, loaded, mode="preflight", started_at="2026-11-29T15:00:00Z", started_monotonic=0.0
    )
    root = ET.fromstring(render(report, "junit"))
    assert root.tag == "testsuite"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["moe.backend"].find("failure") is not None
    # no checkpoint read: what 'auto' picks is unknown, never claimed (issue 29, item 6)
    failure = cases["moe.backend"].find("failure").get("message") or ""  # type: ignore[union-attr]
    assert "unknown" in failure and "flashinfer_mxfp4" not in failure
    assert cases["checkpoint.layout"].find("error") is not None  # no model dir: not proven, never a pass
    assert int(root.get("failures") or 0) == sum(1 for r in results if r.status is Status.FAIL)


def test_host_platform_info_check() -> None:
    from validator.facts import HostFacts

    loaded = load_pack(None)

    def status_for(**host: object) -> tuple[Status, str]:
        facts = Facts(
            launch=launch(),
            host=HostFacts(
                **{
                    "machine": "aarch64",
                    "mem_total_bytes": 128 * 2**30,
                    "service_user": None,
                    "home": None,
                    **host,
                }
            ),
        )
        r = run_checks(facts, loaded, mode="preflight", only={"host.platform"})[0]
        return r.status, r.message

    assert status_for(gpu_name="NVIDIA GB10", is_dgx_spark=True)[0] is Status.PASS
    st, msg = status_for(gpu_name="NVIDIA H200", is_dgx_spark=False, machine="x86_64")
    assert st is Status.INFO and "H200" in msg  # an info finding: never WARN
    assert status_for(gpu_name=None, is_dgx_spark=None)[0] is Status.INFO


def test_a_server_never_reached_is_inconclusive_from_the_one_verdict_rule() -> None:
    """No process found, a check past its deadline, a check that raised: one critical server.ready error,
    judged by decide_verdict (inconclusive, exit 69), never a verdict written by hand."""
    from validator.report import unreached_report

    for source in ("process", "server"):
        report = unreached_report("not found", rule_pack="p", target="t", duration_s=0.0, source=source)
        assert report.verdict is Verdict.INCONCLUSIVE and report.mode == "check"
        assert [(c.id, c.status, c.severity, c.sources) for c in report.checks] == [
            ("server.ready", Status.ERROR, Severity.CRITICAL, [source])
        ]
