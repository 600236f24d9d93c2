"""Verdicts you can trust (the contract's "Verdict and coverage"), as an operator meets them:
real processes, real SGLang files, real checkpoints, the simulator on loopback.

- ``skip`` only for "does not apply"; evidence that could not be gathered is ``error``, and a critical
  ``error`` makes the verdict ``inconclusive`` (exit 69) naming the input that would let it run;
  ``--allow-partial`` accepts that, with ``"partial": true``; the JSON ``coverage`` and the text
  report's coverage line say what was proven.
- ``info`` findings print as INFO and never fail ``--strict``; GB10 checks do not apply off a Spark.
- the recipe's own ``SGLANG_ARGS`` is not "undeclared"; ``EAGLE`` with the NEXTN layer is the recipe.
- the plugin's remedy is credited only when the plugin will load and switch it on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.check_helpers import CheckRun, evidence_files, run_check
from tests.support.cli import json_report
from tests.support.in_process import InProcessSim, check_in_process, preflight_in_process, sim_in_process
from tests.support.sim_process import SimProcess, sim_process
from tests.support.timing_proxy import timing_proxy
from tests.test_preflight import REPO, Server, _server

HUB_ID = "inclusionAI/Ling-3.0-flash-fp4"


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("patched"), "patched")


@pytest.fixture(scope="module")
def stock_with_plugin(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(
        tmp_path_factory.mktemp("stock"),
        "stock",
        share_hook=False,
        plugins={"spark_validate": "spark_validate_plugin.plugin:register"},
    )


def preflight(env: dict[str, str], *args: str, fmt: str = "json") -> tuple[int, Any, str]:
    proc = preflight_in_process("--format", fmt, *args, env={**env, "NO_COLOR": "1"})
    if fmt != "json":
        return proc.returncode, proc.stdout, proc.stderr
    return proc.returncode, json_report(proc.stdout), proc.stderr


def check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == check_id)


def hub(server: Server, *extra: str) -> str:
    """The recipe with the guide's hub id as model path: nothing local to read the checkpoint from."""
    return server.cmd(*extra).replace(str(server.model), HUB_ID)


# ---- coverage --------------------------------------------------------------------------------------


def test_missing_evidence_is_inconclusive_naming_the_input_that_would_prove_it(patched: Server) -> None:
    """No local checkpoint used to be `skip` and the verdict PASS: the layout was never proven."""
    rc, report, _ = preflight(patched.env, "--launch-cmd", hub(patched))
    assert rc == 69 and report["verdict"] == "inconclusive"
    layout = check(report, "checkpoint.layout")
    assert layout["status"] == "error"
    cov = report["coverage"]
    assert cov["not_proven"] == ["checkpoint.layout"]
    assert cov["proven"] == cov["critical"] - 1
    assert report["partial"] is True
    missing = cov["missing"][0]
    assert missing["id"] == "checkpoint.layout" and "--model-dir" in missing["input"]


def test_text_report_ends_with_the_coverage_line(patched: Server) -> None:
    rc, text, _ = preflight(patched.env, "--launch-cmd", hub(patched), fmt="text")
    assert rc == 69
    last = text.strip().splitlines()[-1]
    assert last.startswith("proved ") and " critical invariants; not proven: checkpoint.layout (" in last
    assert "--model-dir" in last


def test_allow_partial_passes_and_says_so(patched: Server) -> None:
    rc, report, _ = preflight(patched.env, "--launch-cmd", hub(patched), "--allow-partial")
    assert rc == 0 and report["verdict"] == "pass"
    assert report["partial"] is True and report["coverage"]["not_proven"] == ["checkpoint.layout"]
    rc, report, _ = preflight(patched.env, "--launch-cmd", patched.cmd())
    assert rc == 0 and report["partial"] is False and report["coverage"]["not_proven"] == []
    assert report["coverage"]["proven"] == report["coverage"]["critical"]


def test_strict_never_passes_what_was_not_proven(patched: Server) -> None:
    """`--strict` used to read PASS with skipped critical checks, although the README promised otherwise."""
    rc, report, _ = preflight(patched.env, "--launch-cmd", hub(patched), "--strict")
    assert rc == 69 and report["verdict"] == "inconclusive"


def test_a_failure_outranks_what_could_not_run(patched: Server) -> None:
    rc, report, _ = preflight(patched.env, "--launch-cmd", hub(patched, "--enable-fp32-lm-head"))
    assert rc == 78 and report["verdict"] == "fail"
    assert report["coverage"]["not_proven"] == ["checkpoint.layout"]


def test_an_unreadable_install_is_error_for_every_check_that_needs_it(
    patched: Server, tmp_path: Path
) -> None:
    from tests.support.sglang_builds import fake_interpreter

    bare = fake_interpreter(tmp_path / "bare" / "bin", None)
    rc, report, _ = preflight(
        patched.env, "--launch-cmd", patched.cmd().replace(str(patched.python), str(bare))
    )
    assert rc == 69
    for check_id in ("launch.program", "spec.lm_head_shared", "lm_head.fp8"):
        assert check(report, check_id)["status"] == "error", check_id
    assert {"spec.lm_head_shared", "lm_head.fp8"} <= set(report["coverage"]["not_proven"])


# ---- info and the platform -------------------------------------------------------------------------


def test_info_prints_as_info_and_never_fails_strict(patched: Server) -> None:
    """host.platform on a host that is not a DGX Spark used to print WARN and fail --strict."""
    rc, report, err = preflight(patched.env, "--launch-cmd", patched.cmd(), "--strict")
    assert rc == 0, (err, [c for c in report["checks"] if c["status"] not in ("pass", "skip")])
    platform = check(report, "host.platform")
    assert platform["status"] == "info" and "not a DGX Spark" in platform["message"]
    rc, text, _ = preflight(patched.env, "--launch-cmd", patched.cmd(), "--strict", fmt="text")
    row = next(line for line in text.splitlines() if "host.platform" in line)
    assert row.split()[0] == "INFO"
    assert not any(line.split()[:1] == ["WARN"] for line in text.splitlines())


def test_gb10_limits_do_not_apply_off_a_spark(patched: Server) -> None:
    rc, report, _ = preflight(patched.env, "--launch-cmd", patched.cmd("--mem-fraction-static", "0.9"))
    mem = check(report, "host.mem_fraction")
    assert mem["status"] == "skip" and "DGX Spark" in mem["message"]
    assert rc == 0


# ---- what the recipe writes ------------------------------------------------------------------------


def test_the_shipped_units_sglang_args_is_not_undeclared(patched: Server, tmp_path: Path) -> None:
    """deploy/systemd/sglang.service builds the command line from $SGLANG_ARGS: that variable is not an
    undeclared SGLang setting "silently ignored"."""
    deploy = REPO / "deploy" / "systemd"
    env_file = tmp_path / "sglang.env"
    env_file.write_text(
        (deploy / "sglang.env.example")
        .read_text()
        .replace("/models/Ling-3.0-flash-fp4", str(patched.model))
        .replace("/var/cache/humming", patched.env["HUMMING_CACHE_DIR"])
        + f"HUMMING_TMP_DIR={patched.env['HUMMING_TMP_DIR']}\n"
    )
    unit = tmp_path / "sglang.service"
    lines = []
    for line in (deploy / "sglang.service").read_text().splitlines():
        if line.startswith(("User=", "Group=")):
            continue  # the test host has no sglang account
        line = line.replace("/etc/sglang/sglang.env", str(env_file))
        lines.append(line.replace("/opt/sglang/venv/bin/python", str(patched.python)))
    unit.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in patched.env.items() if not k.startswith(("SGLANG_", "HUMMING_"))}
    rc, report, err = preflight(env, "--unit", str(unit))
    undeclared = check(report, "env.undeclared")
    assert "SGLANG_ARGS" not in undeclared["message"], undeclared
    assert undeclared["status"] == "pass"
    assert rc == 0, (err, [c for c in report["checks"] if c["status"] not in ("pass", "skip", "info")])


def test_eagle_with_the_nextn_layer_is_the_recipe(patched: Server) -> None:
    """SGLang 0.5.23 resolves NEXTN to EAGLE: EAGLE with the model's own NEXTN layer runs the same."""
    eagle = patched.cmd().replace("--speculative-algorithm NEXTN", "--speculative-algorithm EAGLE")
    rc, report, _ = preflight(patched.env, "--launch-cmd", eagle)
    spec = check(report, "spec.config")
    assert spec["status"] == "pass" and "NEXTN" in spec["message"] and "EAGLE" in spec["message"]
    assert rc == 0
    other = eagle.replace(
        f"--speculative-draft-model-path {patched.model}", "--speculative-draft-model-path /x"
    )
    rc, report, _ = preflight(patched.env, "--launch-cmd", other)
    assert check(report, "spec.config")["status"] == "fail" and rc == 78


# ---- the plugin's remedy ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env,credited",
    [
        ({"SPARK_VALIDATE_SHARE_LM_HEAD": "1"}, True),
        ({"SPARK_VALIDATE_SHARE_LM_HEAD": "on"}, True),  # the plugin accepts it
        ({"SPARK_VALIDATE_SHARE_LM_HEAD": "y"}, False),  # the plugin does not
        ({"SPARK_VALIDATE_SHARE_LM_HEAD": "1", "SPARK_VALIDATE_PLUGIN": "0"}, False),
        ({"SPARK_VALIDATE_SHARE_LM_HEAD": "1", "SGLANG_PLUGINS": "other_plugin"}, False),
        ({"SPARK_VALIDATE_SHARE_LM_HEAD": "1", "SGLANG_PLUGINS": ""}, True),  # empty: all plugins load
    ],
)
def test_the_plugins_remedy_is_credited_only_when_it_will_run(
    stock_with_plugin: Server, env: dict[str, str], credited: bool
) -> None:
    """SPARK_VALIDATE_PLUGIN=0 with the remedy requested used to pass ("the plugin adds it at load")."""
    rc, report, _ = preflight({**stock_with_plugin.env, **env}, "--launch-cmd", stock_with_plugin.cmd())
    shared = check(report, "spec.lm_head_shared")
    assert shared["status"] == ("pass" if credited else "fail"), shared
    if not credited:
        assert rc == 78
    else:
        assert "plugin" in shared["message"]


# ---- live ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    # --enable-metrics: the replies carry first_token_latency, which the timing proxy scales
    with sim_process(tmp_path_factory.mktemp("sim"), "--enable-metrics") as sim:
        yield sim


@pytest.fixture(scope="module")
def healthy_inproc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessSim]:
    """The same server for the verdict-only tests: the real ``check`` front door in this process against
    the ``sim`` command's own server (tests/support/in_process.py, held to real processes by
    tests/test_live_in_process.py)."""
    with sim_in_process(tmp_path_factory.mktemp("inproc"), "--enable-metrics") as sim:
        yield sim


def test_http_alone_cannot_prove_the_draft_head_and_says_what_would(healthy_inproc: InProcessSim) -> None:
    """Without the plugin's attestation the draft head's identity is not proven: that used to be a
    warning under a PASS verdict."""
    healthy = healthy_inproc
    run = check_in_process(healthy, "--wait", "20", "--log", str(healthy.log))
    run.inconclusive()
    assert run.check("spec.lm_head_shared")["status"] == "error"
    cov = run.report["coverage"]
    assert cov["not_proven"] == ["spec.lm_head_shared"]
    assert "--attestation" in cov["missing"][0]["input"]
    partial = check_in_process(healthy, "--wait", "20", "--log", str(healthy.log), "--allow-partial")
    assert partial.rc == 0, partial.explain()
    assert partial.report is not None and partial.report["partial"] is True
    assert partial.report["verdict"] == "pass"
    proven = check_in_process(healthy, "--wait", "20", *evidence_files(healthy))
    assert proven.rc == 0, proven.explain()
    assert proven.report is not None and proven.report["partial"] is False


def _check_rows(stdout: str) -> list[str]:
    """The text report's check lines (the coverage line sums them up after the verdict)."""
    return [
        line
        for line in stdout.split("\nverdict:")[0].splitlines()
        if line.startswith("  ") and line[2:6].strip()
    ]


def _said_once(stdout: str, cause: str) -> None:
    """One fault, one line: ``server.ready`` is the only ERR row and says ``cause``; every check that needs
    the server is folded under it by name, none repeats the cause or blames the attestation."""
    rows = _check_rows(stdout)
    errors = [r for r in rows if r.lstrip().startswith("ERR")]
    assert len(errors) == 1 and "server.ready" in errors[0] and cause in errors[0], stdout
    body = stdout.split("\nverdict:")[0]
    assert body.count(cause) == 1, stdout
    for folded in ("moe.backend", "lm_head.fp8", "spec.lm_head_shared", "spec.accept_length"):
        assert folded in body, (folded, stdout)
    assert "stale or untrusted" not in stdout and "see server.ready" not in stdout, stdout
    coverage = stdout.rstrip().splitlines()[-1]
    assert coverage.count(cause) == 1 and "that need it" in coverage, coverage


def test_an_unreachable_server_is_said_once(tmp_path: Path) -> None:
    """A missing API key used to be repeated on every check's line, and with --attestation the two
    attestation checks blamed a "stale or untrusted" attestation for the 401."""
    key = tmp_path / "key"
    key.write_text("the-right-key-1234\n")
    with sim_in_process(tmp_path, "--api-key-file", str(key)) as sim:
        run = check_in_process(sim, "--wait", "20", "--attestation", str(sim.attestation), fmt="text")
    assert run.rc == 69
    _said_once(run.stdout, "needs an API key and none was given")
    assert "--api-key-file" in _check_rows(run.stdout)[0]


def test_a_dead_port_and_a_reply_that_is_not_json_are_said_once(tmp_path: Path) -> None:
    from tests.support.loopback import free_port

    dead = run_check(f"http://127.0.0.1:{free_port()}", "--wait", "1", fmt="text")
    assert dead.rc == 69
    _said_once(dead.stdout, "connection failed")
    # the JSON report carries the same structure: each folded check names its root cause
    report = run_check(f"http://127.0.0.1:{free_port()}", "--wait", "1").report
    assert report is not None
    causes = {c["id"]: c["caused_by"] for c in report["checks"] if c["status"] == "error"}
    assert causes.pop("server.ready") is None and causes and set(causes.values()) == {"server.ready"}
    with sim_in_process(tmp_path, "--scenario", "malformed-json") as sim:
        bad = check_in_process(sim, "--wait", "5", fmt="text")
    assert bad.rc == 69
    _said_once(bad.stdout, "invalid JSON")


def _tpot(run: CheckRun) -> dict[str, Any]:
    return run.check("perf.tpot")


def test_tpot_floor_does_not_move_with_acceptance(tmp_path: Path) -> None:
    """The floor used to be divided by the acceptance length: a broken draft (accept 1.00) got a floor
    four times higher and passed. Now the time per verify round is held to one fixed floor."""
    floors = {}
    for scenario in ("healthy", "draft-head-weight-only"):
        # real processes: the subject is a timing the client measures (see tests/support/in_process.py)
        with sim_process(tmp_path, "--scenario", scenario) as sim:
            run = run_check(sim.url, "--wait", "20", *evidence_files(sim))
        tpot = _tpot(run)
        floors[scenario] = tpot["evidence"]["floor_round_ms"]
        assert tpot["status"] == "pass", tpot
        assert "per verify round" in tpot["message"]
    assert floors["healthy"] == floors["draft-head-weight-only"]


def test_tpot_below_what_the_hardware_can_do_is_called_out(healthy: SimProcess) -> None:
    """A TPOT below the bandwidth floor used to pass ("within 3x of the floor"): it is evidence that the
    timing is wrong, not a fast server."""
    with timing_proxy(healthy.url, 0.1) as url:
        run = run_check(url, "--wait", "20")
    tpot = _tpot(run)
    assert tpot["status"] == "warn", tpot  # a warning-severity check's failure
    assert "faster than the hardware" in tpot["message"] and "timing" in tpot["message"]
