"""The attacker's pass over issue 28 (evidence from /proc) and the declared-launch probe: what broke, each
played from the user's side with a control beside it.

- A server in another network namespace (a pod without ``hostNetwork`` seen by the per-node DaemonSet, a
  Compose ``pid:`` share without the network) was judged live through *this* host's loopback: whoever
  bound that port here (any local user may bind a port above 1023) answered for it, and a broken server's
  acceptance length was the decoy's. Its live checks are now not run (``server.ready`` error naming the
  namespace), never taken from another socket.
- The interpreter probe of a declared launch (``preflight --unit``, ``launch``) ran as root with code
  another user controls: the ``.pth`` files of the user site that the unit's ``HOME`` names, and the
  ``site-packages`` of a virtual environment whose ``lib/`` is the server user's. It now runs as that
  user, as ``PYTHONPATH`` already did.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import REPO, run_cli
from tests.support.fake_server import PYTHON, process_as
from tests.support.loopback import free_port
from tests.support.namespaces import in_network_namespace
from tests.support.second_user import User

WRITES_UID = 'import os; open(os.path.join({out!r}, "ran-%d" % os.getuid()), "w").write("x")\n'


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory the second user can traverse (its parents root's; ``/tmp`` is sticky), removed after."""
    top = Path(tempfile.mkdtemp(prefix="sv-redteam-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _drop_box(top: Path) -> Path:
    out = top / "out"
    out.mkdir()
    os.chmod(out, 0o1777)
    return out


def _who_ran(out: Path) -> list[tuple[str, int]]:
    return sorted((f.name, f.stat().st_uid) for f in out.iterdir())


def _chown_tree(top: Path, user: User) -> None:
    for path in [top, *top.rglob("*")]:
        os.lchown(path, user.uid, user.gid)


def test_a_server_in_another_network_namespace_is_never_judged_through_this_hosts_loopback() -> None:
    """The broken server (FP8 head + NEXTN sharing only the weight: acceptance 1.00) listens in its own
    network namespace; a healthy simulator holds the same port on this host's loopback (any local user may
    bind it). ``check --pid`` of the broken server took the decoy's acceptance length 4.0 (a pass) before;
    now its live checks are not run and ``server.ready`` names the namespace, while its argv is still judged
    (the control: the same report carries the preflight half)."""
    from validator.sim.runner import SimServer

    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "SGLANG_ENABLE_FP8_LM_HEAD": "1", "PYTHONPATH": str(REPO)}
    sim = [
        sys.executable, "-m", "validator", "sim", "--scenario", "draft-head-weight-only",
        "--host", "0.0.0.0", "--port", str(port), "--speed", "1000", "--startup-seconds", "0.1",
    ]  # fmt: skip
    sim = in_network_namespace(sim)
    prefix = sys.executable.encode()
    with (
        SimServer("healthy", port=port, speed=1000, startup_seconds=0.1),
        process_as(None, sim, cwd=Path("/"), env=env, prefix=prefix) as proc,
    ):
        done = run_cli("check", "--format", "json", "--pid", str(proc.pid), "--wait", "10", timeout=180)
    assert done.returncode == 69, done.stdout[-2000:] + done.stderr
    report = json.loads(done.stdout)
    assert report["target"] == f"PID {proc.pid} (port {port} in another network namespace)"
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["server.ready"]["status"] == "error"
    assert "another network namespace" in checks["server.ready"]["message"]
    # nothing of the decoy: no acceptance length measured, no probe reply counted
    assert checks["spec.accept_length"]["status"] != "pass", checks["spec.accept_length"]
    assert report.get("probe") in (None, {}), report.get("probe")
    # the control: the process's own argv is still judged (the speculative flags it runs with)
    assert checks["spec.config"]["status"] == "pass", checks["spec.config"]


def _user_site(home: Path) -> Path:
    version = subprocess.run(
        [PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()  # fmt: skip
    return home / ".local" / "lib" / f"python{version}" / "site-packages"


def test_the_units_home_user_site_never_runs_as_root(scratch: Path, attacker: User, tmp_path: Path) -> None:
    """``preflight --unit`` (root) of a unit whose ``User=`` is the second user and whose environment sets
    ``HOME`` to that user's home: the interpreter probe imported the home's user site as root, running its
    ``.pth`` as UID 0. Now it runs as the home's owner; the control, a home of root's, still runs as root."""
    out = _drop_box(scratch)
    theirs, ours = scratch / "theirs", scratch / "ours"
    for home in (theirs, ours):
        site = _user_site(home)
        site.mkdir(parents=True)
        (site / "evil.pth").write_text(WRITES_UID.format(out=str(out)))
        for p in [home, *home.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    _chown_tree(theirs, attacker)
    seen = []
    for home in (theirs, ours):
        unit = tmp_path / f"{home.name}.service"
        unit.write_text(
            "[Service]\n"
            f"User={attacker.name}\n"
            f"Environment=HOME={home} SGLANG_ENABLE_FP8_LM_HEAD=1\n"
            f"ExecStart={PYTHON} -m sglang.launch_server --model-path /m --port 30000\n"
        )
        done = run_cli("preflight", "--format", "json", "--unit", str(unit), timeout=120)
        assert done.returncode in (0, 1, 69, 78), done.stderr
        seen.append(_who_ran(out))
        for f in out.iterdir():
            f.unlink()
    assert seen[0] == [(f"ran-{attacker.uid}", attacker.uid)], seen
    assert seen[1] == [("ran-0", 0)], seen  # the control: root's own home's site still runs as root


def test_a_venvs_site_packages_of_another_user_never_runs_as_root(scratch: Path, attacker: User) -> None:
    """A virtual environment made by root whose ``lib/`` the server user owns (to ``pip install`` as
    itself): ``preflight --launch-cmd VENV/bin/python -m sglang.launch_server`` ran its ``.pth`` as root.
    Now as that user; the control, the same venv all root's, as root."""
    out = _drop_box(scratch)
    venv = scratch / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "evil.pth").write_text(WRITES_UID.format(out=str(out)))
    (site / "evil.pth").chmod(0o644)
    cmd = f"{venv}/bin/python -m sglang.launch_server --model-path /m --port 30000"
    seen = []
    for owner in (None, attacker):
        if owner is not None:
            _chown_tree(venv / "lib", owner)
        done = run_cli("preflight", "--format", "json", "--launch-cmd", cmd, timeout=120)
        assert done.returncode in (0, 1, 69, 78), done.stderr
        seen.append(_who_ran(out))
        for f in out.iterdir():
            f.unlink()
    assert seen == [[("ran-0", 0)], [(f"ran-{attacker.uid}", attacker.uid)]], seen


def test_a_listening_process_in_this_namespace_is_still_judged_live() -> None:
    """The control for the namespace rule: the same broken simulator in this host's network namespace is
    reached and fails on its own acceptance length."""
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "SGLANG_ENABLE_FP8_LM_HEAD": "1", "PYTHONPATH": str(REPO)}
    sim = [
        sys.executable, "-m", "validator", "sim", "--scenario", "draft-head-weight-only", "--port", str(port),
        "--speed", "1000", "--startup-seconds", "0.1",
    ]  # fmt: skip
    with process_as(None, sim, cwd=Path("/"), env=env, prefix=sys.executable.encode(), listen=port) as proc:
        done = run_cli("check", "--format", "json", "--pid", str(proc.pid), "--wait", "10", timeout=180)
    report = json.loads(done.stdout)
    assert report["target"] == f"PID {proc.pid} (http://127.0.0.1:{port})"
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["spec.accept_length"]["status"] == "fail", checks["spec.accept_length"]
    assert done.returncode == 78, done.stderr
