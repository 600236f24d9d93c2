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
