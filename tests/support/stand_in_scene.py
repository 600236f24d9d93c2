"""A second local user's processes that claim to be the simulator, beside root's real server, played inside a
private PID namespace (``unshare --pid --fork --mount-proc python -m tests.support.stand_in_scene``, root, by
``tests/test_stand_in_trust.py``). Prints one JSON object of what each command said.

Root's server is SGLang as discovery sees one: ``python -m sglang.launch_server ARGS`` (the healthy recipe on
its port), whose ``sglang`` package here serves the simulator's healthy API. The attacker
(``tests.support.second_user``) then runs, each as itself:

- ``own_sim``: its own real simulator (``python -m validator sim``) on a port of its own, listening;
- ``claims_port``: a process whose argv is ``python3 -m validator sim --port P`` (root's port), which sleeps;
- ``bad_scenario``: ``python3 -m validator.sim --port P --scenario no-such-scenario``, which sleeps;
- ``claims_sglang``: ``python3 -m validator sim --port Q -- --model-path /m ...`` that listens on ``Q``;
- a ``*.dist-info`` declaring its own stand-in (whose loading writes a file naming the UID that loaded it)
  in a directory it owns, from which root runs the installed ``spark-validate`` script.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tests.support.cli import REPO
from tests.support.cli_as import _stage_script, staged_trees
from tests.support.decoys import healthy_argv
from tests.support.fake_server import listens, process_as, sleeps
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.second_user import User, ensure_user
from tests.support.trust_scene import evil_dir, files

CHECK = ("check", "--no-probe", "--allow-partial", "--format", "json", "--wait", "20")
NPD = ("npd", "--timeout", "60", "--max-output-length", "400")
SIM = ["--speed", "1000", "--startup-seconds", "0.1"]
# the real server's sglang: the simulator's healthy API on the port its SGLang argv names
SERVES = """\
import sys
from validator.cli import main
argv = sys.argv[1:]
port = argv[argv.index("--port") + 1]
sys.exit(main(["sim", "--port", port, "--scenario", "healthy", "--speed", "1000", "--startup-seconds", "0.1",
               "--attestation", {att!r}, "--log", {log!r}]))
"""
SLEEPS = sleeps(600)
LISTENS = listens(600)
EVIL_STAND_IN = """\
import os
open(os.path.join({out!r}, f"stand-in-{{os.getuid()}}-{{os.getpid()}}"), "w").write(str(os.getuid()))
from validator.sources.host.server_command import StandIn
STAND_IN = StandIn(name="evil", what="evil", programs=(), modules=(("sglang.launch_server",),),
                   server_args=lambda words: ["--model-path", "/evil"], located_by="evil", note="evil",
                   build_id="evil")
"""


def cli(*args: str, cwd: Path = REPO, script: bool = False) -> dict[str, Any]:
    """``python -m validator ARGS`` (``script``: the installed ``spark-validate`` console script) as root."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SGLANG_ENABLE_FP8_LM_HEAD", None)
    program = (
        [str(Path(sys.executable).parent / "spark-validate")]
        if script
        else [sys.executable, "-m", "validator"]
    )
    done = subprocess.run([*program, *args], cwd=cwd, env=env, capture_output=True, timeout=240)
    return {
        "rc": done.returncode,
        "out": done.stdout.decode(errors="replace"),
        "err": done.stderr.decode(errors="replace"),
    }


def real_server(stack: ExitStack) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Root's server: ``python -m sglang.launch_server`` with the healthy recipe, serving on its port; and
    the attestation it writes (named to every check: the default location is the host's, shared)."""
    # in pytest's private base (tests/conftest.py): the writer refuses a path through /tmp
    top = Path(tempfile.mkdtemp(prefix="sv-real-", dir=os.environ.get("PYTEST_DEBUG_TEMPROOT")))
    stack.callback(subprocess.run, ["rm", "-rf", str(top)], check=False)
    (top / "sglang").mkdir()
    (top / "sglang" / "__init__.py").write_text("")
    body = SERVES.format(att=str(top / "attestation.json"), log=str(top / "server.log"))
    (top / "sglang" / "launch_server.py").write_text(body)
    port = free_port()
    argv = [sys.executable, *healthy_argv(port)[1:]]
    env = {**os.environ, "PYTHONPATH": str(REPO), "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    proc = subprocess.Popen(argv, cwd=top, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.callback(stop, proc)
    wait_listening(port, proc, what="root's server", timeout=60)
    return proc, port, top / "attestation.json"


def look_alike_tree(stack: ExitStack) -> Path:
    """A world-readable ``validator`` package whose ``python3 -m validator`` / ``-m validator.sim`` sleep,
    or listen on ``--port`` when ``LISTEN=1``: the attacker's decoys, run by the system ``python3``."""
    top = Path(tempfile.mkdtemp(prefix="sv-look-alike-"))
    stack.callback(subprocess.run, ["rm", "-rf", str(top)], check=False)
    body = f"import os\nexec({LISTENS!r} if os.environ.get('LISTEN') else {SLEEPS!r})\n"
    for pkg in (top / "validator", top / "validator" / "sim"):
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "__main__.py").write_text(body)
    for path in (top, *top.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return top


def attackers_simulator(owner: User, stack: ExitStack) -> tuple[subprocess.Popen[bytes], int]:
    """The attacker's own real simulator, this checkout's, run as the attacker (the trees it needs staged
    behind a private tmpfs as ``tests.support.cli_as`` does)."""
    staged = staged_trees()
    keeps = [Path(tempfile.mkdtemp(prefix="sv-stage-")) for _ in staged]
    for keep in keeps:
        stack.callback(os.rmdir, keep)
    port = free_port()
    child = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": "/nonexistent"}
    words = " ".join(shlex.quote(w) for w in ["env", "-i", *(f"{k}={v}" for k, v in child.items())])
    command = shlex.join([sys.executable, "-m", "validator", "sim", "--port", str(port), *SIM])
    drop = f"setpriv --reuid={owner.uid} --regid={owner.gid} --clear-groups --"
    script = "set -e; mount --make-rprivate /; " + _stage_script(staged, keeps)
    script += f"cd /; exec {drop} {words} {command}"
    proc = subprocess.Popen(
        ["unshare", "--mount", "sh", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    stack.callback(stop, proc)
    wait_listening(port, proc, what="the attacker's simulator", timeout=60)
    return proc, port


def planted_stand_in(owner: User, stack: ExitStack) -> tuple[Path, Path]:
    """The attacker's directory holding a distribution that declares a stand-in claiming
    ``sglang.launch_server`` (its module writes a file naming the UID that imported it), and that drop box."""
    evil, out = evil_dir(owner, stack)
    dist = evil / "evil_stand_in-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-stand-in\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[spark_validate.stand_ins]\nevil = evil_stand_in:STAND_IN\n")
    (evil / "evil_stand_in.py").write_text(EVIL_STAND_IN.format(out=str(out)))
    for path in (evil, *evil.rglob("*")):
        os.chown(path, owner.uid, owner.gid)
    return evil, out


def scene(owner: User) -> dict[str, Any]:
    with ExitStack() as stack:
        server, port, att = real_server(stack)
        check = (*CHECK, "--attestation", str(att))
        result: dict[str, Any] = {"server": server.pid, "port": port, "alone": cli(*check)}
        result["npd_alone"] = cli(*NPD)
        own_sim, own_port = attackers_simulator(owner, stack)
        top = look_alike_tree(stack)
        pairs = {
            "claims_port": (["/usr/bin/python3", "-m", "validator", "sim", "--port", str(port)], None),
            "bad_scenario": (
                ["/usr/bin/python3", "-m", "validator.sim", "--port", str(port), "--scenario", "no-such-one"],
                None,
            ),
        }
        q = free_port()
        pairs["claims_sglang"] = (
            ["/usr/bin/python3", "-m", "validator", "sim", "--port", str(q), "--", "--model-path", "/m"],
            q,
        )
        started: dict[str, int] = {"own_sim": own_sim.pid}
        for name, (argv, listen) in pairs.items():
            env = {"PATH": "/usr/bin:/bin", **({"LISTEN": "1"} if listen else {})}
            proc = stack.enter_context(
                process_as(
                    owner, argv, cwd=top, env=env, listen=listen, prefix=b"/usr/bin/python3\0-m\0validator"
                )
            )
            started[name] = proc.pid
        result.update(attackers=started, own_port=own_port, claims_sglang_port=q)
        result["attacked"] = cli(*check)
        result["npd_attacked"] = cli(*NPD)
        result["named"] = cli(*check, "--server-user", owner.name)
        result["pid"] = cli(*check, "--pid", str(server.pid))
        evil, out = planted_stand_in(owner, stack)
        result["from_evil_cwd"] = cli(*check, cwd=evil, script=True)
        result["evil_files"] = files(out)
        return result


def main() -> None:
    owner = ensure_user()
    result = scene(owner)
    result["attacker_uid"] = owner.uid
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
