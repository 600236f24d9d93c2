"""`launch.program` and the install the server will really import, as real processes.

The server venv is a real ``python -m venv`` holding SGLang 0.5.23's real files unpatched (stock); a
second site directory holds the Ling-3.0-patched build. Which one a server imports depends on its
interpreter's flags (``-I``, ``-E`` hide ``PYTHONPATH``), its environment and its working directory
(``python -m`` imports from there first), so preflight must ask the interpreter exactly as the server
will run it, and never from preflight's own working directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.sglang_builds import fake_interpreter, make_build
from tests.test_preflight import REPO, Server, _server, status

RECIPE_ARGS = (
    "--moe-runner-backend humming --speculative-algorithm NEXTN --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
)


@dataclasses.dataclass
class Host:
    patched: Server  # fake interpreter whose site holds the patched build; model, caches, env
    patched_site: Path
    venv_python: Path  # a real venv whose site-packages holds the stock build


def _humming(site: Path) -> None:
    dist = site / "humming_kernels-0.1.19.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: humming-kernels\nVersion: 0.1.19\n")
    (site / "humming").mkdir(exist_ok=True)
    (site / "humming" / "__init__.py").write_text("")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Host:
    base = tmp_path_factory.mktemp("host")
    patched = _server(base, "patched")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next((venv / "lib").glob("python*/site-packages"))
    make_build(site, fp8_lm_head=False, share_hook=False)
    _humming(site)
    return Host(patched, base / "patched" / "site-packages", venv / "bin" / "python")


def run(
    env: dict[str, str], *args: str, cwd: Path = REPO, command: str = "preflight"
) -> tuple[int, dict[str, Any], str]:
    extra = ["--format", "json"] if command == "preflight" else ["--format", "json", "--report-to", "stderr"]
    before = args.index("--") if "--" in args else len(args)
    argv = [*args[:before], *extra, *args[before:]]
    proc = run_cli(command, *argv, env=env, cwd=cwd)  # spark-validate's own import path, not the server's
    text = proc.stdout if command == "preflight" else proc.stderr
    report = json.loads(text[text.index("{") :]) if "{" in text else {}
    return proc.returncode, report, proc.stderr


def check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == check_id)


def cmd(python: Path | str, model: Path, *flags: str) -> str:
    return (
        f"{python} {' '.join(flags)} -m sglang.launch_server --model-path {model} {RECIPE_ARGS} "
        f"--speculative-draft-model-path {model}"
    )


def test_interpreter_flags_decide_which_build_is_inspected(host: Host) -> None:
    """PYTHONPATH points at the patched build; -I and -E make the server ignore it and import the venv's
    stock build, which lacks both the FP8 head and set_lm_head_from_target."""
    model = host.patched.model
    # the runner's own PYTHONPATH is spark-validate's; the server's comes from its env file
    env_file = model.parent / "server.env"
    env_file.write_text(f"PYTHONPATH={host.patched_site}\n")
    base = host.patched.env
    rc, report, err = run(base, "--launch-cmd", cmd(host.venv_python, model), "--env-file", str(env_file))
    assert rc == 0, (err, [c for c in report.get("checks", []) if c["status"] != "pass"])
    assert check(report, "launch.program")["evidence"]["sglang_root"] == str(host.patched_site / "sglang")
    for flag in ("-I", "-E", "-sE", "-X dev -I"):
        rc, report, err = run(
            base, "--launch-cmd", cmd(host.venv_python, model, flag), "--env-file", str(env_file)
        )
        assert rc == 78, (flag, err)
        program = check(report, "launch.program")
        assert program["status"] == "pass" and "/venv/lib/" in program["evidence"]["sglang_root"]
        assert status(report, "spec.lm_head_shared") == "fail", flag
        assert status(report, "lm_head.fp8") == "fail", flag


def test_a_checkout_in_preflights_directory_is_not_the_servers(host: Host, tmp_path: Path) -> None:
    """Run from a directory holding a patched `sglang/` checkout, preflight used to inspect that checkout
    (python -c puts the working directory first) and pass a server that imports the stock build."""
    checkout = tmp_path / "src"
    make_build(checkout)
    _humming(checkout)
    rc, report, err = run(
        host.patched.env, "--launch-cmd", cmd(host.venv_python, host.patched.model), cwd=checkout
    )
    assert rc == 78, err
    program = check(report, "launch.program")
    assert str(checkout) not in str(program["evidence"]["sglang_root"])
    assert "empty directory" in program["message"]
    assert status(report, "spec.lm_head_shared") == "fail"


def test_the_units_working_directory_is_the_servers(host: Host, tmp_path: Path) -> None:
    """The same checkout named by the unit's WorkingDirectory= is what `python -m` will import."""
    checkout = tmp_path / "srv"
    make_build(checkout)
    _humming(checkout)
    p = host.patched
    unit = tmp_path / "sglang.service"
    unit.write_text(
        "[Service]\n"
        f"WorkingDirectory={checkout}\n"
        f"Environment=SGLANG_ENABLE_FP8_LM_HEAD=1 HUMMING_CACHE_DIR={p.env['HUMMING_CACHE_DIR']} "
        f"HUMMING_TMP_DIR={p.env['HUMMING_TMP_DIR']}\n"
        f"ExecStart={cmd(host.venv_python, p.model)}\n"
    )
    env = {k: v for k, v in p.env.items() if not k.startswith(("SGLANG_", "HUMMING_"))}
    rc, report, err = run(env, "--unit", str(unit))
    assert rc == 0, (err, [c for c in report.get("checks", []) if c["status"] != "pass"])
    program = check(report, "launch.program")
    assert program["evidence"]["sglang_root"] == str(checkout / "sglang")
    assert f"started in {checkout}" in program["message"]


def test_missing_program_fails_on_the_servers_host_and_is_inconclusive_elsewhere(
    host: Host, tmp_path: Path
) -> None:
    p = host.patched
    missing = cmd("/opt/nope/bin/python", p.model)
    rc, report, _ = run(p.env, "--launch-cmd", missing)
    assert rc == 69 and report["verdict"] == "inconclusive"
    program = check(report, "launch.program")
    assert program["status"] == "error" and "/opt/nope/bin/python does not exist" in program["message"]
    unit = tmp_path / "nope.service"
    unit.write_text(f"[Service]\nExecStart={missing}\n")
    rc, report, _ = run(p.env, "--unit", str(unit))
    assert rc == 78 and check(report, "launch.program")["status"] == "fail"
    not_exec = tmp_path / "python"
    not_exec.write_text("#!/bin/sh\n")
    rc, report, _ = run(p.env, "--launch-cmd", cmd(not_exec, p.model))
    assert rc == 69 and "is not executable" in check(report, "launch.program")["message"]


def test_launch_never_execs_what_cannot_run(host: Host, tmp_path: Path) -> None:
    """`launch` used to exec a missing program (exit 2, restarted forever by systemd) or an interpreter
    without sglang; now preflight refuses it with 78 (RestartPreventExitStatus) and nothing runs."""
    p = host.patched
    args = cmd("/opt/nope/bin/python", p.model).split()
    rc, report, err = run(p.env, "--", *args, command="launch")
    assert rc == 78 and check(report, "launch.program")["status"] == "fail"
    assert "cannot exec" not in err
    bare = fake_interpreter(tmp_path / "bare" / "bin", None)
    rc, report, err = run(p.env, "--", *cmd(bare, p.model).split(), command="launch")
    assert rc == 78 and "cannot import sglang" in check(report, "launch.program")["message"]
    assert "No module named" not in err  # the server's interpreter never ran the module


def test_args_only_file_cannot_prove_the_program(host: Host, tmp_path: Path) -> None:
    args = tmp_path / "server.args"
    args.write_text(cmd("python", host.patched.model).split("-m sglang.launch_server ", 1)[1] + "\n")
    rc, report, _ = run(host.patched.env, "--launch-args-file", str(args))
    assert rc == 69
    program = check(report, "launch.program")
    assert program["status"] == "error" and "full command" in program["message"]


def test_service_user_drives_writability(host: Host, tmp_path: Path) -> None:
    """--service-user for a user that does not exist says so (it used to say "not writable"); the unit's
    User= is the account whose writability counts (it used to be whoever ran preflight)."""
    p = host.patched
    rc, report, _ = run(p.env, "--launch-cmd", p.cmd(), "--service-user", "no-such-user-sv")
    runtime = check(report, "moe.humming_runtime")
    assert runtime["status"] == "error" and "'no-such-user-sv' does not exist" in runtime["message"]
    assert rc == 69
    unit = tmp_path / "sglang.service"
    cache = tmp_path / "root-only-cache"
    cache.mkdir(mode=0o755)
    (cache / "0123abcd").mkdir()
    (cache / "0123abcd" / "kernel.cubin").write_bytes(b"\x7fELF")
    unit.write_text(
        "[Service]\nUser=nobody\n"
        f"Environment=SGLANG_ENABLE_FP8_LM_HEAD=1 HUMMING_CACHE_DIR={cache} HUMMING_TMP_DIR={cache}\n"
        f"ExecStart={p.cmd()}\n"
    )
    env = {k: v for k, v in p.env.items() if not k.startswith(("SGLANG_", "HUMMING_"))}
    assert os.geteuid() == 0 or os.access(cache, os.W_OK)  # we can write it; nobody cannot
    rc, report, _ = run(env, "--unit", str(unit))
    runtime = check(report, "moe.humming_runtime")
    assert rc == 78 and runtime["status"] == "fail" and "not writable by nobody" in runtime["message"]
    unit.write_text(unit.read_text().replace("User=nobody", "User=no-such-user-sv"))
    rc, report, _ = run(env, "--unit", str(unit))
    runtime = check(report, "moe.humming_runtime")
    assert runtime["status"] == "error" and "User= 'no-such-user-sv' does not exist" in runtime["message"]


def test_an_empty_or_relative_path_entry_is_the_working_directory_as_execvp_searches_it(
    tmp_path: Path,
) -> None:
    """execvp(3): an empty PATH entry is the current directory, a relative one is below it; they were
    skipped (red team 19), so ``PATH=:/usr/bin`` found /usr/bin/python3 where the server runs ./python3.
    Held to the real execvp: ``env`` (which calls it) with the same PATH, from the same directory."""
    from validator.sources.host.program import resolve_program

    (tmp_path / "bin").mkdir()
    for where in (tmp_path / "python3", tmp_path / "bin" / "python3"):
        where.write_text(f"#!/bin/sh\necho {where}\n")
        where.chmod(0o755)
    for path, found in ((":/usr/bin", tmp_path / "python3"), ("bin:/usr/bin", tmp_path / "bin" / "python3")):
        real = subprocess.run(
            ["/usr/bin/env", f"PATH={path}", "python3"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        assert real.stdout.strip() == str(found)
        assert resolve_program("python3", {"PATH": path}, tmp_path) == (found, None)


def test_a_program_looked_up_in_a_working_directory_known_only_at_run_time_is_not_looked_up_here(
    tmp_path: Path,
) -> None:
    """Red team 21: where a script's ``cd`` goes is known only at run time, ``exec ./python3`` and
    ``PATH=:/usr/bin exec python3`` were resolved in preflight's own directory (8cc1af3 joined a relative
    entry to ``cwd or Path.cwd()``): the operator's python3 there was probed and its SGLang judged as the
    server's. Unknown instead, not the program's fault; an absolute entry before the relative one still
    finds it, as execvp would there."""
    from validator.sources.launch.script import launch_from_script
    from validator.sources.sglang.interpreter import inspect_program

    here_python = tmp_path / "python3"
    here_python.write_text("#!/bin/sh\nexit 0\n")
    here_python.chmod(0o755)
    cases = {
        "exec ./python3": "is relative to the working directory, known only at run time",
        "PATH=:/usr/bin exec python3": "its PATH entry empty comes before any that holds it",
        "PATH=bin:/usr/bin exec python3": "its PATH entry 'bin' comes before any that holds it",
    }
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for line, why in cases.items():
            script = tmp_path / "start.sh"
            script.write_text(
                f'#!/bin/bash\ncd "$(cat ~/where)"\n{line} -m sglang.launch_server --model-path /m\n'
            )
            launch = launch_from_script(script, env={"PATH": "/usr/bin:/bin"}).facts
            facts, probe = inspect_program(launch, on_server_host=True)
            assert probe is None and facts.path is None and facts.not_provable, line
            assert why in str(facts.problem) and "$(cat ~/where)" in str(facts.problem), (line, facts.problem)
    finally:
        os.chdir(cwd)
    from validator.sources.host.program import resolve_program

    # found in an absolute entry before the working directory's: known, as execvp finds it first
    assert resolve_program("sh", {"PATH": "/bin::"}, None, "unknown") == (Path("/bin/sh"), None)


def test_a_path_of_many_empty_or_repeated_entries_is_searched_once_per_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 21: another user's script with ``PATH=`` and 200,000 ``:`` (each the working directory,
    as execvp searches it) held root's preflight 31 s: every entry walked again, in the shell reader's
    lookup and the program's. A directory searched once answers the same the second time; and a PATH of
    128 KiB or more is one execve refuses (E2BIG): the program cannot run."""
    from validator.sources.host import program as host_program
    from validator.sources.host.program import resolve_program
    from validator.sources.launch.shell import programs as shell_programs

    looks: list[str] = []
    for module in (host_program, shell_programs):
        real = module.look_unplanted
        monkeypatch.setattr(
            module, "look_unplanted", lambda p, *a, _r=real, **k: looks.append(p) or _r(p, *a, **k)
        )
    path = ":" * 100_000 + "/usr/bin"
    assert shell_programs.which("sh", path, str(tmp_path)) == "/usr/bin/sh"
    assert resolve_program("sh", {"PATH": path}, tmp_path) == (Path("/usr/bin/sh"), None)
    assert len(looks) == 4, len(looks)  # the working directory and /usr/bin, once in each lookup
    found, why = resolve_program("sh", {"PATH": "/nonexistent:" * 11_000 + "/usr/bin"}, tmp_path)
    assert found is None and "over 128 KiB" in str(why), why
    assert isinstance(shell_programs.which("sh", "/x:" * 50_000, str(tmp_path)), shell_programs.Unknown)
