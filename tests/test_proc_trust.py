"""Evidence from /proc belongs to the server (issue 28 items 1-2, contract v4): another user's process is
never judged unless ``--server-user`` names its user, a process is judged only when it holds the listening
socket it serves on, and nothing of a discovered process runs with more privilege than its owner has.

Each attack is played by a real second local account (``tests.support.second_user``) inside a private PID
namespace (``unshare --pid --fork --mount-proc``, root in CI) so that ``npd`` and ``check`` with no
``--pid`` see only the scene's processes: root's healthy simulator (the control, judged and passing next
to every attack) and what the attacker started. The scenes themselves are ``tests.support.trust_scene``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from typing import Any

from tests.support.cli import REPO
from tests.support.namespaces import in_network_namespace, in_pid_namespace


@cache
def scene(name: str) -> dict[str, Any]:
    done = subprocess.run(
        in_pid_namespace([sys.executable, "-m", "tests.support.trust_scene", name]),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def targets(check: dict[str, Any]) -> list[str]:
    data = json.loads(check["out"])
    return [r["target"] for r in (data if isinstance(data, list) else [data])]


def test_a_decoy_with_the_servers_port_is_ignored_and_the_healthy_node_stays_ok() -> None:
    r = scene("decoy")
    decoy, mine, server = r["attacker"], r["same_user"], r["server"]
    # the control: the healthy simulator alone is OK/0 and check --allow-partial 0
    assert r["npd_alone"]["rc"] == 0 and r["npd_alone"]["out"].startswith("OK 1 server(s) pass")
    assert r["check_alone"]["rc"] == 0, r["check_alone"]["err"]
    # with another user's decoy and a same-user one (neither holds a socket): still OK/0 and 0
    assert r["npd"]["rc"] == 0, r["npd"]
    assert r["npd"]["out"].startswith("OK 1 server(s) pass") and "2 ignored" in r["npd"]["out"]
    assert r["check"]["rc"] == 0, r["check"]["err"]
    assert [t.split(" ")[1] for t in targets(r["check"])] == [str(server)]
    err = r["check"]["err"]
    assert f"ignored PID {decoy} (sv-attacker" in err and "judged only when --server-user names" in err
    assert f"ignored PID {mine} (root" in err and "not yet listening" in err
    # naming the attacker's account makes its process a candidate, never a server: it holds no socket
    assert r["check_named"]["rc"] == 0, r["check_named"]["err"]
    assert [t.split(" ")[1] for t in targets(r["check_named"])] == [str(server)]
    assert f"ignored PID {decoy} (sv-attacker" in r["check_named"]["err"]


def _nothing_as_root(r: dict[str, Any]) -> None:
    uid = r["attacker_uid"]
    for stage in ("at_start", "after_npd", "after_check", "after_named"):
        for f in r[stage]:
            assert f["owner"] == uid and f["says"].strip() == str(uid), (stage, f)


def test_exec_a_argv0_of_another_user_never_runs_as_root() -> None:
    """``exec -a ~evil/python3 /usr/bin/python3 -m sglang.launch_server``: argv[0] is the attacker's
    script. Unnamed, the process is ignored and nothing of it runs; named by --server-user, its program is
    asked which sglang it imports as the attacker, never as root."""
    r = scene("exec-a")
    _nothing_as_root(r)
    assert r["npd"]["rc"] == 0 and r["npd"]["out"].startswith("OK 1 server(s) pass"), r["npd"]
    assert f"PID {r['attacker']}" in r["npd"]["out"]  # listed as ignored
    assert r["after_npd"] == [] and r["after_check"] == []  # nothing of it ran
    assert r["check"]["rc"] == 0 and f"ignored PID {r['attacker']} (sv-attacker" in r["check"]["err"]
    # named: judged (its own report), and what ran of it ran as its user
    assert any(t.startswith(f"PID {r['attacker']} ") for t in targets(r["check_named"]))
    assert [f["owner"] for f in r["after_named"]] == [r["attacker_uid"]]


def test_sitecustomize_on_the_attackers_pythonpath_never_runs_as_root() -> None:
    """The genuine ``/usr/bin/python3`` with ``PYTHONPATH`` holding the attacker's ``sitecustomize.py``."""
    r = scene("sitecustomize")
    _nothing_as_root(r)
    started = r["at_start"]  # what the attacker's own server wrote at its start, as itself
    assert r["npd"]["rc"] == 0 and r["npd"]["out"].startswith("OK 1 server(s) pass"), r["npd"]
    assert r["after_npd"] == started and r["after_check"] == started
    assert any(t.startswith(f"PID {r['attacker']} ") for t in targets(r["check_named"]))
    assert len(r["after_named"]) == len(started) + 1  # the probe ran, as the attacker


# --- the legitimate shapes keep working ------------------------------------------------------------------


def test_a_server_in_its_own_network_namespace_is_proven_by_its_own_socket_table() -> None:
    """Compose ``pid: "service:sglang"`` without a shared network, or the per-node DaemonSet with
    ``hostPID`` and a server pod without ``hostNetwork``: the reader shares the server's PID namespace, not
    its network one. The socket it holds is found in its own namespace's table (``/proc/PID/net/tcp``), so
    it is a server (a decoy cannot borrow it) and its argv is judged; but this reader's ``127.0.0.1:PORT`` is
    another socket (anyone's, tests/test_redteam.py) or none, so its live checks are not run: inconclusive,
    naming the namespace."""
    from tests.support.fake_server import process_as, server_argv, sglang_tree
    from tests.support.loopback import free_port

    port = free_port()
    with sglang_tree() as top:
        argv = in_network_namespace(server_argv(port))
        with process_as(None, argv, cwd=top, prefix=b"/usr/bin/python3\0-m\0sglang") as proc:
            result = _check_pid(proc.pid, wait="10")
    assert result.returncode in (69, 78), result.stderr  # its argv is judged (78: not the recipe's)
    report = json.loads(result.stdout)
    assert report["target"] == f"PID {proc.pid} (port {port} in another network namespace)"
    ready = next(c for c in report["checks"] if c["id"] == "server.ready")
    assert ready["status"] == "error" and "another network namespace" in ready["message"]


def test_a_server_still_loading_is_judged_once_it_listens_with_wait() -> None:
    """A server loading its weights holds no socket yet: without --wait it is "not yet listening" (69,
    never judged on its argv alone); with --wait, check looks again until it listens, then judges it."""
    import tempfile
    import threading
    from pathlib import Path

    from tests.support.fake_server import LISTENS, process_as, server_argv, sglang_tree
    from tests.support.loopback import free_port

    port = free_port()
    with tempfile.TemporaryDirectory() as gate_dir:
        # the server "loads" until the test opens the gate (bounded at 120 s): the first check always sees
        # it loading, however slowly the box starts interpreters
        go = Path(gate_dir) / "go"
        slow = (
            f"import os, time\nfor _ in range(1200):\n    if os.path.exists({str(go)!r}): break\n"
            "    time.sleep(0.1)\n" + LISTENS
        )
        with sglang_tree(slow) as top:
            prefix = b"/usr/bin/python3\0-m\0sglang"
            with process_as(None, server_argv(port), cwd=top, prefix=prefix) as proc:
                early = _check_pid(proc.pid, wait="0")
                opener = threading.Timer(2.0, go.touch)  # opens while the second check waits
                opener.start()
                try:
                    later = _check_pid(
                        proc.pid, wait="20"
                    )  # the stand-in never answers /health: all 20 s are spent
                finally:
                    opener.cancel()
    assert early.returncode == 69, early.stderr
    assert f"--pid {proc.pid} is not judged" in early.stderr and "not yet listening" in early.stderr
    assert later.returncode != 1, later.stderr
    assert json.loads(later.stdout)["target"] == f"PID {proc.pid} (http://127.0.0.1:{port})"


def _check_pid(pid: int, *, wait: str) -> subprocess.CompletedProcess[str]:
    from tests.support.cli import run_cli

    return run_cli("check", "--no-probe", "--format", "json", "--pid", str(pid), "--wait", wait, timeout=180)


def test_launch_never_execs_another_users_program_with_its_own_privileges(tmp_path: Any) -> None:
    """``launch`` as root with a program the second user owns (``~evil/python3``, which writes a file
    naming the UID it runs as and then runs the simulator): refused (2) before the exec, nothing of the
    attacker's runs as root. The control, this checkout's own interpreter, starts."""
    import shutil
    import tempfile
    from pathlib import Path

    from tests.support.loopback import free_port, stop, wait_listening
    from tests.support.second_user import ensure_user

    owner = ensure_user()
    evil, out = Path(tempfile.mkdtemp(prefix="sv-evil-")), Path(tempfile.mkdtemp(prefix="sv-out-"))
    out.chmod(0o1777)
    script = evil / "python3"
    script.write_text(f'#!/bin/sh\nid -u > "{out}/launch-$(id -u)-$$"\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    for path in (evil, script):
        os.chown(path, owner.uid, owner.gid)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    sim = ["-m", "validator", "sim", "--speed", "1000", "--startup-seconds", "0.1"]
    launch = [sys.executable, "-m", "validator", "launch", "--allow-partial", "--report-to", "none", "--"]
    try:
        refused = subprocess.Popen(
            [*launch, str(script), *sim, "--port", str(free_port())],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            _, err = refused.communicate(timeout=120)
        finally:
            stop(refused)  # had it exec'd, the simulator would still run
        written = [(f.name, f.stat().st_uid) for f in out.iterdir()]
        port = free_port()
        control = subprocess.Popen(
            [*launch, sys.executable, *sim, "--port", str(port)],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            wait_listening(port, control, what="launched simulator", timeout=120)
        finally:
            stop(control)
    finally:
        shutil.rmtree(evil, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    assert refused.returncode == 2, err
    assert b"not exec'ing" in err and f"files of {owner.name}".encode() in err, err
    assert written == []


# --- the rule on a /proc-shaped tree: shapes a real second user cannot easily make on demand ------------

_TCP = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777001\n"
)


def _one_server(root: Any, *, status_uids: str | None = None) -> int:
    """A tree holding one ``python3 -m sglang.launch_server --port 30000`` that holds its socket (PID 40),
    all its UIDs this reader's own (root's in CI) unless ``status_uids`` says otherwise."""
    me = os.geteuid()
    status_uids = status_uids or f"{me} {me} {me} {me}"
    (root / "stat").write_text("cpu 0\nbtime 1700000000\n")
    d = root / "40"
    (d / "fd").mkdir(parents=True)
    (d / "net").mkdir()
    (d / "net" / "tcp").write_text(_TCP)
    (d / "fd" / "5").symlink_to("socket:[777001]")
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30000"]
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "environ").write_bytes(b"PATH=/usr/bin\0")
    (d / "stat").write_text("40 (python3) S 1 40 40 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0\n")
    (d / "status").write_text(f"Name:\tpython3\nUid:\t{status_uids}\nGid:\t0 0 0 0\nGroups:\t\n")
    return 40


def test_a_process_running_with_another_users_real_uid_is_not_trusted(tmp_path: Any) -> None:
    """``exec -a python3 SETUID-PROGRAM -m sglang.launch_server``: the kernel shows the process as root's
    (``/proc/PID`` belongs to its effective UID), but its real UID, who chose its argv and environment, is
    the second user's: every UID must be trusted, so it is ignored; the same tree with all UIDs root's is
    judged (the control). Root here is the reader's own UID (root in CI; the tree is a copy, not /proc)."""
    from validator.sources.host.server_processes import discover

    root_owned = tmp_path / "root"
    setuid = tmp_path / "setuid"
    root_owned.mkdir()
    setuid.mkdir()
    pid = _one_server(root_owned)
    me = os.geteuid()
    _one_server(setuid, status_uids=f"999 {me} {me} {me}")
    assert [s.process.pid for s in discover(root_owned).servers] == [pid]
    found = discover(setuid)
    assert found.servers == []
    assert [(i.pid, i.kind) for i in found.ignored] == [(pid, "other-user")]
    assert "999" in found.ignored[0].reason


def test_a_process_that_execs_while_it_is_read_is_never_merged(tmp_path: Any, monkeypatch: Any) -> None:
    """The argv read after the sockets differs from the one judged (the process exec'd, or its PID was
    reused): read once more, and still changing, ignored as "changed", never one report of two processes."""
    import validator.sources.host.server_processes as sp

    pid = _one_server(tmp_path)
    reads = {"n": 0}
    real = sp.read_cmdline

    def changing(p: int, proc: Any) -> list[str] | None:
        reads["n"] += 1
        argv = real(p, proc)
        return argv if reads["n"] % 2 else [*(argv or []), "--moe-runner-backend", "auto"]

    monkeypatch.setattr(sp, "read_cmdline", changing)
    found = sp.discover(tmp_path)
    assert found.servers == []
    assert [(i.pid, i.kind) for i in found.ignored] == [(pid, "changed")]
    monkeypatch.setattr(sp, "read_cmdline", real)
    assert [s.process.pid for s in sp.discover(tmp_path).servers] == [pid]  # the control


def test_thousands_of_look_alikes_of_another_user_cost_one_line_each_up_to_a_bound(tmp_path: Any) -> None:
    """Another user's look-alikes are listed, never judged, and the listing is bounded: ``check`` names the
    first 20 and counts the rest (a /proc tree under ``SPARK_VALIDATE_HOST_ROOT``, the processes the second
    user's)."""
    from tests.support.cli import run_cli
    from tests.support.second_user import ensure_user

    owner = ensure_user()
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu 0\nbtime 1700000000\n")
    argv = b"python3\0-m\0sglang.launch_server\0--model-path\0/m\0--port\0030000\0"
    for pid in range(100, 150):
        d = proc / str(pid)
        d.mkdir()
        (d / "cmdline").write_bytes(argv)
        (d / "stat").write_text(f"{pid} (python3) S 1 {pid} {pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0\n")
        os.chown(d, owner.uid, owner.gid)
    env = {**os.environ, "SPARK_VALIDATE_HOST_ROOT": str(tmp_path)}
    result = run_cli("check", "--no-probe", env=env, timeout=120)
    lines = [x for x in result.stderr.splitlines() if x.startswith("check: ignored")]
    assert result.returncode == 69, result.stderr
    assert len(lines) == 21 and lines[-1] == "check: ignored 30 more processes that look like servers"
    assert all("another user's process" in x for x in lines[:20])


def test_a_process_in_another_mount_namespace_is_judged_but_its_program_never_run() -> None:
    """A container's process (here root's, in a mount namespace of its own: ``unshare --mount``) names
    files of its own filesystem: its ``argv[0]`` (``exec -a ~evil/python3``), ``PYTHONPATH``
    (``/proc/PID/root/...``) would be the container's choice run on the host. It is judged from its argv,
    and launch.program says why it was not asked; the same process in this mount namespace (the control)
    has its argv[0] asked, as its own user (root)."""
    import shutil
    import tempfile
    from pathlib import Path

    from tests.support.cli import run_cli
    from tests.support.fake_server import process_as, server_argv, sglang_tree
    from tests.support.loopback import free_port
    from tests.support.prerequisite import needs_root

    needs_root("a mount namespace (unshare --mount)")
    evil, out = Path(tempfile.mkdtemp(prefix="sv-evil-")), Path(tempfile.mkdtemp(prefix="sv-out-"))
    script = evil / "python3"
    script.write_text(f'#!/bin/sh\nid -u > "{out}/ran-$$"\nexec /usr/bin/python3 "$@"\n')
    script.chmod(0o755)
    said: dict[str, tuple[int, str, int]] = {}
    try:
        for name, wrap in (("container", "unshare --mount "), ("host", "")):
            port = free_port()
            shell = f"exec {wrap}bash -c 'exec -a {script} " + " ".join(server_argv(port)) + "'"
            with (
                sglang_tree() as top,
                process_as(None, [], cwd=top, shell=shell, listen=port, prefix=str(script).encode()) as proc,
            ):
                before = len(list(out.iterdir()))
                result = run_cli(
                    "check", "--no-probe", "--format", "json", "--pid", str(proc.pid), timeout=120
                )
                program = by_id(json.loads(result.stdout))["launch.program"]
                said[name] = (
                    result.returncode,
                    program["status"] + " " + program["message"],
                    len(list(out.iterdir())) - before,
                )
    finally:
        shutil.rmtree(evil, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    rc, message, ran = said["container"]
    assert rc != 1 and ran == 0, said
    assert message.startswith("error ") and "another mount namespace" in message, message
    assert said["host"][2] == 1, said  # the control: asked, as root (the process is root's)


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report["checks"]}


def test_a_units_user_is_the_declared_server_user(tmp_path: Any) -> None:
    """``check --unit`` as root against the server the unit runs as ``User=`` (the second user): that user
    is declared, so its process is judged as with --server-user; the same unit without ``User=`` leaves
    it another user's, ignored (69, saying why)."""
    from tests.support.cli import run_cli
    from tests.support.fake_server import process_as, server_argv, sglang_tree
    from tests.support.loopback import free_port
    from tests.support.second_user import ensure_user

    owner = ensure_user()
    port = free_port()
    argv = server_argv(port)
    said = {}
    with (
        sglang_tree() as top,
        process_as(owner, argv, cwd=top, listen=port, prefix=b"/usr/bin/python3\0-m") as proc,
    ):
        for name, user in (("declared", f"User={owner.name}\n"), ("undeclared", "")):
            unit = tmp_path / f"{name}.service"
            unit.write_text(f"[Service]\n{user}WorkingDirectory={top}\nExecStart={' '.join(argv)}\n")
            said[name] = run_cli(
                "check",
                "--no-probe",
                "--format",
                "json",
                "--pid",
                str(proc.pid),
                "--unit",
                str(unit),
                timeout=120,
            )
    declared, undeclared = said["declared"], said["undeclared"]
    assert declared.returncode != 1 and json.loads(declared.stdout)["target"].startswith(f"PID {proc.pid} ")
    assert undeclared.returncode == 69, undeclared.stderr
    assert (
        f"--pid {proc.pid} is not judged" in undeclared.stderr
        and "another user's process" in undeclared.stderr
    )


def test_another_users_argv_that_the_simulators_reader_cannot_parse_stops_nothing() -> None:
    """A second user's sleeping ``python3 -m validator sim --port ²``: ``²`` passes ``str.isdigit`` and
    fails ``int``, and discovery parsed every simulator-like argv before judging whose it was. ``check``
    with no ``--url`` ended in "internal error: ValueError" (exit 1), ``npd`` said UNKNOWN, and a sidecar
    following root's server died of it at the server's next restart. Now the argv is the attacker's
    ignored process and root's server is judged as before, through the restart too."""
    r = scene("unparsable-port")
    server, attacker = r["server"], r["attacker"]
    assert r["sidecar_judged_first"], r["sidecar_log"]
    assert r["check"]["rc"] == 0, r["check"]["err"]
    assert "internal error" not in r["check"]["err"] + r["npd"]["out"] + r["npd"]["err"]
    assert [t.split(" ")[1] for t in targets(r["check"])] == [str(server)]
    assert f"ignored PID {attacker} (sv-attacker" in r["check"]["err"], r["check"]["err"]
    assert r["npd"]["rc"] == 0 and r["npd"]["out"].startswith("OK 1 server(s) pass"), r["npd"]
    assert r["sidecar_alive"] and r["sidecar_judged_again"], r["sidecar_log"]
    assert "internal error" not in r["sidecar_log"]


def test_another_users_bulky_argv_is_said_in_a_bounded_line() -> None:
    """The simulator's argv reader quoted every scenario name of a process it refused, and discovery
    printed its reason whole: six processes of a second user with 120 kB ``--scenario`` values put
    1.8 MB on root's terminal. Each process's reason is cut to a bounded line now."""
    r = scene("bulky-argv")
    check = r["check"]
    assert check["rc"] == 69, check["err"][-2000:]
    assert "no SGLang server process found" in check["err"]
    assert f"process {r['attackers'][0]}: " in check["err"], check["err"][-2000:]
    assert len(check["err"]) < 8_000, len(check["err"])
    # refused before its names are split (900 such processes held discovery past its 10 s deadline)
    assert f"process {r['attackers'][0]}: a --scenario value of " in check["err"], check["err"][-2000:]


def test_another_users_argv_of_many_scenario_names_never_hides_roots_server() -> None:
    """The simulator's argv reader deduplicated scenario names with a list (quadratic): one sleeping
    ``python3 -m validator sim --scenario`` of a second user with 60,000 distinct names held root's
    discovery for tens of CPU seconds, past its 10 s deadline, so a server started after it (a restart)
    was never read: check with no --url said "no SGLang server process found" (exit 69), npd too."""
    r = scene("many-names")
    assert r["check"]["rc"] == 0, r["check"]["err"][-2000:]
    assert [t.split(" ")[1] for t in targets(r["check"])] == [str(r["server"])]
    assert r["npd"]["rc"] == 0 and r["npd"]["out"].startswith("OK 1 server(s) pass"), r["npd"]
