"""One attack on the /proc trust rule, played inside a private PID namespace, with its control beside it.

Run as ``unshare --pid --fork --mount-proc python -m tests.support.trust_scene SCENE`` (root, by the
tests in ``tests/test_proc_trust.py``): only the processes this script starts are visible, so ``npd`` and
``check`` with no ``--pid`` see the healthy simulator (root's, the control), and what the second local
user started; nothing another test runs on the host. Prints one JSON object of what each command said.

Scenes (the attacker is ``tests.support.second_user``'s account, acting through ``setpriv``):

- ``decoy``: a sleeping ``python3 -m sglang.launch_server --port P --moe-runner-backend auto`` with no FP8
  variable, ``P`` the healthy server's port, once as the attacker and once as root (listening on nothing).
- ``exec-a``: ``exec -a ~evil/python3 /usr/bin/python3 -m sglang.launch_server`` (argv[0] is the
  attacker's script, which writes a file naming the UID it runs as), serving on its own port.
- ``sitecustomize``: the genuine ``/usr/bin/python3`` with ``PYTHONPATH`` holding the attacker's
  ``sitecustomize.py`` (writes a file naming its UID).
- ``unparsable-port``: the attacker's sleeping ``python3 -m validator sim --port ²`` (its own ``validator``
  package): ``²`` passes ``str.isdigit`` and fails ``int``, and every command that reads /proc parsed
  that argv before judging whose it is. ``check`` and ``npd`` with it beside root's simulator, and a
  sidecar following root's simulator through a restart with it present.
- ``bulky-argv``: six such processes of the attacker with 120 kB ``--scenario`` values, and no server:
  what ``check`` says (each was quoted whole, 1.8 MB on root's terminal).
- ``many-names``: one such process with 60,000 distinct scenario names, started before root's simulator
  (the names were deduplicated in quadratic time: one process held discovery past its deadline).
"""

from __future__ import annotations

import itertools
import json
import os
import string
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tests.support.cli import REPO
from tests.support.fake_server import SLEEPS, process_as, server_argv, sglang_tree
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.second_user import User, ensure_user

SIM = ["--speed", "1000", "--startup-seconds", "0.1"]
WRITES_UID = (
    "import os\n"
    'open(os.path.join({out!r}, f"{tag}-{{os.getuid()}}-{{os.getpid()}}"), "w").write(str(os.getuid()))\n'
)


def cli(*args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SGLANG_ENABLE_FP8_LM_HEAD", None)
    done = subprocess.run(
        [sys.executable, "-m", "validator", *args], cwd=REPO, env=env, capture_output=True, timeout=240
    )
    return {
        "rc": done.returncode,
        "out": done.stdout.decode(errors="replace"),
        "err": done.stderr.decode(errors="replace"),
    }


def npd(*extra: str) -> dict[str, Any]:
    return cli("npd", "--timeout", "60", "--max-output-length", "400", *extra)


def files(out: Path) -> list[dict[str, Any]]:
    return [
        {"name": f.name, "owner": f.stat().st_uid, "says": f.read_text(errors="replace")}
        for f in sorted(out.iterdir())
    ]


def healthy_sim(stack: ExitStack) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    cmd = [sys.executable, "-m", "validator", "sim", "--port", str(port), *SIM]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.callback(stop, proc)
    wait_listening(port, proc, what="simulator", timeout=60)
    return proc, port


def evil_dir(owner: User, stack: ExitStack) -> tuple[Path, Path]:
    """The attacker's own directory (``~/evil``) and a drop box anyone may write (what the code wrote)."""
    evil = Path(tempfile.mkdtemp(prefix="sv-evil-"))
    out = Path(tempfile.mkdtemp(prefix="sv-out-"))
    os.chmod(out, 0o1777)
    stack.callback(subprocess.run, ["rm", "-rf", str(evil), str(out)], check=False)
    return evil, out


def decoy(owner: User) -> dict[str, Any]:
    with ExitStack() as stack:
        sim, port = healthy_sim(stack)
        result: dict[str, Any] = {"server": sim.pid, "npd_alone": npd()}
        result["check_alone"] = cli("check", "--no-probe", "--allow-partial", "--format", "json")
        top = stack.enter_context(sglang_tree(SLEEPS))
        argv = server_argv(port, "--moe-runner-backend", "auto")
        prefix = b"/usr/bin/python3\0-m\0sglang"
        theirs = stack.enter_context(process_as(owner, argv, cwd=top, prefix=prefix))
        mine = stack.enter_context(process_as(None, argv, cwd=top, prefix=prefix))
        result.update(attacker=theirs.pid, same_user=mine.pid)
        result["npd"] = npd()
        result["check"] = cli("check", "--no-probe", "--allow-partial", "--format", "json")
        result["check_named"] = cli(
            "check", "--no-probe", "--allow-partial", "--format", "json", "--server-user", owner.name
        )
        return result


def _attack(owner: User, *, exec_a: bool) -> dict[str, Any]:
    with ExitStack() as stack:
        sim, _ = healthy_sim(stack)
        evil, out = evil_dir(owner, stack)
        if exec_a:
            script = evil / "python3"
            script.write_text(f'#!/bin/sh\nid -u > "{out}/argv0-$(id -u)-$$"\nexec /usr/bin/python3 "$@"\n')
            script.chmod(0o755)
            env = {"PATH": "/usr/bin:/bin"}
            prefix = str(script).encode() + b"\0-m\0sglang"
        else:
            (evil / "sitecustomize.py").write_text(WRITES_UID.format(out=str(out), tag="site"))
            env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(evil)}
            prefix = b"/usr/bin/python3\0-m\0sglang"
        for f in [evil, *evil.iterdir()]:
            os.chown(f, owner.uid, owner.gid)
        port = free_port()
        top = stack.enter_context(sglang_tree())
        argv = server_argv(port)
        shell = "exec -a " + str(evil / "python3") + " " + " ".join(argv) if exec_a else None
        attacker = stack.enter_context(
            process_as(owner, argv, cwd=top, env=env, shell=shell, listen=port, prefix=prefix)
        )
        result: dict[str, Any] = {"server": sim.pid, "attacker": attacker.pid, "at_start": files(out)}
        result["npd"] = npd()
        result["after_npd"] = files(out)
        result["check"] = cli("check", "--no-probe", "--allow-partial", "--format", "json")
        result["after_check"] = files(out)
        # the operator names the attacker's account as a server user: its interpreter is asked, as it
        result["check_named"] = cli(
            "check", "--no-probe", "--allow-partial", "--format", "json", "--server-user", owner.name
        )
        result["after_named"] = files(out)
        return result


def _sidecar_target(listen: int) -> str:
    """What the sidecar's ``/report`` says it judged ("" while it has no report)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{listen}/report", timeout=5) as reply:
            return str(json.loads(reply.read()).get("target", ""))
    except (OSError, ValueError):
        return ""


def _sidecar_judges(listen: int, pid: int, sidecar: subprocess.Popen[bytes]) -> bool:
    """Whether the sidecar judges PID ``pid`` within 60 s (False at once once it has exited)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sidecar.poll() is None:
        if _sidecar_target(listen).startswith(f"PID {pid} "):
            return True
        time.sleep(0.2)
    return False


def unparsable_port(owner: User) -> dict[str, Any]:
    with ExitStack() as stack:
        sim, port = healthy_sim(stack)
        evil = _sleeping_validator(owner, stack)
        listen = free_port()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-m", "validator", "serve", "--listen", f"127.0.0.1:{listen}", "--no-probe"]
        argv += ["--allow-partial", "--interval", "1", "--health-interval", "0.5", "--wait", "60"]
        log = evil.parent / f"{evil.name}-sidecar.log"
        stack.callback(log.unlink, missing_ok=True)
        with log.open("wb") as fh:
            sidecar = subprocess.Popen(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        stack.callback(stop, sidecar)
        result: dict[str, Any] = {
            "server": sim.pid,
            "sidecar_judged_first": _sidecar_judges(listen, sim.pid, sidecar),
        }
        claim = ["/usr/bin/python3", "-m", "validator", "sim", "--port", "\u00b2"]
        attacker = stack.enter_context(
            process_as(owner, claim, cwd=evil, prefix=b"/usr/bin/python3\0-m\0validator")
        )
        result["attacker"] = attacker.pid
        result["npd"] = npd()
        result["check"] = cli("check", "--no-probe", "--allow-partial", "--format", "json")
        # the sidecar reads /proc again when its server exits: root's simulator restarts on its port
        stop(sim)
        env = {**os.environ, "PYTHONPATH": str(REPO), "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
        cmd = [sys.executable, "-m", "validator", "sim", "--port", str(port), *SIM]
        again = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(stop, again)
        result["server_again"] = again.pid
        result["sidecar_judged_again"] = _sidecar_judges(listen, again.pid, sidecar)
        result["sidecar_alive"] = sidecar.poll() is None
        result["sidecar_log"] = log.read_text(errors="replace")[-2000:]
        return result


def _sleeping_validator(owner: User, stack: ExitStack) -> Path:
    """The attacker's directory holding its own ``validator`` package, whose ``-m validator`` sleeps."""
    evil, _ = evil_dir(owner, stack)
    (evil / "validator").mkdir()
    (evil / "validator" / "__init__.py").write_text("")
    (evil / "validator" / "__main__.py").write_text(SLEEPS)
    for f in (evil, evil / "validator", *(evil / "validator").iterdir()):
        os.chown(f, owner.uid, owner.gid)
    return evil


def bulky_argv(owner: User) -> dict[str, Any]:
    """Six sleeping ``python3 -m validator sim --scenario X`` of the attacker, X 120 kB of names (three
    times each), and nothing else: what ``check`` says when it finds no server."""
    with ExitStack() as stack:
        evil = _sleeping_validator(owner, stack)
        names = "no-such-one," + "healthy," * 15_000
        claim = ["/usr/bin/python3", "-m", "validator", "sim", *["--scenario", names] * 3]
        pids = [
            stack.enter_context(
                process_as(owner, claim, cwd=evil, prefix=b"/usr/bin/python3\0-m\0validator")
            ).pid
            for _ in range(6)
        ]
        return {"attackers": pids, "check": cli("check", "--no-probe", "--format", "json", "--wait", "0")}


def many_names(owner: User) -> dict[str, Any]:
    """A sleeping ``python3 -m validator sim --scenario N1,N2,...`` of the attacker, 60,000 distinct names
    (under /proc's 256 kB cmdline cap), started before root's simulator: whether ``check`` and ``npd``
    still find root's server (discovery reads processes in PID order, within a deadline)."""
    with ExitStack() as stack:
        evil = _sleeping_validator(owner, stack)
        digits = string.digits + string.ascii_letters  # 62**3 names of three characters, 4 bytes each
        names = ["".join(t) for t in itertools.islice(itertools.product(digits, repeat=3), 60_000)]
        half = [",".join(names[:30_000]), ",".join(names[30_000:])]  # each under Linux's 128 kB per word
        claim = ["/usr/bin/python3", "-m", "validator", "sim", "--scenario", half[0], "--scenario", half[1]]
        prefix = b"/usr/bin/python3\0-m\0validator"
        attacker = stack.enter_context(process_as(owner, claim, cwd=evil, prefix=prefix))
        sim, _ = healthy_sim(stack)
        return {
            "attacker": attacker.pid,
            "server": sim.pid,
            "check": cli("check", "--no-probe", "--allow-partial", "--format", "json"),
            "npd": npd(),
        }


def main() -> None:
    scene = sys.argv[1]
    owner = ensure_user()
    if scene == "many-names":
        result = many_names(owner)
    elif scene == "bulky-argv":
        result = bulky_argv(owner)
    elif scene == "unparsable-port":
        result = unparsable_port(owner)
    else:
        result = decoy(owner) if scene == "decoy" else _attack(owner, exec_a=scene == "exec-a")
    result["attacker_uid"] = owner.uid
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
