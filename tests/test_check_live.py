"""`spark-validate check` end to end: the real CLI as a subprocess against the simulator on loopback.

Each broken scenario must fail with exactly its check IDs (exit 78); a server that cannot be read must
give ``inconclusive`` and exit 69, never a traceback; evidence that disagrees between sources fails with
both values; a stale attestation is never taken as proof. Simulators run at a large --speed with a short
start-up so the whole file stays fast on two cores.

Where the subject is the process (a healthy check end to end, the wait's phase lines on stderr, a refused
port, a server that dies, an attestation from a process that is gone) both are real processes. Where it is
the verdict and the report, the real ``check`` front door runs in this process against the ``sim``
command's own server (tests/support/in_process.py; tests/test_live_in_process.py holds it to the real
processes).
"""

from __future__ import annotations

import asyncio
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.support.check_helpers import CheckRun, evidence_files, run_check
from tests.support.in_process import InProcessSim, check_in_process, sim_in_process
from tests.support.loopback import free_port
from tests.support.sim_process import REPO, sim_process

pytestmark = pytest.mark.timeout(120)

PROBE_FIELDS = (
    "accept_length",
    "accept_rate",
    "requests",
    "completion_tokens",
    "verify_ct",
    "tpot_ms",
    "ttft_ms",
)


def no_traceback(run: CheckRun) -> None:
    assert "Traceback" not in run.stderr, run.stderr
    assert "Traceback" not in run.stdout


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessSim]:
    """One healthy simulator shared by the read-only tests (each check only adds probe requests)."""
    with sim_in_process(tmp_path_factory.mktemp("healthy"), "--scenario", "healthy") as sim:
        yield sim


# ---- healthy ----


def test_healthy_passes_with_attestation_and_log(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--scenario", "healthy") as healthy:
        run = run_check(healthy.url, "--wait", "20", *evidence_files(healthy))
    no_traceback(run)
    assert run.rc == 0, run.explain()
    assert run.report is not None and run.report["verdict"] == "pass"
    assert run.report["mode"] == "check"
    assert run.with_status("fail") == set() and run.with_status("error") == set()
    # With the plugin's attestation and the log, nothing is left to warn about.
    assert run.with_status("warn") == set(), run.explain()
    assert "attestation" in run.check("spec.lm_head_shared")["sources"]
    assert set(run.check("lm_head.fp8")["sources"]) == {"attestation", "log"}
    assert {"server", "attestation", "log"} <= set(run.check("moe.backend")["sources"])
    probe = run.report["probe"]
    assert probe is not None
    for key in PROBE_FIELDS:
        assert key in probe, key
    assert probe["accept_length"] > 1.5
    assert probe["completion_tokens"] <= 512  # the pack's hard cap


def test_healthy_over_http_alone_is_inconclusive_with_the_way_to_prove_the_rest(
    healthy: InProcessSim,
) -> None:
    """What HTTP cannot prove (the draft head's identity, the head's dtype) is `error`, and
    the verdict is not a pass until the input that proves it is given (or --allow-partial accepts it)."""
    run = check_in_process(healthy, "--wait", "20")
    no_traceback(run)
    run.inconclusive()
    assert run.with_status("error") == {"spec.lm_head_shared", "lm_head.fp8"}, run.explain()
    assert run.with_status("warn") == set(), run.explain()
    shared = run.check("spec.lm_head_shared")
    assert shared["evidence"]["probe_accept_length"] > 1.5  # the best functional evidence, shown
    needs = {m["id"]: m["input"] for m in run.report["coverage"]["missing"]}
    assert "--attestation" in needs["spec.lm_head_shared"] and "--attestation" in needs["lm_head.fp8"]
    partial = check_in_process(healthy, "--wait", "20", "--allow-partial")
    assert partial.rc == 0 and partial.report is not None and partial.report["partial"] is True


def test_healthy_over_http_and_log_leaves_only_the_draft_head_unproven(healthy: InProcessSim) -> None:
    """The log proves the FP8 head (the 'Online FP8' line, once); only the draft head's identity stays
    unproven without the plugin."""
    run = check_in_process(healthy, "--wait", "20", "--log", str(healthy.log))
    assert run.rc == 69, run.explain()
    assert run.report is not None and run.report["coverage"]["not_proven"] == ["spec.lm_head_shared"]
    assert run.with_status("warn") == set(), run.explain()
    head = run.check("lm_head.fp8")
    assert head["status"] == "pass" and head["sources"] == ["log"]
    assert head["evidence"]["log_fp8_lm_head_lines"] == 1


def test_weights_checker_proves_the_draft_head_without_the_plugin(tmp_path: Path) -> None:
    """With no attestation, ``--weights-checker`` judges the draft's head from SGLang's own per-parameter
    checksums: a module shared has every ``lm_head.*`` entry twice with one checksum; a tensor shared
    alone lacks the draft's ``weight_scale``, the FP8 trap, and is failed without the plugin."""
    for scenario, status, message in (
        ("healthy", "pass", "draft.lm_head.* equals lm_head.* in names and checksums"),
        ("draft-head-weight-only", "fail", "the draft's head lacks lm_head.weight_scale"),
    ):
        with sim_in_process(tmp_path / scenario, "--scenario", scenario) as sim:
            run = check_in_process(sim, "--wait", "20", "--weights-checker")
        no_traceback(run)
        shared = run.check("spec.lm_head_shared")
        assert shared["status"] == status and message in shared["message"], (scenario, run.explain())
        assert shared["sources"] == ["weights_checker"]


def test_strict_without_attestation_is_not_a_pass(healthy: InProcessSim) -> None:
    run = check_in_process(healthy, "--wait", "20", "--log", str(healthy.log), "--strict")
    no_traceback(run)
    assert run.report is not None and run.report["verdict"] != "pass", run.explain()
    assert run.rc != 0
    assert "attestation" in run.check("spec.lm_head_shared")["message"]


def test_pack_requiring_attestation_is_not_a_pass_without_it(healthy: InProcessSim, tmp_path: Path) -> None:
    src = REPO / "rules" / "ling-3.0-flash-dgx-spark.yaml"
    pack = yaml.safe_load(src.read_text())
    pack["expect"]["require_attestation"] = True
    pack["metadata"]["name"] = "ling-strict-site"
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(pack, sort_keys=False))
    shutil.copy(REPO / "rules" / "probe-prompts.yaml", tmp_path / "probe-prompts.yaml")

    without = check_in_process(
        healthy, "--wait", "20", "--log", str(healthy.log), "--rules", str(tmp_path / "site.yaml")
    )
    no_traceback(without)
    without.inconclusive()
    assert {"spec.lm_head_shared", "lm_head.fp8"} <= without.with_status("error")
    with_it = check_in_process(
        healthy, "--wait", "20", *evidence_files(healthy), "--rules", str(tmp_path / "site.yaml")
    )
    assert with_it.rc == 0, with_it.explain()


def test_the_probe_reads_the_prompts_file_its_pack_names(healthy: InProcessSim, tmp_path: Path) -> None:
    """A site pack's ``probe.prompts`` is the file the live probe is handed (beside the pack), not the
    built-in prompts: an empty one makes the probe an error naming it; a copy of the built-in one passes."""
    site = tmp_path / "site.yaml"
    site.write_text(
        "apiVersion: spark-validate/v1\nkind: RulePack\nextends: ling-3.0-flash-dgx-spark\n"
        "metadata:\n  name: site\n  version: '1'\nprobe:\n  prompts: site-prompts.yaml\n"
    )
    (tmp_path / "site-prompts.yaml").write_text("prompts: []\n")
    empty = check_in_process(healthy, "--wait", "20", *evidence_files(healthy), "--rules", str(site))
    no_traceback(empty)
    assert empty.report is not None and empty.report["verdict"] != "pass", empty.explain()
    named = {str(c["id"]): c["status"] for c in empty.report["checks"] if "site-prompts.yaml" in c["message"]}
    assert named and set(named.values()) == {"error"}, empty.explain()
    shutil.copy(REPO / "rules" / "probe-prompts.yaml", tmp_path / "site-prompts.yaml")
    copied = check_in_process(healthy, "--wait", "20", *evidence_files(healthy), "--rules", str(site))
    assert copied.rc == 0, copied.explain()


def test_junit_has_a_testcase_per_check(tmp_path: Path) -> None:
    # an idle server of its own: the shared one's log holds the other tests' decode batches, which prove
    # progress to a check that sends nothing (the idle-server case below is what this test asserts)
    # --no-probe leaves the acceptance length unproven: --allow-partial accepts that here
    with sim_in_process(tmp_path, "--scenario", "healthy") as idle:
        args = ("--wait", "20", *evidence_files(idle), "--no-probe", "--allow-partial")
        as_json = check_in_process(idle, *args)
        junit = check_in_process(idle, *args, fmt="junit")
    no_traceback(junit)
    assert junit.rc == as_json.rc == 0, junit.stderr
    root = ET.fromstring(junit.stdout)
    cases = root.findall(".//testcase")
    assert as_json.report is not None
    ids = [c["id"] for c in as_json.report["checks"]]
    assert len(cases) == len(ids)
    names = " ".join(f"{c.get('classname', '')} {c.get('name', '')}" for c in cases)
    for check_id in ids:
        assert check_id in names, check_id
    assert not root.findall(".//failure")
    # --no-probe really skips the probe, and says what that leaves unproven: the critical checks
    # --allow-partial accepted are skipped with their reason, the warning-level one stays an error; an
    # idle server's progress is proven by a request of ours, which --no-probe does not send either
    accepted = {c.get("name") for c in cases if c.find("skipped") is not None}
    assert accepted == {"spec.accept_length", "probe.output", "server.progress"}, accepted
    assert {c.get("name") for c in cases if c.find("error") is not None} == {"perf.tpot"}
    assert root.find(".//property[@name='partial']") is not None
    assert as_json.status("spec.accept_length") == "error"
    assert "--no-probe" in as_json.check("spec.accept_length")["message"]


# ---- each broken scenario fails with exactly its checks ----

BROKEN = {
    "draft-head-weight-only": {"spec.lm_head_shared", "spec.accept_length"},
    # --speculative-token-map: SGLang's init_lm_head gives the draft a sliced copy; the attestation says so
    "token-map": {"spec.lm_head_shared", "spec.accept_length"},
    "backend-auto": {"moe.backend"},
    "fp32-head": {"lm_head.fp8"},
    "fp8-and-fp32": {"lm_head.exclusive"},
    # The stock build ignores the variable: the head stays BF16, and the draft's tensor-only sharing of a
    # BF16 head computes the target's own logits (acceptance stays healthy). Only the missing FP8 head is
    # a fault; the latent sharing problem is a warning.
    "fp8-ignored": {"lm_head.fp8"},
    "no-spec": {"spec.config", "spec.accept_length"},
    "degenerate-output": {"probe.output"},
}


@pytest.mark.parametrize("scenario", list(BROKEN))
def test_broken_scenario_fails_exactly_its_checks(scenario: str, tmp_path: Path) -> None:
    with sim_in_process(tmp_path, "--scenario", scenario) as sim:
        run = check_in_process(sim, "--wait", "20", *evidence_files(sim))
    no_traceback(run)
    assert run.rc == 78, run.explain()
    assert run.report is not None and run.report["verdict"] == "fail"
    assert run.with_status("fail") == BROKEN[scenario], run.explain()
    assert run.with_status("error") == set(), run.explain()
    # The simulator derives every surface from one state, so its sources never disagree: a
    # "sources disagree" here would be a check comparing unlike values.
    assert not [c["id"] for c in run.report["checks"] if "disagree" in c["message"]], run.explain()
    for check_id in BROKEN[scenario]:
        c = run.check(check_id)
        assert c["remedy"], check_id  # every failure carries its remedy
        assert c["sources"], check_id
    if scenario == "fp8-ignored":
        shared = run.check("spec.lm_head_shared")
        assert shared["status"] == "warn" and "harmless" in shared["message"]
        assert run.report["probe"]["accept_length"] > 1.5
    if scenario == "draft-head-weight-only":
        assert run.report["probe"]["accept_length"] == pytest.approx(1.0, abs=0.05)
        assert run.report["probe"]["completion_tokens"] <= 64
    if scenario == "token-map":
        shared = run.check("spec.lm_head_shared")
        assert "--speculative-token-map" in shared["message"] and "32768 hot tokens" in shared["message"]
        assert shared["evidence"]["hot_token_count"] == 32768
    if scenario == "no-spec":
        assert "speculative decoding is off" in run.check("probe.output")["message"]
    if scenario in ("fp32-head", "fp8-ignored"):
        assert "bfloat16" in run.check("lm_head.fp8")["message"]
    if scenario == "fp8-ignored":  # the variable is set already: the advice is the build, not the variable
        assert "Ling-3.0 patch" in run.check("lm_head.fp8")["remedy"]
    if scenario == "backend-auto":
        assert "flashinfer_mxfp4" in run.check("moe.backend")["message"]


# ---- waiting ----


def test_slow_start_too_short_wait_exits_69_then_enough_wait_passes(tmp_path: Path) -> None:
    # slow-start multiplies --startup-seconds by 6: about 9 s of 503 on /health, so that the second check
    # still meets the start-up phase after the first (two interpreter starts) on a loaded 2-core machine.
    # Both checks start together, so that the long one meets the start-up phase however loaded the host is.
    # The simulator listens while loading (answering 503), so that both checks meet that phase.
    with (
        sim_process(tmp_path, "--scenario", "slow-start", "--answer-while-loading", startup=1.5) as sim,
        ThreadPoolExecutor(2) as pool,
    ):
        pending_long = pool.submit(run_check, sim.url, "--wait", "30", *evidence_files(sim))
        short = run_check(sim.url, "--wait", "0.5", *evidence_files(sim))
        long = pending_long.result()
    no_traceback(short)
    message = short.not_ready()
    assert "not ready after 0.5 s" in message and "--wait" in message
    assert "starting" in short.stderr  # the phase line a journal shows
    no_traceback(long)
    assert long.rc == 0, long.explain()
    assert "starting" in long.stderr and "ready" in long.stderr


# ---- unavailable or unreadable servers: inconclusive, exit 69, never a traceback ----


def test_unreachable_port_is_inconclusive(tmp_path: Path) -> None:
    port = free_port()
    run = run_check(f"http://127.0.0.1:{port}", "--wait", "1")
    no_traceback(run)
    message = run.not_ready()
    assert str(port) in message
    assert "connection failed" in message or "ConnectError" in message
    assert run.with_status("fail") == set()
    # no check claims anything it could not see: no warning built on absent evidence
    assert run.with_status("warn") == set(), run.explain()
    assert "see server.ready" in run.check("spec.accept_length")["message"]  # the reason is told once


def test_crash_after_ready_is_a_dead_server_in_this_check_and_the_next(tmp_path: Path) -> None:
    """The scheduler dies while the probe runs (``Scheduler hit an exception ... CUDA error: an illegal
    memory access``, then the launcher's SIGQUIT line): ``server.log`` fails quoting the exception; a later
    ``check`` against the dead server ends its wait on the log at once and never advises raising --wait."""
    crash = "RuntimeError: CUDA error: an illegal memory access was encountered (simulated)"
    with sim_process(tmp_path, "--scenario", "crash-after-ready") as sim:
        run = run_check(sim.url, "--wait", "20", *evidence_files(sim))
        sim.proc.wait(timeout=10)  # the scheduler really died
        began = time.monotonic()
        later = run_check(sim.url, "--wait", "60", *evidence_files(sim))
        took = time.monotonic() - began
    for r in (run, later):
        no_traceback(r)
        assert r.rc == 78, r.explain()
        log = r.check("server.log")
        assert log["status"] == "fail" and "died after it was ready" in log["message"], r.explain()
        assert log["evidence"]["crash"] == crash and "Restart" in str(log["remedy"])
    acc = run.check("spec.accept_length")
    assert acc["status"] == "error" and "/generate" in acc["message"]
    ready = later.check("server.ready")["message"]
    assert ready and "died after it was ready" in ready and crash in ready and "raise --wait" not in ready
    assert took < 30, took


def test_malformed_json_is_inconclusive_naming_the_endpoint(tmp_path: Path) -> None:
    with sim_in_process(tmp_path, "--scenario", "malformed-json") as sim:
        run = check_in_process(sim, "--wait", "20", *evidence_files(sim))
    no_traceback(run)
    message = run.not_ready()
    assert "/server_info" in message and "invalid JSON" in message


def test_flaky_5xx_within_the_retry_budget_is_never_a_config_failure(tmp_path: Path) -> None:
    with sim_in_process(tmp_path, "--scenario", "flaky-5xx") as sim:
        run = check_in_process(sim, "--wait", "20", *evidence_files(sim))
    no_traceback(run)
    # 503s are the server's trouble, not a misconfiguration: pass (retried) or inconclusive, never 78.
    assert run.rc in (0, 69), run.explain()
    assert run.with_status("fail") == set(), run.explain()


def test_flaky_5xx_beyond_the_retry_budget_is_inconclusive(tmp_path: Path) -> None:
    """With no retries, some seed's 503 lands on a request the check needs; that run must be
    inconclusive (exit 69) naming the status, never fail and never raise."""
    from validator.commands.common import exit_code
    from validator.live import LiveInputs, run_live
    from validator.rulepack import load_pack
    from validator.sim.runner import SimServer

    loaded = load_pack(None)
    seen: list[tuple[str, int, str]] = []
    for seed in range(12):
        att, log = tmp_path / f"att-{seed}.json", tmp_path / f"log-{seed}.log"
        with SimServer("flaky-5xx", seed=seed, speed=1000.0, startup_seconds=0.05,
                       log_path=log, attestation_path=att) as sim:  # fmt: skip
            inputs = LiveInputs(url=sim.url, attestation=att, log=log, wait_s=10.0, retries=0)
            report = asyncio.run(run_live(inputs, loaded)).report
        verdict = report.verdict.value
        fails = [c.id for c in report.checks if c.status.value == "fail"]
        assert not fails, (seed, fails)
        errors = " ".join(c.message for c in report.checks if c.status.value == "error")
        seen.append((verdict, int(exit_code(report)), errors))
        if verdict == "inconclusive":
            break
    verdict, code, errors = seen[-1]
    assert verdict == "inconclusive", seen
    assert code == 69
    assert "503" in errors


# ---- evidence that disagrees, and evidence that is stale ----


def test_log_from_another_server_disagrees_with_the_server(tmp_path: Path) -> None:
    from validator.sim.runner import SimServer

    other_log = tmp_path / "backend-auto.log"
    with SimServer("backend-auto", speed=1000.0, startup_seconds=0.05, log_path=other_log,
                   attestation_path=tmp_path / "other.json") as other:  # fmt: skip
        assert other.wait_ready(10)
    with sim_in_process(tmp_path, "--scenario", "healthy") as sim:
        run = check_in_process(sim, "--wait", "20", "--log", str(other_log), "--no-probe")
        junit = check_in_process(sim, "--wait", "20", "--log", str(other_log), "--no-probe", fmt="junit")
    no_traceback(run)
    assert run.rc == 78, run.explain()
    moe = run.check("moe.backend")
    assert moe["status"] == "fail"
    assert "humming" in moe["message"] and "flashinfer_mxfp4" in moe["message"]
    assert moe["evidence"]["server.target"] == "humming"
    assert moe["evidence"]["log.target"] == "flashinfer_mxfp4"
    assert set(moe["sources"]) >= {"server", "log"}
    # the same verdict in JUnit, with a failure element on the moe.backend testcase
    assert junit.rc == 78
    failed = [c for c in ET.fromstring(junit.stdout).iter("testcase") if c.find("failure") is not None]
    assert any("moe.backend" in f"{c.get('classname')} {c.get('name')}" for c in failed)


def test_stale_attestation_from_a_previous_process_is_an_error_not_a_pass(tmp_path: Path) -> None:
    old = tmp_path / "previous-attestation.json"
    with sim_process(tmp_path, "--scenario", "healthy") as first:
        deadline = time.monotonic() + 10
        while not first.attestation.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the writer renames atomically; let start-up finish
        run_check(first.url, "--wait", "20", "--no-probe")  # proves it served; file complete by ready
        shutil.copy(first.attestation, old)
    with sim_process(tmp_path, "--scenario", "healthy") as second:
        run = run_check(second.url, "--wait", "20", "--attestation", str(old), "--log", str(second.log))
    no_traceback(run)
    assert run.report is not None and run.report["verdict"] != "pass", run.explain()
    assert run.rc == 69
    for check_id in ("spec.lm_head_shared", "lm_head.fp8"):
        c = run.check(check_id)
        assert c["status"] == "error", run.explain()
        assert "stale" in c["message"] and str(old) in c["message"]
