"""How the command line ends, as a shell user meets it (the contract's exit codes):

- a closed output pipe (``spark-validate rules list | head -1``) ends quietly, exit 0 or 141 and nothing on
  stderr, with Python's output buffered as it is by default (no ``PYTHONUNBUFFERED``), for every command;
- ``--output`` naming a file in a missing directory is a usage error (exit 2), found before any work;
- ``--version`` names the build's commit: from the checkout (however git keeps the ref), and from a wheel
  (which has no ``.git``);
- ``--allow-partial`` accepts every critical check that could not run, ``server.log`` included; a server
  that was never reached is never a pass.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.check_helpers import run_check
from tests.support.cli import REPO, run_cli
from tests.support.loopback import free_port
from tests.support.prerequisite import missing
from tests.support.sim_process import sim_process
from validator.cli import COMMANDS


def _buffered_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(REPO)
    env["NO_COLOR"] = "1"
    return env


def _into_closed_pipe(args: list[str]) -> tuple[int, str]:
    """Run the CLI with stdout a pipe whose reader has already gone (as ``| head -1`` after one line, or
    ``| true``): the first write, or the final flush, meets EPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "validator", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=_buffered_env(),
            cwd=REPO,
            timeout=60,
        )
    finally:
        os.close(write)
    return proc.returncode, proc.stderr


# Every command's help, and the commands that print a report or a listing.
PIPED = [
    ["--help"],
    ["--version"],
    *([name, "--help"] for name in COMMANDS),
    ["rules", "list"],
    ["rules", "show", "spec.config"],
    ["sim", "--list"],
    ["preflight", "--format", "json", "--launch-cmd", "python -m sglang.launch_server --model-path /m"],
    ["preflight", "--format", "text", "--launch-cmd", "python -m sglang.launch_server --model-path /m"],
    ["preflight", "--format", "html", "--launch-cmd", "python -m sglang.launch_server --model-path /m"],
    ["check", "--url", "http://127.0.0.1:1", "--format", "json"],
    ["demo", "--format", "json"],
]
REPORT_CODES = {"preflight": (69, 78), "check": (69,)}  # their verdicts, as without a pipe


@pytest.mark.parametrize("args", PIPED, ids=" ".join)
def test_a_closed_output_pipe_ends_quietly(args: list[str]) -> None:
    rc, stderr = _into_closed_pipe(args)
    if args[0] == "check":  # its progress lines go to stderr by design; nothing else may
        assert all(line.startswith("connecting ") for line in stderr.splitlines()), stderr
    else:
        assert stderr == "", stderr
    assert rc in (0, 141) or rc in REPORT_CODES.get(args[0], ()), rc


def test_head_one_reads_the_first_line_and_the_command_ends_quietly() -> None:
    """The shell form itself: bash's ``set -o pipefail`` reports the writer's status."""
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {shlex.quote(sys.executable)} -m validator rules list | head -1"],
        capture_output=True,
        text=True,
        env=_buffered_env(),
        cwd=REPO,
        timeout=60,
    )
    assert proc.stderr == "" and proc.returncode in (0, 141), (proc.returncode, proc.stderr)
    assert proc.stdout.count("\n") == 1 and "ling-3.0-flash" in proc.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["preflight", "--launch-cmd", "python -m sglang.launch_server --model-path /m"],
        ["check", "--url", "http://127.0.0.1:1", "--wait", "30"],
        ["launch", "--", "python", "-m", "sglang.launch_server", "--model-path", "/m"],
    ],
    ids=lambda a: a[0],
)
def test_output_into_a_missing_directory_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "no-such-dir" / "report.json"
    proc = run_cli(*args[:1], "--output", str(missing), *args[1:], timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert str(missing.parent) in proc.stderr and "does not exist" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not missing.parent.exists()


def test_output_naming_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("preflight", "--output", str(tmp_path), "--launch-cmd", "x", timeout=30)
    assert proc.returncode == 2 and "is a directory" in proc.stderr


def _git_head() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
    )
    return out.stdout.strip()


def test_version_names_the_checkouts_commit() -> None:
    proc = run_cli("--version", timeout=30)
    assert proc.returncode == 0
    assert proc.stdout.startswith("spark-validate ") and f"(commit {_git_head()[:12]})" in proc.stdout


def test_version_reads_the_commit_however_git_keeps_it(tmp_path: Path) -> None:
    """Read by hand, without running git, from each layout a checkout has: a loose branch ref, the
    same ref packed (``git gc``, ``git pack-refs``), a detached HEAD (CI's checkouts) and a linked
    worktree, whose ``.git`` is a file and whose refs live in the main repository."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "validator", repo / "validator", ignore=shutil.ignore_patterns("__pycache__"))

    def git(*args: str, cwd: Path = repo) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
        out = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=True
        )
        return out.stdout.strip()

    def version_of(checkout: Path) -> str:
        env = {**_buffered_env(), "PYTHONPATH": str(checkout)}
        proc = subprocess.run(
            [sys.executable, "-m", "validator", "--version"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    git("init", "-q", "-b", "main")
    git("add", "validator")
    git("commit", "-q", "-m", "one")
    first = git("rev-parse", "HEAD")
    assert f"(commit {first[:12]})" in version_of(repo)  # refs/heads/main, a loose file
    git("pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert f"(commit {first[:12]})" in version_of(repo)  # only in packed-refs now
    git("commit", "-q", "--allow-empty", "-m", "two")
    git("checkout", "-q", "--detach", first)
    assert f"(commit {first[:12]})" in version_of(repo)  # HEAD holds the commit itself
    git("worktree", "add", "-q", "-b", "side", str(tmp_path / "side"), "main")
    side = tmp_path / "side"
    git("commit", "-q", "--allow-empty", "-m", "three", cwd=side)
    third = git("rev-parse", "HEAD", cwd=side)
    assert (side / ".git").is_file() and third != first
    assert f"(commit {third[:12]})" in version_of(side)


def _unmet_build_requirements() -> list[str]:
    """What of pyproject.toml's [build-system] (setuptools>=68, a bdist_wheel: setuptools 70.1 or later has
    its own, older ones take the wheel package's) this environment lacks."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> tuple[int, ...] | None:
        try:
            return tuple(int(x) for x in version(name).split(".")[:2] if x.isdigit())
        except PackageNotFoundError:
            return None

    setuptools = installed("setuptools")
    if setuptools is None:
        return ["setuptools>=68"]
    unmet = [] if setuptools >= (68,) else [f"setuptools>=68 (installed {version('setuptools')})"]
    if setuptools < (70, 1) and installed("wheel") is None:
        unmet.append("wheel (setuptools before 70.1 has no bdist_wheel of its own)")
    return unmet


def test_a_wheel_records_the_commit_it_was_built_from(tmp_path: Path) -> None:
    """A wheel (and the image built from one) has no .git: the build writes the commit into it."""
    unmet = _unmet_build_requirements()
    if unmet:
        missing(
            f"pip wheel --no-build-isolation needs [build-system]'s requirements here, {unmet}: "
            "pip install -e '.[test]'"
        )
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip, str(REPO), "-w", str(tmp_path / "dist")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("spark_validate-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    env = {**_buffered_env(), "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [sys.executable, "-m", "validator", "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"(commit {_git_head()[:12]})" in proc.stdout, proc.stdout
    # and where nothing knows the commit, it says so rather than inventing one
    (site / "validator" / "_build.json").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "validator", "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert proc.returncode == 0 and "(commit unknown)" in proc.stdout, proc.stdout


def test_version_costs_other_commands_nothing() -> None:
    """Building the parser never works out the commit: only ``--version`` does."""
    code = (
        "import sys; from validator.cli import build_parser; build_parser('rules'); "
        "print('validator.build_id' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_buffered_env(), timeout=30
    )
    assert proc.stdout.strip() == "False", proc.stderr


def test_allow_partial_accepts_an_unreadable_log(tmp_path: Path) -> None:
    """``server.log`` is critical whenever ``--log`` is given; when the file cannot be read it could not
    run, and --allow-partial accepts it like any other check that could not run, listing it."""
    with sim_process(tmp_path) as sim:
        args = ("--wait", "20", "--attestation", str(sim.attestation), "--log", str(tmp_path / "missing.log"))
        strict = run_check(sim.url, *args)
        assert strict.status("server.log") == "error"
        strict.inconclusive()
        partial = run_check(sim.url, *args, "--allow-partial")
    assert partial.rc == 0, partial.explain()
    assert partial.report is not None and partial.report["verdict"] == "pass"
    assert partial.report["partial"] is True
    assert "server.log" in partial.report["coverage"]["not_proven"]


def test_allow_partial_never_passes_a_server_that_was_never_reached() -> None:
    run = run_check(f"http://127.0.0.1:{free_port()}", "--wait", "0", "--allow-partial")
    run.not_ready()
