"""``--check ID`` / ``--skip ID``, from the user's side: the real CLI, the real sidecar and
the simulator on loopback. A left-out check is still listed, as skipped on request, never as a pass; an
unknown ID is a usage error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.check_helpers import run_check
from tests.support.cli import json_report, run_cli
from tests.support.daemon_process import daemon_process, wait_for
from tests.support.in_process import preflight_in_process
from tests.support.sim_process import sim_process

AUTO = "python -m sglang.launch_server --model-path /m --moe-runner-backend auto"


def _preflight(*args: str) -> tuple[int, dict[str, object], str]:
    proc = preflight_in_process("--format", "json", "--launch-cmd", AUTO, *args)
    return proc.returncode, json_report(proc.stdout), proc.stderr


def _by_id(report: dict[str, object]) -> dict[str, dict[str, object]]:
    return {str(c["id"]): c for c in report["checks"]}  # type: ignore[attr-defined]


def test_skip_lists_the_check_as_skipped_on_request() -> None:
    _, report, _ = _preflight()
    assert _by_id(report)["moe.backend"]["status"] == "fail"
    _, report, _ = _preflight("--skip", "moe.backend", "--skip", "spec.config")
    checks = _by_id(report)
    assert checks["moe.backend"]["status"] == "skip" and checks["spec.config"]["status"] == "skip"
    assert checks["moe.backend"]["message"] == "skipped on request (--skip moe.backend)"
    assert report["coverage"]["skipped_on_request"] == ["moe.backend", "spec.config"]  # type: ignore[index]
    assert "moe.backend" not in report["coverage"]["not_proven"]  # type: ignore[index]
    assert checks["lm_head.exclusive"]["status"] == "pass"  # the others still run


def test_check_judges_only_the_named_checks() -> None:
    rc, report, _ = _preflight("--check", "moe.backend")
    assert rc == 78 and report["verdict"] == "fail"
    checks = _by_id(report)
    assert checks["moe.backend"]["status"] == "fail"
    others = [c for i, c in checks.items() if i != "moe.backend"]
    assert others and all(c["status"] == "skip" for c in others)
    assert all(str(c["message"]).startswith("not selected (--check moe.backend)") for c in others)
    rc, report, _ = _preflight("--check", "lm_head.exclusive")
    assert rc == 0 and report["verdict"] == "pass" and report["partial"] is False


def test_the_text_coverage_line_names_what_was_skipped() -> None:
    proc = preflight_in_process("--launch-cmd", AUTO, "--check", "moe.backend", "--check", "spec.config")
    last = proc.stdout.strip().splitlines()[-1]
    assert "(skipped on request: " in last and "lm_head.fp8" in last, last


@pytest.mark.parametrize(
    "args",
    [
        ["preflight", "--launch-cmd", AUTO, "--skip", "moe.bakend"],
        ["preflight", "--launch-cmd", AUTO, "--check", "moe.backend", "--check", "spec.cnofig"],
        ["check", "--url", "http://127.0.0.1:1", "--wait", "30", "--check", "nope.nothing"],
        ["serve", "--url", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--skip", "nope.nothing"],
        ["launch", "--skip", "moe.bakend", "--", *AUTO.split()],
    ],
    ids=lambda a: a[0],
)
def test_an_unknown_id_is_a_usage_error_naming_it(args: list[str]) -> None:
    proc = run_cli(*args, timeout=30)
    bad = next(a for a in args if a in {"moe.bakend", "spec.cnofig", "nope.nothing"})
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert bad in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_check_and_skip_of_the_same_id_is_a_usage_error() -> None:
    rc, _, err = _preflight("--check", "moe.backend", "--skip", "moe.backend")
    assert rc == 2 and "moe.backend" in err


def test_a_check_of_a_pack_file_is_known(tmp_path: Path) -> None:
    """A pack file may define a check of its own (``expect``): its ID is valid with that pack."""
    pack = tmp_path / "site.yaml"
    pack.write_text(
        "extends: ling-3.0-flash-dgx-spark\n"
        "checks:\n"
        "  - id: site.mem_fraction\n"
        "    title: site limit\n"
        "    severity: warning\n"
        "    modes: [preflight]\n"
        "    why: w\n"
        "    remedy: r\n"
        "    expect: {fact: launch.args.mem_fraction_static, op: '<=', value: 0.5, when_missing: pass}\n"
    )
    lint = run_cli("rules", "lint", str(pack), timeout=30)
    assert lint.returncode == 0, lint.stderr
    rc, report, err = _preflight("--rules", str(pack))
    assert _by_id(report)["site.mem_fraction"]["status"] == "pass", err
    rc, report, err = _preflight("--rules", str(pack), "--skip", "site.mem_fraction")
    assert _by_id(report)["site.mem_fraction"]["status"] == "skip", err
    rc, report, err = _preflight("--skip", "site.mem_fraction")  # the default pack has no such check
    assert rc == 2 and "site.mem_fraction" in err


def test_live_skip_and_the_sidecar_lists_it(tmp_path: Path) -> None:
    with sim_process(tmp_path) as sim:
        log = ("--log", str(sim.log))  # with the log, only the draft head's identity needs the attestation
        run = run_check(sim.url, "--wait", "20", *log, "--skip", "spec.lm_head_shared")
        assert run.rc == 0, run.explain()  # the only unproven check was left out on request
        assert run.check("spec.lm_head_shared")["status"] == "skip"
        assert run.report is not None and run.report["coverage"]["skipped_on_request"] == [
            "spec.lm_head_shared"
        ]
        fast = ["--interval", "1", "--health-interval", "0.3", "--probe-interval", "60", "--wait", "15"]
        with daemon_process(tmp_path, sim.url, *fast, *log, "--skip", "spec.lm_head_shared") as d:
            assert wait_for(lambda: d.get("/readyz").status_code == 200, timeout=40), d.log()[-3000:]
            lines = d.get("/readyz?verbose").text.splitlines()
    assert "[+]spec.lm_head_shared skipped: skipped on request (--skip spec.lm_head_shared)" in lines
