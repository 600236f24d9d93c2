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


@cache
def scene(name: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            "-m",
            "tests.support.trust_scene",
            name,
        ],
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
    ``hostPID``: the reader shares the server's PID namespace, not its network one. The socket it holds is
    found in its own namespace's table (``/proc/PID/net/tcp``), so it is judged; a decoy cannot borrow it."""
    from tests.support.fake_server import process_as, server_argv, sglang_tree
    from tests.support.loopback import free_port

    port = free_port()
    with sglang_tree() as top:
        argv = ["unshare", "--net", *server_argv(port)]
        with process_as(None, argv, cwd=top, prefix=b"/usr/bin/python3\0-m\0sglang") as proc:
            result = _check_pid(proc.pid, wait="10")
    assert result.returncode != 1, result.stderr
    report = json.loads(result.stdout)
    assert report["target"] == f"PID {proc.pid} (http://127.0.0.1:{port})"


def test_a_server_still_loading_is_judged_once_it_listens_with_wait() -> None:
    """A server loading its weights holds no socket yet: without --wait it is "not yet listening" (69,
    never judged on its argv alone); with --wait, check looks again until it listens, then judges it."""
    from tests.support.fake_server import process_as, server_argv, sglang_tree
    from tests.support.loopback import free_port

    port = free_port()
    slow = "import time\ntime.sleep(3)\n" + "import socket, sys\n" + _LISTEN_BODY
    with sglang_tree(slow) as top:
        prefix = b"/usr/bin/python3\0-m\0sglang"
        with process_as(None, server_argv(port), cwd=top, prefix=prefix) as proc:
            early = _check_pid(proc.pid, wait="0")
            later = _check_pid(proc.pid, wait="20")
    assert early.returncode == 69, early.stderr
    assert f"--pid {proc.pid} is not judged" in early.stderr and "not yet listening" in early.stderr
    assert later.returncode != 1, later.stderr
    assert json.loads(later.stdout)["target"] == f"PID {proc.pid} (http://127.0.0.1:{port})"


_LISTEN_BODY = (
    "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', port))\n"
    "s.listen(8)\n"
    "time.sleep(120)\n"
)


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
