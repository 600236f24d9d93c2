"""Small things an operator meets early, each from the command line: messages that contradict what was
given, help that offers what the command refuses, exit codes that mean something else. A live check's
report comes from the real ``check`` front door run in this process against the ``sim`` command's own server
(tests/support/in_process.py, held to real processes by tests/test_live_in_process.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.check_helpers import evidence_files
from tests.support.cli import run_cli
from tests.support.in_process import check_in_process, sim_in_process


def test_unreachable_server_with_url_never_says_no_url(tmp_path: Path) -> None:
    """``--url`` was given and the server behind it answers garbage: attestation.trust says the server did
    not answer, never "no URL to bind the document to (None)"."""
    with sim_in_process(tmp_path, "--scenario", "malformed-json") as sim:
        run = check_in_process(sim, "--wait", "3", "--no-probe", *evidence_files(sim))
    trust = run.check("attestation.trust")
    assert trust["status"] == "error", run.explain()
    assert "None" not in trust["message"] and "no URL" not in trust["message"], trust["message"]
    assert "did not answer" in trust["message"], trust["message"]


def test_serve_help_offers_only_what_serve_accepts() -> None:
    """``serve --help`` must not offer ``--rules auto``: serve refuses it (exit 2)."""
    helptext = run_cli("serve", "--help").stdout
    assert "'auto'" not in helptext and "or auto" not in helptext, helptext
    refused = run_cli("serve", "--rules", "auto", "--url", "http://127.0.0.1:9")
    assert refused.returncode == 2, refused.stderr
    assert "--rules auto" in refused.stderr
    for command in ("check", "preflight", "launch"):
        assert "'auto'" in run_cli(command, "--help").stdout, command


def test_demo_flaky_5xx_is_a_success_not_an_internal_error() -> None:
    """``demo --broken flaky-5xx``: the checks retry through the 503s; that is the right outcome, exit 0
    with the reason shown, not exit 1 (the internal-error code)."""
    run = run_cli("demo", "--broken", "flaky-5xx", "--speed", "200", timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    assert "flaky-5xx FAIL" not in run.stdout
    assert "transient 503s" in run.stdout
    assert run.stderr == ""


@pytest.mark.timeout(90)  # the bound the check process had: waiting out --wait fails this test
def test_a_dead_dspark_start_fails_spec_config_under_the_default_pack(tmp_path: Path) -> None:
    """Under the default (NEXTN) pack, a start that dies with DSPARK in its logged ``server_args`` is the
    wrong recipe: spec.config fails from the log (exit 78) instead of staying unjudged (69)."""
    # it dies while loading, before it binds its port (as a real launcher): nothing to wait for there
    with sim_in_process(tmp_path, "--scenario", "dspark-ring-16", startup=1.0, wait_listen=False) as sim:
        run = check_in_process(sim, "--wait", "120", "--log", str(sim.log))
    assert run.rc == 78, run.explain()
    config = run.check("spec.config")
    assert config["status"] == "fail" and config["sources"] == ["log"], run.explain()
    assert "algorithm is DSPARK, expected NEXTN" in config["message"], config["message"]
    assert "died" in config["message"], config["message"]
