"""The simulator stands apart from the production path: ``check --url`` against a real server (here a
simulator process on loopback) loads no module of ``validator/sim/`` and needs no simulator server; no
production module names the simulator; the paths that read processes (discovery, ``--pid``, ``launch``, the
sidecar) know it only as a stand-in its own entry point declares; ``sim`` and ``demo`` without the optional
install ``[sim]`` say what to install.

The child interpreter runs the CLI's own ``main`` with the real arguments and then writes the
``validator.sim`` modules it holds to a file, so that what is asserted is what that command loaded.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from tests.support.sim_process import REPO, sim_process
from validator.sources.host import server_command
from validator.sources.host.server_command import STAND_IN_GROUP, StandIn

pytestmark = pytest.mark.timeout(120)

# argv: OUT_FILE CLI_ARGS...; the exit code and the simulator modules loaded go to OUT_FILE as JSON. The
# simulator's web server (the optional install [sim]) cannot be imported there: the paths below need none.
CHILD = """
import json, sys
sys.modules["starlette"] = sys.modules["uvicorn"] = None  # import starlette: ImportError
from validator.cli import main
out, args = sys.argv[1], sys.argv[2:]
code = main(args)
sim = sorted(m for m in sys.modules if m == "validator.sim" or m.startswith("validator.sim."))
with open(out, "w") as f:
    json.dump({"rc": code, "sim": sim}, f)
"""


def _loaded(tmp: Path, *args: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    out = tmp / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("SPARK_VALIDATE_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=90,
    )
    assert out.exists(), proc.stderr[-2000:]
    found: dict[str, Any] = json.loads(out.read_text())
    return found, proc


def test_check_url_loads_no_simulator_module(tmp_path: Path) -> None:
    """``check --url`` against a server loads no simulator module, and needs no simulator server (starlette
    and uvicorn cannot be imported in the child): an install without ``[sim]`` checks servers."""
    with sim_process(tmp_path, "--scenario", "healthy") as sim:
        args = ("--attestation", str(sim.attestation), "--log", str(sim.log))
        found, proc = _loaded(tmp_path, "check", "--url", sim.url, "--wait", "20", "--format", "json", *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    # the live checks really ran and passed: the server was read over HTTP, the probe answered
    assert found["rc"] == 0 and report["verdict"] == "pass", proc.stdout[-2000:]
    assert found["sim"] == [], found["sim"]


def test_launch_of_an_sglang_command_reads_no_stand_in(tmp_path: Path) -> None:
    """``launch`` recognises stand-ins, but a real SGLang command line is SGLang's before any stand-in is
    asked: the entry points are never read and no simulator module is loaded on the server's start path
    (here refused, exit 78: its program does not exist)."""
    cmd = ["/nonexistent/python3", "-m", "sglang.launch_server", "--model-path", "/m"]
    found, proc = _loaded(tmp_path, "launch", "--report-to", "none", "--", *cmd)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert found["rc"] == 78 and found["sim"] == [], found


def test_a_process_path_does_register_the_simulator(tmp_path: Path) -> None:
    """Control: the listing sees the simulator's modules where a path that reads processes loads them
    (``--pid`` of a process that does not exist: discovery starts, finds nothing, exits 69)."""
    found, proc = _loaded(tmp_path, "check", "--pid", "999999999", "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "validator.sim.process_view" in found["sim"], (found, proc.stderr[-1000:])


# ---- nothing outside the simulator and its front doors knows it exists ---------------------------------

VALIDATOR = REPO / "validator"
FRONT_DOORS = {VALIDATOR / "commands" / "sim.py", VALIDATOR / "commands" / "demo.py"}
MENTIONS = re.compile(r"simulat|validator\.sim\b|process_view|\bSimServer\b|\bscenarios?\b", re.IGNORECASE)


def _command_table_lines(path: Path) -> set[int]:
    """The lines of ``cli.COMMANDS``' ``sim`` and ``demo`` entries: the front doors' help texts, which the
    command list holds so that ``--help`` imports no command module."""
    tree = ast.parse(path.read_text())
    lines: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "COMMANDS"
        ):
            assert isinstance(node.value, ast.Dict)
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in ("sim", "demo"):
                    assert value.end_lineno is not None
                    lines.update(range(key.lineno, value.end_lineno + 1))
    assert lines, "cli.COMMANDS has no sim/demo entries to leave out: the test no longer reads it"
    return lines


def test_no_production_module_mentions_the_simulator() -> None:
    """Every module outside ``validator/sim/`` and its front doors (``commands/sim.py``, ``demo.py``), code,
    comments and docstrings alike: no word of the simulator, and no import of it (at any depth, inside a
    function too). Discovery, ``launch`` and the fleet know a :class:`StandIn`, declared by the simulator
    itself through an entry point."""
    found: list[str] = []
    modules = 0
    for path in sorted(VALIDATOR.rglob("*.py")):
        if (VALIDATOR / "sim") in path.parents or path in FRONT_DOORS:
            continue
        modules += 1
        skip = _command_table_lines(path) if path == VALIDATOR / "cli.py" else set()
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if n not in skip and MENTIONS.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"{path.relative_to(REPO)}:{node.lineno}: imports {m}"
                for m in names
                if m.startswith("validator.sim")
            ]
    assert modules > 150, modules  # the walk really read the tree
    assert found == [], "\n".join(found)


def test_the_mention_scan_finds_a_mention() -> None:
    """The instrument above, held to what it must catch (a field, a comment, an import inside a function)."""
    for text in (
        "    simulated: bool = False",
        "# the Simulator stands in",
        "    from validator.sim import x",
    ):
        assert MENTIONS.search(text), text
    assert not MENTIONS.search("    stand_in = stand_in_of(launch.command)")


def test_the_simulator_declares_itself_as_the_one_stand_in() -> None:
    """The installed distribution's entry point is the only registration, and it is the simulator's own."""
    found = {ep.name: ep.value for ep in entry_points(group=STAND_IN_GROUP)}
    assert found == {"sim": "validator.sim.process_view:STAND_IN"}, found
    child = (
        "from validator.sources.host import server_command as sc\n"
        "sc.use_stand_ins()\n"
        "print(sc.stand_in_names(), sc.stand_ins_not_loaded())\n"
        "argv = ['/v/bin/python3', '-Im', 'validator.sim', '--port', '7', '--scenario', 'healthy']\n"
        "print(sc.classify(argv)[0])\n"
    )
    out = _python(child)
    assert out.splitlines() == ["['spark-validate sim'] []", "stand-in"], out


def test_a_stand_in_never_claims_a_real_sglang_command() -> None:
    """A stand-in declaring SGLang's own command lines as its forms is never asked about them: real SGLang
    command lines are recognised first, and are never a stand-in's (whose install identity would replace
    the server's SGLang install in every check that reads it)."""
    greedy = StandIn(
        name="greedy",
        what="a greedy stand-in",
        programs=(("sglang", "serve"), ("sglang",), ("spark-validate", "launch")),
        modules=(("sglang.launch_server",), ("validator", "launch")),
        server_args=lambda words: ["--model-path", "/claimed"],
        located_by="greedy",
        note="claimed",
        build_id="greedy",
    )
    saved = server_command._STAND_INS
    try:
        server_command.use_stand_ins((greedy,))
        for argv in (
            ["/v/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m"],
            ["/v/bin/python3", "-Im", "sglang.launch_server", "--model-path", "/m"],
            ["/v/bin/sglang", "serve", "--model-path", "/m"],
            ["/v/bin/python3", "/v/bin/sglang", "serve", "/m"],
            ["spark-validate", "launch", "--", "python3", "-m", "sglang.launch_server", "--model-path", "/m"],
            ["python3", "-m", "validator", "launch", "--", "sglang", "serve", "--model-path", "/m"],
        ):
            kind, command = server_command.classify(argv) or ("none", [])
            assert kind in ("sglang", "launch") and "/claimed" not in command, (argv, kind, command)
            assert server_command.stand_in_of(argv) is None, argv
        # and a form it does own is its
        assert server_command.stand_in_of(["/v/bin/sglang", "version"]) is greedy
    finally:
        server_command.use_stand_ins(saved)


def test_a_broken_or_foreign_stand_in_never_stops_discovery(tmp_path: Path) -> None:
    """An installed distribution declaring a stand-in that does not import, or that is not a StandIn: the
    simulator is still recognised, and discovery's report names what could not be loaded."""
    dist = tmp_path / "broken_stand_in-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-stand-in\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{STAND_IN_GROUP}]\nbroken = no_such_module_anywhere:X\nforeign = os:sep\n"
    )
    child = (
        "from validator.sources.host import server_command as sc\n"
        "from validator.sources.host.server_processes import Discovery, nothing_found\n"
        "sc.use_stand_ins()\n"
        "print(sc.stand_in_names())\n"
        "print(nothing_found(Discovery(servers=[], processes=0, truncated=False, errors=[], ignored=[])))\n"
    )
    out = _python(child, extra_path=tmp_path)
    names, *said = out.splitlines()
    assert names == "['spark-validate sim']", out
    text = " ".join(said)
    assert (
        "looked for python -m sglang.launch_server, sglang serve, spark-validate launch -- ..., "
        "spark-validate sim, holding" in text
    ), text
    assert "stand-in broken (no_such_module_anywhere:X) could not be loaded" in text, text
    assert "stand-in foreign (os:sep) is not a StandIn" in text, text


def test_a_discovered_simulator_carries_its_own_install_identity(tmp_path: Path) -> None:
    """What the simulator publishes stands where an SGLang install would: ``located_by``, its note (no
    interpreter is asked), and the fleet's build hash, which names it and no files."""
    child = """
import hashlib, json, sys
from dataclasses import replace
from validator.preflight import gather
from validator.preflight_inputs import PreflightInputs
from validator.sources.host import server_command
from validator.sources.host.listening import proc_root
from validator.sources.host.node import read_node
from validator.sources.host.server_processes import discover
server_command.use_stand_ins()
(server,) = [s for s in discover().servers if s.process.pid == int(sys.argv[1])]
facts = gather(replace(PreflightInputs(), running=server), [])
node = read_node(
    server.process, facts.launch, facts.sglang, cluster=None, node=None, pack="p", proc=proc_root()
)
print(json.dumps({"kind": server.kind, "located_by": facts.sglang.located_by, "root": str(facts.sglang.root),
    "note": facts.sglang.note, "problem": facts.program.problem, "build_hash": node.build_hash,
    "expected": hashlib.sha256(b"spark-validate simulator").hexdigest()[:12], "entry": facts.launch.entry,
    "command": facts.launch.command[-2:], "port": facts.launch.args["port"]}))
"""
    with sim_process(tmp_path, "--scenario", "healthy") as sim:
        got = json.loads(_python(child, str(sim.proc.pid)))
        port = sim.port
    assert got["kind"] == "stand-in" and got["entry"] == "launch_server" and got["port"] == port, got
    assert got["located_by"] == "simulator" and got["root"] == "None", got
    assert got["note"] == "spark-validate's simulator stands in for SGLang here: no SGLang install runs it"
    assert got["problem"] == f"is the simulator ({got['note']})", got
    assert got["build_hash"] == got["expected"], got


def _python(code: str, *args: str, extra_path: Path | None = None) -> str:
    """``code`` run by a fresh interpreter of this checkout (``extra_path`` first on its path); its stdout."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*([str(extra_path)] if extra_path else []), str(REPO)]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=90
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_stand_ins_reader_that_raises_never_stops_discovery() -> None:
    """Any user writes an argv a stand-in's reader cannot parse (the redteam's ``--port ²`` made the
    simulator's raise ValueError): that process is no server, named in discovery's errors, and discovery
    goes on. Here a stand-in whose reader raises on every command line, and a real process of ours that
    matches its form."""

    def raises(words: list[str]) -> list[str]:
        raise ValueError(f"cannot read {words}")

    fragile = StandIn(
        name="fragile",
        what="a fragile stand-in",
        programs=(("sleep", "31.5"),),
        modules=(),
        server_args=raises,
        located_by="fragile",
        note="fragile",
        build_id="fragile",
    )
    from validator.errors import UnavailableError
    from validator.sources.host.process import read_cmdline
    from validator.sources.host.server_processes import discover

    saved = server_command._STAND_INS
    proc = subprocess.Popen(["sleep", "31.5"])
    try:
        for _ in range(200):  # its cmdline reads empty for a moment after the exec
            if read_cmdline(proc.pid, Path("/proc")) == ["sleep", "31.5"]:
                break
            time.sleep(0.01)
        server_command.use_stand_ins((fragile,))
        with pytest.raises(UnavailableError, match=r"fragile could not read this command line: ValueError"):
            server_command.classify(["/usr/bin/sleep", "31.5"])
        found = discover()
        assert any(e.startswith(f"process {proc.pid}: fragile could not read") for e in found.errors), found
    finally:
        proc.kill()
        proc.wait()
        server_command.use_stand_ins(saved)


# ---- the simulator's web server is an optional install ([sim]) -------------------------------------------

NO_SERVER = 'import sys\nsys.modules["starlette"] = sys.modules["uvicorn"] = None\n'


@pytest.mark.parametrize("command", [["demo"], ["sim", "--port", "0", "--scenario", "healthy"]])
def test_without_the_sim_install_the_front_doors_say_what_to_install(command: list[str]) -> None:
    """``demo`` and ``sim`` where starlette and uvicorn cannot be imported (an install without ``[sim]``; the
    real one is tests/test_packaging.py's): one line naming the install command, exit 69, nothing else."""
    code = NO_SERVER + "from validator.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code, *command], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (69, ""), (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr == (
        f"spark-validate: {command[0]}: the simulator's web server (starlette, uvicorn) is an optional "
        "install: pip install 'spark-validate[sim]'\n"
    )


def test_without_the_sim_install_the_scenarios_are_still_listed() -> None:
    """Listing what the simulator can play serves nothing: it needs no ``[sim]``."""
    code = NO_SERVER + "from validator.cli import main\nsys.exit(main(['sim', '--list-scenarios']))\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and "draft-head-weight-only" in proc.stdout, proc.stderr
