"""What the simulator publishes (its stand-in declaration) is no lever for another local user: a second user's
own simulator, or a process whose argv claims to be one, never changes the verdict about root's real server
and never makes discovery judge a real SGLang server as a stand-in; a stand-in declared in a directory that
user owns is never loaded by root's ``spark-validate``. Played as a real second local account inside a
private PID namespace (``tests.support.stand_in_scene``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from typing import Any

import pytest

from tests.support.cli import REPO
from tests.support.namespaces import in_pid_namespace
from tests.support.second_user import User

pytestmark = pytest.mark.timeout(600)


@cache
def _scene() -> dict[str, Any]:
    done = subprocess.run(
        in_pid_namespace([sys.executable, "-m", "tests.support.stand_in_scene"]),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def scene(attacker: User) -> dict[str, Any]:
    return _scene()


def _reports(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    data = json.loads(run["out"])
    return {r["target"].split(" ")[1]: r for r in (data if isinstance(data, list) else [data])}


def _judged(report: dict[str, Any]) -> dict[str, Any]:
    """Each check's status, and what ``launch.program`` says the program is (the server's install or a
    stand-in's): what an attack would have to change."""
    out: dict[str, Any] = {c["id"]: c["status"] for c in report["checks"]}
    program = next(c for c in report["checks"] if c["id"] == "launch.program")
    out["launch.program says"] = program["message"]
    out["verdict"] = report["verdict"]
    return out


def test_root_servers_verdict_is_the_same_beside_every_look_alike(scene: dict[str, Any]) -> None:
    server = str(scene["server"])
    alone = _reports(scene["alone"])
    assert list(alone) == [server], scene["alone"]["err"][-2000:]
    before = _judged(alone[server])
    # root's server is SGLang as discovery sees it: its interpreter is asked, never a stand-in's identity
    assert "simulator" not in before["launch.program says"], before
    assert "stands in" not in json.dumps(alone[server]), alone[server]
    for run in ("attacked", "named", "pid", "from_evil_cwd"):
        reports = _reports(scene[run])
        assert server in reports, (run, scene[run]["err"][-2000:])
        assert _judged(reports[server]) == before, run
    # with nothing named, the look-alikes change nothing at all: the same single report and exit code
    assert list(_reports(scene["attacked"])) == [server]
    assert scene["attacked"]["rc"] == scene["alone"]["rc"], scene["attacked"]
    # node-problem-detector's plugin: the same exit code and the same finding, the look-alikes only counted
    alone, attacked = scene["npd_alone"], scene["npd_attacked"]
    pids = scene["attackers"]
    ignored = " ".join(f"PID {pids[n]}" for n in ("own_sim", "claims_port", "claims_sglang"))
    assert attacked["rc"] == alone["rc"] and alone["rc"] in (0, 1), (alone, attacked)
    finding = alone["out"].strip()
    assert attacked["out"].strip() == f"{finding} (3 ignored: {ignored})", (finding, attacked["out"])


def test_another_users_simulators_are_ignored_unless_named(scene: dict[str, Any]) -> None:
    pids = scene["attackers"]
    err = scene["attacked"]["err"]
    for name in ("own_sim", "claims_port", "claims_sglang"):
        assert f"ignored PID {pids[name]} (sv-attacker" in err, (name, err[-2000:])
        assert "judged only when --server-user names" in err
    # named by the operator: the attacker's listening simulators are judged, each as its own server (a
    # stand-in: its own install identity, its program never run); the one claiming root's port holds no
    # socket and is never a server; the one with a scenario its simulator refuses is no server either
    named = _reports(scene["named"])
    for name in ("own_sim", "claims_sglang"):
        report = named[str(pids[name])]
        assert (
            "is the simulator (spark-validate's simulator stands in" in _judged(report)["launch.program says"]
        )
    assert str(pids["claims_port"]) not in named and str(pids["bad_scenario"]) not in named
    assert f"ignored PID {pids['claims_port']} (sv-attacker, --port {scene['port']})" in scene["named"]["err"]
    assert "not yet listening" in scene["named"]["err"]


def test_a_stand_in_planted_in_the_attackers_directory_is_never_loaded(scene: dict[str, Any]) -> None:
    """Root runs the installed ``spark-validate`` from the attacker's directory, which holds a distribution
    declaring a stand-in that claims ``python -m sglang.launch_server``: nothing of it runs, as root or at
    all, and root's server stays SGLang."""
    assert scene["evil_files"] == [], scene["evil_files"]
    run = scene["from_evil_cwd"]
    assert run["rc"] == scene["alone"]["rc"], run["err"][-2000:]
    assert "/evil" not in run["out"] and "evil" not in run["err"], run
