"""Small things a fleet operator met in a week (issue 30, item 9), each from the command line: a message
that asks for what was given, numbers a person cannot read, two simulators sharing one file, a TP=2 demo
that could not pass, a recipe that warns under its own pack, a probe nobody asked for. Where the subject is
a live check's report, the real ``check`` front door runs in this process against the ``sim`` command's own
server (tests/support/in_process.py, held to real processes by tests/test_live_in_process.py); two
simulators' default attestation files and a timing verdict stay real processes."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

from tests.support.check_helpers import evidence_files, run_check
from tests.support.cli import json_report
from tests.support.in_process import check_in_process, preflight_in_process, sim_in_process
from tests.support.loopback import free_port
from tests.support.private_dir import trusted_copy
from tests.support.sim_process import sim_process

REPO = Path(__file__).resolve().parents[1]
TP2_PACK = REPO / "deploy" / "cluster" / "ling-3.0-flash-dgx-spark-tp2.yaml"


def test_launch_program_never_asks_for_the_launch_cmd_it_was_given() -> None:
    """``--launch-cmd`` whose interpreter cannot import sglang here: the coverage line says to run
    preflight where the server runs, not to give "the full launch command (--launch-cmd, ...)"."""
    cmd = f"{shlex.quote(sys.executable)} -I -m sglang.launch_server --model-path /m"
    out = preflight_in_process("--launch-cmd", cmd, "--format", "json")
    report = json_report(out.stdout)
    (missing,) = [m for m in report["coverage"]["missing"] if m["id"] == "launch.program"]
    assert "--launch-cmd" not in (missing["input"] or ""), missing
    assert "server's host" in missing["input"], missing


def test_messages_say_times_and_counts_as_a_person_reads_them(tmp_path: Path) -> None:
    """attestation.trust's start time is a UTC date, not epoch seconds; one probe reply is one reply."""
    with sim_in_process(tmp_path) as sim:
        run = check_in_process(sim, "--wait", "20", *evidence_files(sim))
    trust = run.check("attestation.trust")
    assert trust["status"] == "pass", run.explain()
    assert re.search(r"running since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", trust["message"]), trust["message"]
    assert not re.search(r"\b1\d{9}\.\d", trust["message"]), trust["message"]
    assert isinstance(trust["evidence"]["start_time"], float)  # the evidence keeps the machine's number
    from validator.checks.probe import probe_output
    from validator.facts import Facts, ProbeResult

    facts = Facts(mode="check")
    facts.probe = ProbeResult(
        accept_length=3.0, accept_rate=0.6, requests=1, completion_tokens=30, verify_ct=10, tpot_ms=9.0,
        ttft_ms=200.0,
    )  # fmt: skip
    assert probe_output(facts, None).message == "1 probe reply looks like text"  # type: ignore[arg-type]


def test_two_simulators_never_share_the_default_attestation(tmp_path: Path) -> None:
    """Without --attestation, each simulator writes where the plugin would, one file per port: the first
    server's check reads its own document, not the second's."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "RUNTIME_DIRECTORY": str(runtime)}
    env.pop("SPARK_VALIDATE_ATTESTATION", None)
    ports = [free_port(), free_port()]
    import subprocess

    from tests.support.loopback import stop, wait_listening
    from tests.support.sim_process import sim_command

    procs = []
    try:
        for port in ports:
            argv = sim_command(port, speed=1000.0, startup=0.2, extra=[])
            proc = subprocess.Popen(
                argv, cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs.append(proc)
            wait_listening(port, proc, what="simulator")
        files = {port: runtime / f"attestation.{port}.json" for port in ports}
        for port, path in files.items():
            run = run_check(
                f"http://127.0.0.1:{port}", "--wait", "20", "--no-probe", "--attestation", str(path)
            )
            assert run.check("attestation.trust")["status"] == "pass", run.explain()
        docs = [json.loads(path.read_text()) for path in files.values()]
        assert [d["server"]["port"] for d in docs] == ports
        assert not (runtime / "attestation.json").exists()
    finally:
        for proc in procs:
            stop(proc)


def test_the_tp2_head_simulator_attests_tp_2_and_passes_its_pack(tmp_path: Path) -> None:
    """The cluster demo: a TP=2 head's attestation says tp_size 2, and the cluster pack passes it."""
    env = ("SGLANG_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({"SGLANG_HOST_IP": "127.0.0.1", "NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"})
    try:
        launch = ["--", "--tp", "2", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr",
                  f"127.0.0.1:{free_port()}"]  # fmt: skip
        with sim_in_process(tmp_path, *launch) as sim:
            pack = trusted_copy(TP2_PACK, tmp_path / "pack")  # the checkout may be under /tmp
            run = check_in_process(sim, "--wait", "20", "--rules", str(pack), *evidence_files(sim))
            doc = json.loads(sim.attestation.read_text())
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert doc["process"]["tp_size"] == 2, doc["process"]
    assert run.rc == 0, run.explain()


def test_the_cookbook_scenario_passes_its_own_pack_without_a_warning(tmp_path: Path) -> None:
    """The cookbook cell runs at its published TPOT (9.48 ms), inside its pack's bound: no perf.tpot warn."""
    # real processes: the subject is a timing (the client's TTFT and TPOT), which the in-process harness
    # measures on a reply that comes whole, through one interpreter's lock
    with sim_process(tmp_path, "--scenario", "cookbook") as sim:
        run = run_check(sim.url, "--wait", "20", "--rules", "sglang-cookbook-dgx-spark", *evidence_files(sim))
    assert run.rc == 0, run.explain()
    assert run.with_status("warn") == set(), run.check("perf.tpot")


def test_a_check_that_reads_no_probe_spends_no_probe(tmp_path: Path) -> None:
    """``--check moe.backend`` runs no acceptance probe (no tokens generated); ``--check spec.accept_length``
    does."""
    with sim_in_process(tmp_path) as sim:
        only = check_in_process(sim, "--wait", "20", "--check", "moe.backend", *evidence_files(sim))
        probed = check_in_process(sim, "--wait", "20", "--check", "spec.accept_length", *evidence_files(sim))
    assert only.rc == 0 and only.check("moe.backend")["status"] == "pass", only.explain()
    assert only.report is not None and only.report["probe"] is None, only.report["probe"]
    assert probed.report is not None and probed.report["probe"] is not None
    assert probed.report["probe"]["requests"] >= 1


def test_the_status_pages_chart_draws_a_failing_probe_red(tmp_path: Path) -> None:
    """The sidecar's status page over the draft-head trap: each probe point (accept length 1.00, under
    the pack's 1.5) is drawn in the failing colour, never the passing green."""
    from tests.support.daemon_process import daemon_process, wait_for

    with (
        sim_process(tmp_path, "--scenario", "draft-head-weight-only") as sim,
        daemon_process(
            tmp_path, sim.url, "--interval", "1", "--probe-interval", "1", "--wait", "15"
        ) as sidecar,
    ):

        def points() -> list[str]:
            return re.findall(r"<circle [^>]*>", sidecar.get("/").text)

        assert wait_for(lambda: bool(points()), 60), sidecar.log()
        drawn = points()
    assert all('fill="#c62828"' in p and 'data-status="fail"' in p for p in drawn), drawn
