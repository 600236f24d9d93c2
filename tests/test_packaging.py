"""What a release and the container image really ship, installed where nothing of this checkout is visible.

A checkout hides packaging faults: the tests import ``validator`` from the working tree, where every data
file is at hand. Here the two artifacts are built as they are built for users and run from a fresh virtual
environment:

- the release: ``python -m build`` (an sdist, then the wheel built from that sdist), from a copy of the
  files git tracks (a clean clone, as CI and a release start from);
- the image: the build context that ``.dockerignore`` admits, laid out as the Dockerfile's ``COPY`` lines
  place it, then the Dockerfile's own ``pip install`` of that directory.

Each is then asked for ``rules list`` (the built-in packs, which the Dockerfile's last ``RUN`` step also
runs) and ``demo``: without the simulator's optional install (``[sim]``: starlette, uvicorn) it says in one
line what to install (exit 69), as the image does, which never serves the simulator; the release with
``[sim]`` runs it (the simulator and the default pack, end to end).
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from tests.support.run_cache import built_once

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "deploy" / "compose" / "Dockerfile"
PACKS = {
    "ling-3.0-flash-dgx-spark",
    "ling-3.0-flash-dgx-spark-dspark",
    "sglang-cookbook-dgx-spark",
    "ling-3.0-flash-baseline",
}


def _tracked_files() -> list[str]:
    """The files a clean clone of this branch holds: tracked plus new files git does not ignore (so that a
    change under test is part of it before it is committed)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    return [p for p in out.decode().split("\0") if p and os.path.lexists(REPO / p)]


def _copy_tree(files: list[str], dest: Path) -> None:
    for rel in files:
        src, dst = REPO / rel, dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)


def _venv(where: Path) -> Path:
    """A fresh virtual environment with no access to this checkout or the test environment's packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    return where / "bin"


def _pip_install(bindir: Path, *targets: str) -> None:
    """pip into the fresh venv, without the caller's PYTHONPATH: a checkout on it (with the .egg-info an
    editable install leaves) would count as spark-validate already installed, and pip would skip the
    wheel under test."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(bindir / "python"), "install", "-q", *targets],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _run_installed(bindir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed ``spark-validate`` script, run from a directory that holds no checkout, with no
    PYTHONPATH: what it finds, it found in the installed package."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(bindir / "spark-validate"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def _assert_packs(bindir: Path, cwd: Path, root: Path | None = None) -> None:
    """``rules list`` finds the four shipped packs under ``root`` (the install, not a checkout)."""
    listing = _run_installed(bindir, "rules", "list", cwd=cwd)
    assert listing.returncode == 0, listing.stderr
    tail = listing.stdout.strip().splitlines()[-1]
    assert str(root or bindir.parent) in tail, tail  # the installed copy, not a checkout's
    assert {p.strip() for p in tail.split(":", 1)[1].split(",")} == PACKS, tail


def _assert_demo(bindir: Path, cwd: Path) -> None:
    """``demo`` passes the healthy simulator and catches the trap."""
    demo = _run_installed(bindir, "demo", "--speed", "200", cwd=cwd)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "verdicts: healthy PASS, draft-head-weight-only FAIL" in demo.stdout


def _assert_no_simulator_server(bindir: Path, cwd: Path) -> None:
    """Without ``[sim]``: neither starlette nor uvicorn is installed, and ``demo`` and ``sim`` each say in one
    line what to install (exit 69), with no traceback and nothing on stdout."""
    python = bindir / "python"
    for name in ("starlette", "uvicorn"):
        probe = subprocess.run([str(python), "-c", f"import {name}"], capture_output=True, timeout=60)
        assert probe.returncode != 0, f"{name} is installed without [sim]"
    for command in (("demo",), ("sim", "--port", "0")):
        run = _run_installed(bindir, *command, cwd=cwd)
        assert (run.returncode, run.stdout) == (69, ""), (command, run.returncode, run.stdout, run.stderr)
        assert run.stderr == (
            f"spark-validate: {command[0]}: the simulator's web server (starlette, uvicorn) is an optional "
            "install: pip install 'spark-validate[sim]'\n"
        ), run.stderr


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` on a clean copy: the sdist, then the wheel from the unpacked sdist. Built once
    for the run (tests/test_plugin_entry_point.py reads it too) and read only."""

    def build(root: Path) -> None:
        src = root / "src"
        _copy_tree(_tracked_files(), src)
        proc = subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(root / "dist"), str(src)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    return built_once(tmp_path_factory, "release", build) / "dist"


def test_release_sdist_and_wheel_carry_the_packs(release: Path) -> None:
    (sdist,) = release.glob("*.tar.gz")
    (wheel,) = release.glob("*.whl")
    with tarfile.open(sdist) as tar:
        in_sdist = {PurePosixPath(*PurePosixPath(m.name).parts[1:]) for m in tar.getmembers() if m.isfile()}
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = {PurePosixPath(n) for n in zf.namelist()}
    for pack in [*sorted(PACKS), "probe-prompts"]:
        rel = PurePosixPath("validator/data/rules") / f"{pack}.yaml"
        assert rel in in_sdist, rel
        assert rel in in_wheel, rel


def test_release_wheel_runs_from_a_fresh_venv(release: Path, tmp_path: Path) -> None:
    """The wheel alone: the tool and its packs, no simulator server; with ``[sim]`` added, ``demo`` runs."""
    (wheel,) = release.glob("*.whl")
    bindir = _venv(tmp_path / "venv")
    _pip_install(bindir, str(wheel))
    _assert_packs(bindir, tmp_path)
    _assert_no_simulator_server(bindir, tmp_path)
    _pip_install(bindir, f"{wheel}[sim]")
    _assert_demo(bindir, tmp_path)


# ---- the image's build context ----


def _dockerignore_patterns() -> list[tuple[bool, str]]:
    """``.dockerignore`` as Docker reads it: one pattern a line, ``#`` comments, ``!`` re-includes, each
    pattern cleaned like a path (leading ``/`` and trailing ``/`` dropped)."""
    rules = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = os.path.normpath(line[1:].strip() if negate else line).strip("/")
        rules.append((negate, pattern))
    return rules


def _pattern_matches(pattern: str, rel: str) -> bool:
    """Docker's matcher: a pattern matches a path or any of its parent directories; ``*`` stays within one
    path element and ``**`` spans any number of them."""
    parts = rel.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    pat_parts = pattern.split("/")

    def match(pp: list[str], cp: list[str]) -> bool:
        if not pp:
            return not cp
        if pp[0] == "**":
            return any(match(pp[1:], cp[i:]) for i in range(len(cp) + 1))
        return bool(cp) and fnmatch.fnmatchcase(cp[0], pp[0]) and match(pp[1:], cp[1:])

    return any(match(pat_parts, c.split("/")) for c in candidates)


def _in_build_context(rel: str, rules: list[tuple[bool, str]]) -> bool:
    included = True
    for negate, pattern in rules:
        if _pattern_matches(pattern, rel):
            included = negate
    return included


def test_dockerignore_matcher_reads_docker_semantics() -> None:
    """The matcher above is the test's instrument: hold it to Docker's documented cases."""
    rules = [(False, "*"), (True, "validator"), (False, "**/__pycache__")]
    assert _in_build_context("validator/cli.py", rules)
    assert not _in_build_context("validator/__pycache__/cli.cpython-311.pyc", rules)
    assert not _in_build_context("rules/x.yaml", rules)
    assert not _in_build_context("README.md", rules)


def _image_source_tree(context: Path, dest: Path) -> str:
    """Apply the Dockerfile's ``COPY`` lines (no ``--from``) from the build context: each source file or
    directory is placed at its destination under ``dest``. Returns the ``RUN`` line that installs
    spark-validate (the one that calls pip)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    install: str | None = None
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0].upper() == "COPY" and not any(w.startswith("--from") for w in words):
            *sources, target = [w for w in words[1:] if not w.startswith("--")]
            for s in sources:
                src = context / s
                assert src.exists() or src.is_symlink(), f"COPY {s}: not in the build context"
                if src.is_dir() and not src.is_symlink():
                    shutil.copytree(src, dest / target.lstrip("/"), symlinks=True, dirs_exist_ok=True)
                else:
                    where = dest / target.lstrip("/")
                    where = where / src.name if target.endswith("/") else where
                    where.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, where, follow_symlinks=False)
        if words[0].upper() == "RUN" and "pip" in words:
            install = line.split(None, 1)[1]
    assert install is not None, "the Dockerfile installs spark-validate with pip"
    return install


def test_image_build_context_installs_with_its_packs(tmp_path: Path) -> None:
    """The Dockerfile's install step, run by bash as written, with the image's root at ``image/`` and a
    fresh venv standing in for SGLang's interpreter (``python3``): the tool is on PATH with its packs, and
    the server's interpreter gained the plugin distribution alone."""
    rules = _dockerignore_patterns()
    context = tmp_path / "context"
    for rel in _tracked_files():
        if _in_build_context(rel, rules):
            _copy_tree([rel], context)
    image = tmp_path / "image"
    run_line = _image_source_tree(context, image)
    server = tmp_path / "sglang-python"
    subprocess.run([sys.executable, "-m", "venv", str(server)], check=True, timeout=120)
    shim = tmp_path / "shim"
    shim.mkdir()
    # a wrapper, not a link: a venv's interpreter reached through a link elsewhere is the base interpreter
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{server}/bin/python" "$@"\n')
    (shim / "python3").chmod(0o755)
    (image / "usr" / "local" / "bin").mkdir(parents=True)
    before = _freeze(server / "bin" / "python")
    script = run_line.replace("/opt/", f"{image}/opt/").replace("/usr/local/", f"{image}/usr/local/")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{shim}{os.pathsep}{image}/usr/local/bin{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    added = _freeze(server / "bin" / "python") - before
    assert [line.split("==")[0] for line in added] == ["spark-validate-plugin"], added
    _assert_packs(image / "usr" / "local" / "bin", tmp_path, root=image)
    # the image's own venv: production, no simulator server
    _assert_no_simulator_server(image / "opt" / "spark-validate" / "venv" / "bin", tmp_path)


def _freeze(python: Path) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "freeze", "--all"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return {line.split(" @ ")[0] for line in proc.stdout.splitlines() if line and not line.startswith("#")}
