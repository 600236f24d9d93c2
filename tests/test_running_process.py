"""`check` with no --url: the servers running on this host are found from /proc and judged by their real
argv and environment, together with the live checks on their port.

The servers are real processes: the simulator (``python -m validator sim``), also behind ``spark-validate
launch --`` (which execs it, keeping the PID), started with the environment each test sets. Other
servers may run on the same host while the suite runs (other checkouts' tests): each test picks its own
reports by PID.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import web
from tests.support.cli import REPO, run_cli
from tests.support.fake_server import LISTENS
from tests.support.in_process import cli_in_process
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.namespaces import in_pid_namespace
from validator.sources.host.server_command import use_stand_ins

use_stand_ins()  # as the front doors do: the tests below call the readers directly
SIM_FLAGS = ["--speed", "1000", "--startup-seconds", "0.2"]
FP8 = {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}


@contextmanager
def running_sim(
    tmp: Path, *sim_args: str, env: dict[str, str] | None = None, launch: bool = False
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A simulator process on a free port with ``env`` added to this environment; through ``spark-validate
    launch --allow-partial --`` when ``launch`` (its preflight cannot prove the simulator's install)."""
    port = free_port()
    att = tmp / f"run-{port}" / "attestation.json"
    cmd = [sys.executable, "-m", "validator", "sim", "--port", str(port), *SIM_FLAGS, *sim_args]
    if launch:
        cmd = [
            sys.executable,
            "-m",
            "validator",
            "launch",
            "--allow-partial",
            "--report-to",
            "none",
            "--",
            *cmd,
        ]
    full = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_VALIDATE_ATTESTATION": str(att), **(env or {})}
    for name in FP8:
        if env is None or name not in env:
            full.pop(name, None)
    proc = subprocess.Popen(cmd, cwd=REPO, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port, proc, what="simulator", timeout=30)
        yield proc, port
    finally:
        stop(proc)


def reports(stdout: str) -> list[dict[str, Any]]:
    data = json.loads(stdout)
    return data if isinstance(data, list) else [data]


def report_for(stdout: str, pid: int) -> dict[str, Any]:
    mine = [r for r in reports(stdout) if str(r.get("target", "")).startswith(f"PID {pid} ")]
    assert len(mine) == 1, [r.get("target") for r in reports(stdout)]
    return mine[0]


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report["checks"]}


def test_check_with_no_arguments_finds_each_server_and_judges_its_real_environment(tmp_path: Path) -> None:
    with running_sim(tmp_path, env=FP8) as (good, good_port), running_sim(tmp_path) as (bare, _):
        result = cli_in_process("check", "--no-probe", "--format", "json")
        assert result.returncode in (69, 78), result.stderr
        ok, unset = report_for(result.stdout, good.pid), report_for(result.stdout, bare.pid)
    assert ok["target"] == f"PID {good.pid} (http://127.0.0.1:{good_port})"
    checks = by_id(ok)
    assert checks["server.process"]["evidence"]["pid"] == good.pid
    assert checks["server.ready"]["status"] == "pass"
    assert checks["moe.backend"]["status"] == "pass"
    assert "running process" in checks["moe.backend"]["message"]
    assert checks["lm_head.fp8"]["status"] == "pass"
    # the same simulator without the variable in its environment: the process's environment is judged
    head = by_id(unset)["lm_head.fp8"]
    assert head["status"] == "fail", head
    assert "running process" in head["message"]


def test_pid_picks_one_server_and_its_argv_is_judged(tmp_path: Path) -> None:
    with running_sim(tmp_path, "--scenario", "backend-auto", env=FP8) as (proc, _):
        result = cli_in_process("check", "--no-probe", "--format", "json", "--pid", str(proc.pid))
    assert result.returncode == 78, result.stderr
    report = json.loads(result.stdout)
    assert isinstance(report, dict) and report["target"].startswith(f"PID {proc.pid} ")
    backend = by_id(report)["moe.backend"]
    assert backend["status"] == "fail"
    assert "running process" in backend["message"]


def test_pid_of_no_server_is_exit_69_naming_what_was_found() -> None:
    result = run_cli("check", "--pid", str(os.getpid()), "--no-probe", timeout=60)
    assert result.returncode == 69
    assert f"--pid {os.getpid()}" in result.stderr or "no SGLang server process found" in result.stderr
    assert "Traceback" not in result.stderr


def _statuses(stdout: str) -> tuple[str, dict[str, str]]:
    report = json.loads(stdout)
    return report["target"], {c["id"]: c["status"] for c in report["checks"]}


def test_an_in_process_check_of_a_running_server_is_the_real_processes(tmp_path: Path) -> None:
    """The tests here run ``check --pid`` in this process (``cli_in_process``) where the subject is the
    report: against one running server and a unit that declares another value, the real process and the
    in-process run give the same exit code, stderr, target, every check's status and the drift message."""
    with running_sim(tmp_path, env=FP8) as (proc, port):
        unit = _unit(tmp_path / "sglang.service", port, env="SGLANG_ENABLE_FP8_LM_HEAD=1", mem="0.65")
        argv = ("check", "--no-probe", "--format", "json", "--pid", str(proc.pid), "--unit", str(unit))
        real, here = run_cli(*argv, timeout=60), cli_in_process(*argv)
    assert (here.returncode, here.stderr) == (real.returncode, real.stderr), (real.stderr, here.stderr)
    assert _statuses(here.stdout) == _statuses(real.stdout)
    assert _statuses(real.stdout)[1]["launch.drift"] == "warn"
    drift = [by_id(json.loads(r.stdout))["launch.drift"]["message"] for r in (real, here)]
    assert drift[0] == drift[1] and "--mem-fraction-static: declared 0.65, running 0.6" in drift[0]


def test_launch_wrapped_simulator_keeps_its_pid_and_is_found(tmp_path: Path) -> None:
    with running_sim(tmp_path, env=FP8, launch=True) as (proc, port):
        result = cli_in_process("check", "--no-probe", "--format", "json", "--pid", str(proc.pid))
    report = json.loads(result.stdout)
    assert report["target"] == f"PID {proc.pid} (http://127.0.0.1:{port})"
    checks = by_id(report)
    assert checks["server.process"]["evidence"]["pid"] == proc.pid
    assert checks["server.ready"]["status"] == "pass"
    assert checks["lm_head.fp8"]["status"] == "pass"


def _unit(path: Path, port: int, *, env: str = "", mem: str = "0.6") -> Path:
    from validator.sim import scenarios
    from validator.sim.server_args import launch_argv

    args = launch_argv(scenarios.resolve(["healthy"]), host="127.0.0.1", port=port, api_key=None)
    args[args.index("--mem-fraction-static") + 1] = mem
    att = path.parent / f"run-{port}" / "attestation.json"  # where running_sim's simulator attests
    path.write_text(
        f"[Service]\nEnvironment=SPARK_VALIDATE_ATTESTATION={att}\n" + (f"Environment={env}\n" if env else "")
        + "ExecStart=python -m sglang.launch_server " + " ".join(args) + "\n"
    )  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("env", "mem", "status", "changes"),
    [
        ("SGLANG_ENABLE_FP8_LM_HEAD=1", "0.6", "pass", None),  # the unit declares what runs
        ("SGLANG_ENABLE_FP8_LM_HEAD=1", "0.65", "warn", None),  # a difference no check turns on
        ("", "0.6", "fail", "lm_head.fp8"),  # the unit lost the variable: a restart drops the FP8 head
    ],
)
def test_drift_between_the_running_process_and_its_unit(
    tmp_path: Path, env: str, mem: str, status: str, changes: str | None
) -> None:
    with running_sim(tmp_path, env=FP8) as (proc, port):
        unit = _unit(tmp_path / "sglang.service", port, env=env, mem=mem)
        result = cli_in_process(
            "check", "--no-probe", "--format", "json", "--pid", str(proc.pid), "--unit", str(unit)
        )
    drift = by_id(json.loads(result.stdout))["launch.drift"]
    assert drift["status"] == status, drift
    if status != "pass":
        assert str(proc.pid) in drift["message"]
    if changes is not None:
        assert changes in drift["evidence"]["changes_checks"]
        assert "$SGLANG_ENABLE_FP8_LM_HEAD: declared (unset), running '1'" in drift["message"]
        assert result.returncode == 78
    if mem != "0.6":
        assert "--mem-fraction-static: declared 0.65, running 0.6" in drift["message"]


def test_a_credential_that_drifted_is_named_without_its_values(tmp_path: Path) -> None:
    secret = "hf_" + "Q" * 30
    with running_sim(tmp_path, env={**FP8, "HF_TOKEN": secret}) as (proc, port):
        unit = _unit(
            tmp_path / "sglang.service", port, env="SGLANG_ENABLE_FP8_LM_HEAD=1 HF_TOKEN=hf_other1234"
        )
        result = cli_in_process("check", "--no-probe", "--pid", str(proc.pid), "--unit", str(unit))
    assert "$HF_TOKEN: differs (a credential: values not shown)" in result.stdout
    assert secret not in result.stdout + result.stderr and "hf_other1234" not in result.stdout


def test_a_declaration_needs_the_process_not_a_url() -> None:
    result = run_cli("check", "--url", "http://127.0.0.1:9", "--unit", "/nonexistent.service", timeout=30)
    assert result.returncode == 2
    assert "--unit" in result.stderr and "Traceback" not in result.stderr


def test_nothing_found_in_another_pid_namespace_is_exit_69_saying_what_was_looked_for() -> None:
    """``unshare --pid --mount-proc``: the check sees only its own namespace's processes (root in CI)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        in_pid_namespace([sys.executable, "-m", "validator", "check"]),
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 69, result.stderr
    assert "no SGLang server process found" in result.stderr
    assert "python -m sglang.launch_server" in result.stderr and "Traceback" not in result.stderr


# --- bad input and limits, read directly ---------------------------------------------------------------


def test_a_process_that_exits_is_process_gone_not_a_traceback() -> None:
    from validator.sources.host.process import ProcessGone, read_process

    child = subprocess.Popen(["true"])
    child.wait(timeout=10)
    with pytest.raises(ProcessGone):
        read_process(child.pid)


def test_discovery_survives_processes_exiting_while_it_reads() -> None:
    from validator.sources.host.server_processes import discover

    churn = [subprocess.Popen(["sh", "-c", "sleep 0.0$((RANDOM % 9))"]) for _ in range(60)]
    try:
        for _ in range(10):
            discover()  # never raises for a process that exits between its reads
            churn = [p if p.poll() is None else subprocess.Popen(["sh", "-c", "exit 0"]) for p in churn]
    finally:
        for p in churn:
            p.wait(timeout=10)


_TCP_HEAD = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
)
# 0.0.0.0:30000 (0x7530) listening (0A), created by UID 0, inode 424242
_TCP_LISTEN = (
    "   0: 00000000:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 424242\n"
)


def _fake_proc(root: Path, count: int, server_pid: int, decoy_pid: int | None = None) -> None:
    """A /proc-shaped tree: ``count`` processes, one of them an SGLang server holding the listening socket
    on its port, and (``decoy_pid``) one with the same argv that holds no socket."""
    (root / "stat").write_text("cpu 0\nbtime 1700000000\n")
    (root / "net").mkdir()  # the reader's own network namespace: the server's (the same socket is seen)
    (root / "net" / "tcp").write_text(_TCP_HEAD + _TCP_LISTEN)
    for pid in range(2, count + 2):
        d = root / str(pid)
        d.mkdir()
        argv = ["sleep", "100"]
        if pid in (server_pid, decoy_pid):
            argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30000"]
            (d / "fd").mkdir()
            (d / "net").mkdir()
            (d / "net" / "tcp").write_text(_TCP_HEAD + _TCP_LISTEN)
            if pid == server_pid:
                (d / "fd" / "3").symlink_to("socket:[424242]")
            (d / "environ").write_bytes(b"SGLANG_ENABLE_FP8_LM_HEAD=1\0")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (d / "stat").write_text(
            f"{pid} (x y) S 1 {pid} {pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {pid * 10} 0 0\n"
        )


def test_thousands_of_processes_are_read_within_bounds(tmp_path: Path) -> None:
    from validator.sources.host.server_processes import discover

    _fake_proc(tmp_path, 5000, server_pid=4321, decoy_pid=1234)
    t0 = time.monotonic()
    found = discover(tmp_path)
    elapsed = time.monotonic() - t0
    assert [s.process.pid for s in found.servers] == [4321]
    assert found.servers[0].url == "http://127.0.0.1:30000"
    # the same argv and --port with no socket of its own: listed, never judged
    assert [(i.pid, i.kind) for i in found.ignored] == [(1234, "not-listening")]
    assert found.servers[0].process.env == {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    assert found.processes == 5000 and elapsed < 10
    capped = discover(tmp_path, limit=100)
    assert capped.truncated and "more than 100 processes" in capped.errors[0]


# --- another user's server, read by a third, unprivileged user (CI runs as root: both are created) -----

READER = "sv-reader"


def _reader() -> Any:
    from tests.support.second_user import ensure_user

    return ensure_user(READER)


@contextmanager
def others_server() -> Iterator[tuple[subprocess.Popen[bytes], Any]]:
    """``python3 -m sglang.launch_server ...`` run by the second user (``setpriv``): the system python
    runs a module named so from a world-readable directory, which holds the listening socket on its
    ``--port`` and sleeps. Its argv and environment are a server's; its environment is the second user's
    to read."""
    from tests.support.fake_server import process_as, server_argv, sglang_tree
    from tests.support.second_user import ensure_user

    owner = ensure_user()
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    with (
        sglang_tree() as top,
        process_as(
            owner, server_argv(port), cwd=top, env=env, listen=port, prefix=b"/usr/bin/python3\0-m\0sglang"
        ) as proc,
    ):
        yield proc, owner


def _packs() -> dict[str, Any]:
    """The built-in pack and one whose FP8 switch is another variable (no list of names in the reader
    knows it), loaded by the test's own user: the reader's child may not be able to read the checkout's
    package data (a clone under a 0700 home), and the subject is what it makes of the process."""
    from dataclasses import replace

    from validator.rulepack import LoadedPack, load_pack

    ling = load_pack(None)
    acme = LoadedPack(
        replace(ling.pack, expect=replace(ling.pack.expect, fp8_lm_head_env="ACME_FP8_HEAD")), ling.path
    )
    return {"ling": ling, "acme": acme}


def _read_as_reader(pid: int, packs: dict[str, Any]) -> dict[str, Any]:
    """What the third user learns of the server: its argv, no environment (why), and what preflight
    makes of a variable it cannot see."""
    from validator.engine import run_checks
    from validator.preflight import gather
    from validator.preflight_inputs import PreflightInputs
    from validator.sources.host.server_processes import discover

    owner = os.stat(f"/proc/{pid}").st_uid
    unnamed = discover()  # another user's process, its user not named: listed as ignored, never judged
    assert pid not in [s.process.pid for s in unnamed.servers]
    assert [i.kind for i in unnamed.ignored if i.pid == pid] == ["other-user"]
    found = [s for s in discover(users=[owner]).servers if s.process.pid == pid]
    server = found[0]
    facts = gather(PreflightInputs(running=server))
    assert facts.launch is not None
    fp8 = {}
    for name, loaded in packs.items():
        results = run_checks(facts, loaded, mode="preflight")
        fp8[name] = next(r for r in results if r.id == "lm_head.fp8")
    return {
        "argv": server.process.argv,
        "env": server.process.env,
        "env_error": server.process.env_error,
        "sockets_error": server.sockets_error,
        "unresolved": sorted(facts.launch.unresolved),
        "lm_head.fp8": {k: (r.status.value, r.message) for k, r in fp8.items()},
    }


def test_another_users_environment_is_said_unreadable_and_never_judged_empty() -> None:
    from tests.support.second_user import call_as

    packs = _packs()
    with others_server() as (proc, owner):
        # as root first: the reader's child cannot import this checkout's modules from under /root
        assert _read_as_reader(proc.pid, packs)["env"] == {
            "PATH": "/usr/bin:/bin",
            "SGLANG_ENABLE_FP8_LM_HEAD": "1",
        }
        seen = call_as(_reader(), lambda: _read_as_reader(proc.pid, packs), timeout=60)
    assert seen["argv"][1:3] == ["-m", "sglang.launch_server"]
    assert seen["env"] is None
    assert "permission denied" in seen["env_error"] and owner.name in seen["env_error"]
    assert seen["unresolved"] == ["environment"]
    for pack, (status, message) in seen["lm_head.fp8"].items():  # not proven, never "not set"
        assert status == "error" and message.startswith("not provable statically: environment: "), pack
    assert "ACME_FP8_HEAD" in seen["lm_head.fp8"]["acme"][1]


def test_hidepid_hides_the_server_and_the_answer_says_so(tmp_path: Path) -> None:
    """A proc mount with ``hidepid=2``: the reader sees only its own processes, and the listening socket
    the server's user holds is named with the mount option."""
    import tempfile

    from tests.support.prerequisite import needs_root
    from tests.support.second_user import call_as
    from validator.sources.host.server_processes import discover, nothing_found

    needs_root("a proc mount with hidepid=2 (mount -t proc)")
    hidden = Path(tempfile.mkdtemp(prefix="sv-hidepid-"))  # the reader must reach it (not under /root)
    os.chmod(hidden, 0o755)
    subprocess.run(["mount", "-t", "proc", "-o", "hidepid=2", "proc", str(hidden)], check=True, timeout=30)
    try:
        with running_sim(tmp_path, env=FP8) as (proc, port):

            def look() -> tuple[list[int], str]:
                found = discover(hidden)
                return [s.process.pid for s in found.servers], nothing_found(found, hidden)

            look()  # imports what the reader's child cannot load from under /root
            pids, why = call_as(_reader(), look, timeout=60)
    finally:
        subprocess.run(["umount", str(hidden)], check=False, timeout=30)
        hidden.rmdir()
    assert proc.pid not in pids
    assert "hidepid" in why
    # the answer names at most 8 hidden ports (lowest first): other tests' listeners may come before ours
    named = f"{port} (UID 0)" in why
    assert named or re.search(r"and \d+ more", why), why


def test_sidecar_without_url_follows_the_process_and_notices_a_restart(tmp_path: Path) -> None:
    """``serve`` with no ``--url``: it finds the server process, is ready once its checks pass, drops
    readiness when the process goes, and judges the restarted process (a new PID and start time) on the
    same port, whatever /server_info says about the start."""
    import httpx

    def get(path: str) -> Any:
        return web.get(f"http://127.0.0.1:{listen}{path}", timeout=5).json()

    def wait(pred: Any, what: str, timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if pred():
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; sidecar log: {log.read_text()[-2000:]}")

    listen, log = free_port(), tmp_path / "sidecar.out"
    port = free_port()
    first_pid = 0
    env = {**os.environ, "PYTHONPATH": str(REPO), **FP8}
    sim = [sys.executable, "-m", "validator", "sim", "--port", str(port), *SIM_FLAGS]
    server = subprocess.Popen(sim, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, server, what="simulator", timeout=30)
        first_pid = server.pid
        argv = [sys.executable, "-m", "validator", "serve", "--pid", str(first_pid), "--listen"]
        argv += [f"127.0.0.1:{listen}", "--allow-partial", "--no-probe", "--interval", "1"]
        argv += ["--health-interval", "0.5"]
        with log.open("wb") as fh:
            sidecar = subprocess.Popen(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        try:
            wait(lambda: get("/readyz")["ready"], "the first pass")
            report = get("/report")
            assert str(report["target"]).startswith(f"PID {first_pid} "), report
            stop(server)
            wait(lambda: not get("/readyz")["ready"], "readiness to drop with the process")
            server = subprocess.Popen(
                sim, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            wait_listening(port, server, what="restarted simulator", timeout=30)
            wait(
                lambda: str(get("/report").get("target")).startswith(f"PID {server.pid} "),
                "the new process judged",
            )
            wait(lambda: get("/readyz")["ready"], "readiness back on the restarted server")
        finally:
            stop(sidecar)
    finally:
        stop(server)
    assert server.pid != first_pid


@pytest.mark.parametrize(
    ("text", "unit", "user_unit", "container"),
    [
        ("0::/system.slice/sglang.service\n", "sglang.service", False, None),
        ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/sglang.service\n",
         "sglang.service", True, None),
        ("0::/system.slice/docker-" + "a" * 64 + ".scope\n", None, False, "a" * 64),
        ("0::/machine.slice/libpod-" + "b" * 64 + ".scope/container\n", None, False, "b" * 64),
        ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-"
         + "c" * 64 + ".scope\n", None, False, "c" * 64),
        ("12:pids:/docker/" + "d" * 64 + "\n1:name=systemd:/docker/" + "d" * 64 + "\n",
         None, False, "d" * 64),
        ("0::/\n", None, False, None),
    ],
)  # fmt: skip
def test_the_cgroup_names_the_unit_or_the_container(
    text: str, unit: str | None, user_unit: bool, container: str | None
) -> None:
    from validator.sources.host.process import parse_cgroup

    _, got_unit, got_user, got_container = parse_cgroup(text)
    assert (got_unit, got_user, got_container) == (unit, user_unit, container)


def test_a_program_replaced_since_the_start_is_drift_even_without_a_declaration(tmp_path: Path) -> None:
    """The server's interpreter file is removed after it started (an upgrade in place): /proc/PID/exe says
    ``(deleted)``, and launch.drift warns that what runs is no longer what a restart would run."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="sv-exe-"))
    try:
        python = top / "python3"
        shutil.copy2(os.path.realpath(sys.executable), python)
        (top / "sglang").mkdir()
        (top / "sglang" / "__init__.py").write_text("")
        (top / "sglang" / "launch_server.py").write_text(LISTENS)  # a server holds its port's socket
        env = {"PATH": "/usr/bin:/bin", "PYTHONHOME": sys.base_prefix}
        port = free_port()
        cmd = [str(python), "-m", "sglang.launch_server", "--model-path", "/m", "--port", str(port)]
        proc = subprocess.Popen(cmd, cwd=top, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_listening(port, proc, what="server", timeout=30)
            python.unlink()
            result = cli_in_process("check", "--no-probe", "--format", "json", "--pid", str(proc.pid))
        finally:
            stop(proc)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    drift = by_id(json.loads(result.stdout))["launch.drift"]
    assert drift["status"] == "warn", drift
    assert f"program: {python} was replaced or removed since the process started" in drift["message"]


def test_drift_against_a_launch_command(tmp_path: Path) -> None:
    """--launch-cmd as the declaration: the arguments compared as SGLang parses them (order and
    ``--flag=value`` do not count, a changed value does)."""
    from validator.sim import scenarios
    from validator.sim.server_args import launch_argv

    with running_sim(tmp_path, env=FP8) as (proc, port):
        args = launch_argv(scenarios.resolve(["healthy"]), host="127.0.0.1", port=port, api_key=None)
        same = ["--port=" + str(port) if a == str(port) else a for a in args]
        same = [a for a in same if a != "--port"]
        reordered = same[2:] + same[:2]
        att = tmp_path / f"run-{port}" / "attestation.json"
        prefix = (
            f"SPARK_VALIDATE_ATTESTATION={att} SGLANG_ENABLE_FP8_LM_HEAD=1 python -m sglang.launch_server "
        )
        outcomes = {}
        for name, words in (("same", reordered), ("other", [*reordered, "--speculative-num-steps", "2"])):
            result = cli_in_process(
                "check", "--no-probe", "--format", "json", "--pid", str(proc.pid),
                "--launch-cmd", prefix + " ".join(words),
            )  # fmt: skip
            outcomes[name] = by_id(json.loads(result.stdout))["launch.drift"]
    assert outcomes["same"]["status"] == "pass", outcomes["same"]
    other = outcomes["other"]
    assert other["status"] == "fail", other  # a restart would run 2 steps: spec.config would fail
    assert "--speculative-num-steps: declared 2, running 3" in other["message"]
    assert "spec.config" in other["evidence"]["changes_checks"]


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["python3", "-m", "sglang.launch_server", "--model-path", "/m"], "sglang"),
        (["/v/bin/python3", "-Im", "sglang.launch_server", "--model-path", "/m"], "sglang"),
        (["/v/bin/sglang", "serve", "--model-path", "/m"], "sglang"),
        (["/v/bin/python3", "/v/bin/sglang", "serve", "/m"], "sglang"),  # a console script via its #!
        (["/v/bin/python3", "/v/bin/spark-validate", "launch", "--", "python3", "-m", "sglang.launch_server"],
         "launch"),
        (["python3", "-m", "validator", "launch", "--", "python3", "-m", "sglang.launch_server"], "launch"),
        (["python3", "-m", "validator", "sim", "--port", "1"], "stand-in"),
        (["python3", "-m", "validator.sim", "--port", "1"], "stand-in"),
        (["/v/bin/python3", "/v/bin/spark-validate", "sim"], "stand-in"),
        (["python3", "-m", "validator", "check"], None),
        (["python3", "-c", "import sglang.launch_server"], None),
        (["/v/bin/sglang", "version"], None),
        (["bash", "-c", "python -m sglang.launch_server --model-path /m"], None),  # its child is the server
        (["spark-validate", "launch", "--", "sleep", "60"], None),
    ],
)  # fmt: skip
def test_which_argv_is_a_server(argv: list[str], kind: str | None) -> None:
    from validator.sources.host.server_command import classify

    found = classify(argv)
    assert (found[0] if found else None) == kind


def test_drift_against_a_launcher_script(tmp_path: Path) -> None:
    """--script as the declaration: the script's exports are what a restart would start with; one it no
    longer exports (the FP8 head) is a failing drift, the same script with it passes."""
    from validator.sim import scenarios
    from validator.sim.server_args import launch_argv

    with running_sim(tmp_path, env=FP8) as (proc, port):
        args = launch_argv(scenarios.resolve(["healthy"]), host="127.0.0.1", port=port, api_key=None)
        att = tmp_path / f"run-{port}" / "attestation.json"
        outcomes = {}
        for name, exports in (("same", "export SGLANG_ENABLE_FP8_LM_HEAD=1\n"), ("lost", "")):
            script = tmp_path / f"start-{name}.sh"
            script.write_text(
                "#!/bin/bash\nset -euo pipefail\n"
                f"export SPARK_VALIDATE_ATTESTATION={att}\n{exports}"
                "exec python -m sglang.launch_server " + " ".join(args) + "\n"
            )
            result = cli_in_process(
                "check", "--no-probe", "--format", "json", "--pid", str(proc.pid), "--script", str(script)
            )  # fmt: skip
            outcomes[name] = by_id(json.loads(result.stdout))["launch.drift"]
    assert outcomes["same"]["status"] == "pass", outcomes["same"]
    lost = outcomes["lost"]
    assert lost["status"] == "fail" and "lm_head.fp8" in lost["evidence"]["changes_checks"], lost


def test_a_scan_stopped_at_its_deadline_says_so_before_the_processes_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "No server found" shows discovery's first five reasons. Another user's processes whose argv a
    reader refuses (here seven ``python3 -m validator sim --scenario no-such-one``) each add one, and
    the line saying the scan stopped at its deadline came after them: root read "no SGLang server process
    found among the N processes" with nothing saying most were never read. It is said first now. The
    clock is discovery's own, made to tick once per look (the deadline falls after the seventh)."""
    from validator.sources.host import server_processes

    (tmp_path / "stat").write_text("cpu 0\nbtime 1700000000\n")
    for pid in range(2, 12):
        d = tmp_path / str(pid)
        d.mkdir()
        argv = ["python3", "-m", "validator", "sim", "--scenario", "no-such-one"]
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (d / "stat").write_text(f"{pid} (python3) S 1 {pid} {pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0\n")
    ticks = iter(range(1_000))
    clock = SimpleNamespace(monotonic=lambda: float(next(ticks)), sleep=time.sleep)
    monkeypatch.setattr(server_processes, "time", clock)  # this module's clock only
    found = server_processes.discover(tmp_path, deadline_s=7.5)
    assert found.truncated
    assert len(found.errors) == 8, found.errors
    assert found.errors[0] == f"{tmp_path}: scanning 10 processes took over 7.5 s; stopped", found.errors
    assert all(e.startswith("process ") for e in found.errors[1:]), found.errors
    said = server_processes.nothing_found(found, tmp_path)
    assert "took over 7.5 s; stopped" in said, said
