"""Launcher scripts read by ``preflight --script``: real ones copied where their repository publishes a
licence, stand-ins written here where it publishes none (``tests/corpus/scripts/README.md`` cites each
source and says which is which).

The stand-in for 0xBakeer's ling3-flash-spark ``start.sh`` with its ``.env`` (that repository publishes no
licence; the stand-in keeps its profiles, its ``.env`` precedence, its branches, guard and invocations):
every profile, chosen in ``.env`` or by ``PROFILE=...`` in the environment (the script's own precedence),
is read exactly as bash runs it (the same script run by real bash, its ``python3`` a capture shim, gives
the same program, argv and environment), passes the pack of the recipe it follows and fails the others
on the checks a reviewer would name. Its MemAvailable guard (``awk`` on ``/proc/meminfo``, exit when
short) is reported as assumed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.in_process import preflight_json_in_process
from tests.support.shell_differential import SHIM
from tests.test_recipe_packs import BASELINE, COOKBOOK, DEFAULT, DSPARK, Server, server  # noqa: F401 (the fixture)
from validator.sources.launch.script import BASH_BOOKKEEPING, read_exec
from validator.sources.launch.shell.values import join

REPO = Path(__file__).resolve().parents[1]
BAKEER = REPO / "tests" / "corpus" / "scripts" / "0xbakeer-ling3-flash-spark"

# profile -> the pack of the recipe it follows
PROFILES = {
    "humming-nextn": DEFAULT,
    "humming-dspark": DSPARK,
    "cookbook": COOKBOOK,
    "cookbook-exact": COOKBOOK,
}


def _checkout(where: Path, python: Path | None) -> Path:
    """The repository as its README sets it up: start.sh, .env from env.example, a .venv whose python3
    is ``python`` (the server's interpreter), or the capture shim when None."""
    where.mkdir(parents=True)
    shutil.copy(BAKEER / "start.sh", where / "start.sh")
    (where / "start.sh").chmod(0o755)
    shutil.copy(BAKEER / "env.example", where / ".env")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where / ".venv")], check=True, timeout=60
    )
    for name in ("python", "python3"):
        target = where / ".venv" / "bin" / name
        target.unlink()
        if python is not None:
            target.symlink_to(python)
        else:
            (where / "out").mkdir(exist_ok=True)
            target.write_text(SHIM.format(out=where / "out"))
            target.chmod(0o755)
    return where


@pytest.fixture(scope="module")
def bakeer(
    server: Server,  # noqa: F811 (the server fixture, built as in test_recipe_packs)
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, dict[str, str]]:
    """(checkout for preflight, checkout for bash, environment): the models where the recipe looks."""
    base = tmp_path_factory.mktemp("ling3-flash-spark")
    home = Path(server.env["HOME"])
    (home / "models").mkdir(exist_ok=True)
    for name, target in (("Ling-3.0-flash-fp4", server.model), ("Ling-3.0-flash-dspark", server.draft)):
        link = home / "models" / name
        if not link.exists():
            link.symlink_to(target)
    env = {k: v for k, v in server.env.items() if k not in ("HUMMING_CACHE_DIR",)}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    return _checkout(base / "checkout", server.python), _checkout(base / "bash", None), env


def _profile(checkout: Path, profile: str) -> None:
    text = (BAKEER / "env.example").read_text().replace("PROFILE=humming-dspark", f"PROFILE={profile}")
    (checkout / ".env").write_text(text)


def _bash(checkout: Path, env: dict[str, str]) -> tuple[str, list[str], dict[str, str]]:
    out = checkout / "out"
    for f in ("argv", "env"):
        (out / f).unlink(missing_ok=True)
    run_env = {**env, "MIN_FREE_GIB": "0"}  # this machine is not an idle Spark: let the guard pass
    proc = subprocess.run(
        [str(checkout / "start.sh")], env=run_env, cwd=checkout, capture_output=True, text=True, timeout=60
    )
    assert (out / "env").is_file(), proc.stderr[-2000:]
    argv = [w.decode() for w in (out / "argv").read_bytes().split(b"\0")[:-1]]
    items = [i.decode() for i in (out / "env").read_bytes().split(b"\0")[:-1]]
    return argv[0], argv[1:], dict(i.split("=", 1) for i in items)


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


@pytest.mark.parametrize("how", ["dotenv", "environment"])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_each_profile_is_read_as_bash_runs_it(
    bakeer: tuple[Path, Path, dict[str, str]], profile: str, how: str
) -> None:
    checkout, shimmed, env = bakeer
    extra = {"PROFILE": profile} if how == "environment" else {}
    for d in (checkout, shimmed):
        _profile(d, "humming-dspark" if how == "environment" else profile)
    program, argv, bash_env = _bash(shimmed, {**env, **extra})
    ex, launched = read_exec(shimmed / "start.sh", {**env, **extra, "MIN_FREE_GIB": "0"})
    assert ex.program == program
    assert [join(f) for f in ex.argv[1:]] == argv  # type: ignore[union-attr]
    mine = {k: v for k, v in ex.env.items() if k not in BASH_BOOKKEEPING}
    assert mine == {k: v for k, v in bash_env.items() if k not in BASH_BOOKKEEPING | {"OLDPWD"}} | {
        k: v for k, v in mine.items() if k == "OLDPWD"
    }
    assumed = [a for e in launched for a in e.assumed]
    assert any("_avail < MIN_FREE_GIB" in a for a in assumed), assumed


def _preflight(env: dict[str, str], pack: str, checkout: Path) -> tuple[int, dict[str, Any], str]:
    return preflight_json_in_process(env, "--rules", pack, "--script", str(checkout / "start.sh"))


# what a reviewer names when a profile is held to another recipe's pack
EXPECTED_FAILS = {
    ("humming-nextn", DSPARK): {"spec.config"},
    ("humming-nextn", COOKBOOK): {"moe.backend", "spec.config"},
    ("humming-dspark", DEFAULT): {"spec.config"},
    ("humming-dspark", COOKBOOK): {"moe.backend"},
    ("cookbook", DEFAULT): {"moe.backend", "spec.config", "lm_head.fp8"},
    ("cookbook", DSPARK): {"moe.backend", "lm_head.fp8"},
    ("cookbook-exact", DEFAULT): {"moe.backend", "spec.config", "lm_head.fp8"},
    ("cookbook-exact", DSPARK): {"moe.backend", "lm_head.fp8"},
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_each_profile_passes_its_pack_and_fails_the_others(
    bakeer: tuple[Path, Path, dict[str, str]], profile: str
) -> None:
    checkout, _, env = bakeer
    _profile(checkout, profile)
    own = PROFILES[profile]
    rc, report, err = _preflight(env, own, checkout)
    bad = [c for c in report.get("checks", []) if c["status"] in ("fail", "error")]
    assert rc == 0 and report["verdict"] == "pass", (err, bad)
    (assumed,) = [c for c in report["checks"] if c["id"] == "launch.warnings"]
    assert assumed["status"] == "warn" and "(( _avail < MIN_FREE_GIB )) failed" in assumed["message"]
    for pack in sorted({DEFAULT, DSPARK, COOKBOOK} - {own}):
        rc, report, err = _preflight(env, pack, checkout)
        failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
        assert rc == 78 and EXPECTED_FAILS[(profile, pack)] <= failed, (pack, failed, err)


def test_profile_from_the_environment_wins_over_dotenv(bakeer: tuple[Path, Path, dict[str, str]]) -> None:
    """``PROFILE=cookbook ./start.sh``: the script keeps the environment's value over its .env."""
    checkout, _, env = bakeer
    _profile(checkout, "humming-dspark")
    rc, report, err = _preflight({**env, "PROFILE": "cookbook"}, COOKBOOK, checkout)
    assert rc == 0 and report["verdict"] == "pass", err
    rc, report, err = _preflight({**env, "PROFILE": "cookbook"}, DSPARK, checkout)
    assert rc == 78 and _statuses(report)["moe.backend"] == "fail", err


def test_an_unknown_profile_launches_nothing(bakeer: tuple[Path, Path, dict[str, str]]) -> None:
    checkout, _, env = bakeer
    rc, _, err = _preflight({**env, "PROFILE": "fast"}, DSPARK, checkout)
    assert rc == 65 and "no path through the script starts the SGLang server" in err and "exit 1" in err


LY01325 = REPO / "tests" / "corpus" / "scripts" / "ly01325-ling3-flash-dgx-spark"
POCHARLIES = REPO / "tests" / "corpus" / "scripts" / "pocharlies-qwen38-flash-next-dgx-spark-sglang"


def _relocated(script: Path, where: Path, root: Path, model: Path | None = None) -> Path:
    """The stand-ins for ly01325's scripts name its author's directories (/home/liuyang/...), as the
    originals do: the same script with ROOT (and the model) moved to this test's directories, nothing else
    changed."""
    text = script.read_text().replace("ROOT=/home/liuyang/Ling", f"ROOT={root}")
    if model is not None:
        text = text.replace("MODEL=/home/liuyang/models/Ling-3.0-flash-fp4", f"MODEL={model}")
    out = where / script.name
    out.write_text(text)
    out.chmod(0o755)
    return out


@pytest.mark.parametrize("name", ["launch-optimized.sh", "launch-baseline.sh", "head.sh"])
def test_other_real_scripts_read_as_bash_runs_them(tmp_path: Path, name: str) -> None:
    """The stand-ins for ly01325's two launchers (exports, an absolute interpreter) and pocharlies' real
    docker run launcher: the reading equals what bash executes (the interpreter, or docker, replaced by the
    capture shim)."""
    out = tmp_path / "out"
    out.mkdir()
    shims = tmp_path / "shims"
    shims.mkdir()
    if name == "head.sh":
        script = tmp_path / name
        shutil.copy(POCHARLIES / name, script)
        (shims / "docker").write_text(SHIM.format(out=out))
        (shims / "docker").chmod(0o755)
    else:
        root = tmp_path / "Ling"
        (root / ".venv" / "bin").mkdir(parents=True)
        (root / ".venv" / "bin" / "python").write_text(SHIM.format(out=out))
        (root / ".venv" / "bin" / "python").chmod(0o755)
        script = _relocated(LY01325 / name, tmp_path, root)
    env = {"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C"}
    proc = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, timeout=60)
    assert (out / "env").is_file(), proc.stderr
    argv = [w.decode() for w in (out / "argv").read_bytes().split(b"\0")[:-1]]
    bash_env = dict(i.decode().split("=", 1) for i in (out / "env").read_bytes().split(b"\0")[:-1])
    ex, _ = read_exec(script, env)
    assert ex.program == argv[0]
    assert [join(f) for f in ex.argv[1:]] == argv[1:]  # type: ignore[union-attr]
    assert {k: v for k, v in ex.env.items() if k not in BASH_BOOKKEEPING} == {
        k: v for k, v in bash_env.items() if k not in BASH_BOOKKEEPING
    }


@pytest.mark.parametrize(
    ("name", "own", "other", "named"),
    [
        ("launch-optimized.sh", DEFAULT, BASELINE, {"moe.backend"}),
        ("launch-baseline.sh", BASELINE, DEFAULT, {"moe.backend", "lm_head.fp8", "spec.config"}),
    ],
)
def test_ly01325_launchers_against_the_recipes(
    server: Server,  # noqa: F811 (the server fixture, built as in test_recipe_packs)
    tmp_path: Path,
    name: str,
    own: str,
    other: str,
    named: set[str],
) -> None:
    """ly01325's optimized launcher (as its stand-in keeps it) follows the DGX Spark recipe (humming, FP8
    head, NEXTN), the baseline the cookbook's plain cell: each passes its pack, with the warnings a reviewer
    of these scripts would give (parsers that are not Ling-3.0's, a YaRN override of a checkpoint that
    declares no RoPE scaling), and fails the other pack on the optimizations it does or does not switch
    on."""
    root = tmp_path / "Ling"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(server.python)
    script = _relocated(LY01325 / name, tmp_path, root, server.model)
    rc, report, err = preflight_json_in_process(server.env, "--rules", own, "--script", str(script))
    assert rc == 0 and report["verdict"] == "pass", (err, report.get("checks"))
    warned = {c["id"] for c in report["checks"] if c["status"] == "warn"}
    assert {"model.tool_call_parser", "model.rope_scaling"} <= warned, warned
    rc, report, err = preflight_json_in_process(server.env, "--rules", other, "--script", str(script))
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert rc == 78 and named <= failed, (failed, err)
