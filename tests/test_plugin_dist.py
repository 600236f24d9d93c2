"""The plugin-only distribution (``plugin/``, ``spark-validate-plugin``) adds itself to SGLang's environment
and nothing else.

The full ``spark-validate`` distribution depends on pydantic, httpx, uvicorn, structlog and tree-sitter;
none of that belongs in the server's venv, next to SGLang's own pins, for a plugin that uses the standard
library only. Here the plugin distribution is built as a release builds it (sdist, then the wheel from the
sdist, from a clean copy of the repository), then:

- installed into an empty venv: its only distribution, and importing every plugin module loads nothing
  but the standard library and its own modules;
- offered to SGLang 0.5.23's environment (``.venv-sglang``, left untouched: ``pip install --dry-run``)
  and installed into a venv layered over it: ``pip freeze`` differs by this one line;
- loaded there by SGLang's real plugin machinery: the entry point is found, and the real ``HookRegistry``
  drives the installed hooks (the same script as tests/test_plugin_contract.py, without this checkout on
  the import path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.run_cache import built_once
from tests.test_packaging import _copy_tree, _tracked_files, _venv
from tests.test_plugin_contract import _STANDIN, _sglang_python
from validator.plugin import hooks

REPO = Path(__file__).resolve().parents[1]


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # without the caller's PYTHONPATH: a checkout on it (and its .egg-info) would count as installed
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=_bare_env(),
    )


def _freeze(python: Path) -> set[str]:
    proc = _pip(python, "freeze", "--all")
    assert proc.returncode == 0, proc.stderr
    return {line for line in proc.stdout.splitlines() if line and not line.startswith("#")}


def _names(freeze: set[str]) -> set[str]:
    """Distribution names of ``pip freeze`` lines (``name==version`` or ``name @ url``)."""
    return {line.split("==")[0].split(" @ ")[0].strip() for line in freeze}


def _bare_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def plugin_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin's wheel, built from a clean copy; once for the run (tests/test_plugin_entry_point.py
    reads it too) and read only."""

    def build(root: Path) -> None:
        _copy_tree(_tracked_files(), root / "src")
        proc = subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(root / "dist"), str(root / "src" / "plugin")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    (wheel,) = (built_once(tmp_path_factory, "plugin-release", build) / "dist").glob(
        "spark_validate_plugin-*.whl"
    )
    return wheel


# Standard library: each top-level module the base interpreter itself provides (built in, frozen, or a
# file under its own stdlib directories, its site-packages excepted), not a list of names: Debian's python3
# imports its own /usr/lib/python3.11/sitecustomize.py at start-up, which no name list has.
_IMPORT_ALL = """
import importlib, importlib.util, json, os, pkgutil, sys, sysconfig
base = {"installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix,
        "base": sys.base_prefix, "platbase": sys.base_exec_prefix}
paths = sysconfig.get_paths(vars=base)
both = lambda d: {os.path.abspath(d), os.path.realpath(d)}
stdlib = set().union(*(both(paths[k]) for k in ("stdlib", "platstdlib")))
site = set().union(*(both(paths[k]) for k in ("purelib", "platlib")))

def under(f, dirs):
    return any(os.path.commonpath([f, d]) == d for d in dirs)

def standard(module):
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.origin in ("built-in", "frozen"):
        return True
    f = getattr(module, "__file__", None)
    if not f:
        return False
    f = os.path.abspath(f)  # where it was found: Debian's sitecustomize.py links to /etc/python3.11
    return under(f, stdlib) and not under(f, site)

import spark_validate_plugin.plugin as plugin
for m in pkgutil.iter_modules(plugin.__path__, "spark_validate_plugin.plugin."):
    importlib.import_module(m.name)
top = {n.split(".")[0] for n in list(sys.modules)} - {"spark_validate_plugin", "__main__"}
third_party = sorted(n for n in top if not (sys.modules.get(n) and standard(sys.modules[n])))
print(json.dumps({"file": plugin.__file__, "third_party": third_party, "plugin_standard": standard(plugin),
                  "validator": importlib.util.find_spec("validator") is not None}))
"""


def test_plugin_wheel_alone_needs_only_the_standard_library(plugin_wheel: Path, tmp_path: Path) -> None:
    bindir = _venv(tmp_path / "venv")
    proc = _pip(bindir / "python", "install", "-q", str(plugin_wheel))
    assert proc.returncode == 0, proc.stderr
    assert _names(_freeze(bindir / "python")) == {"spark-validate-plugin"}
    run = subprocess.run(
        [str(bindir / "python"), "-I", "-c", _IMPORT_ALL],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env=_bare_env(),
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["file"].startswith(str(tmp_path / "venv")), seen
    assert seen["third_party"] == [], seen
    assert seen["plugin_standard"] is False, seen  # the control: an installed module is not the stdlib
    # its own import name: the environment has no top-level `validator` (an unrelated distribution's)
    assert seen["validator"] is False, seen
    assert not list((tmp_path / "venv").glob("lib/python3*/site-packages/validator")), "installed `validator`"


def test_plugin_offered_to_sglangs_environment_installs_only_itself(plugin_wheel: Path) -> None:
    python = _sglang_python()
    before = _freeze(python)
    proc = _pip(python, "install", "--dry-run", "--quiet", "--report", "-", str(plugin_wheel))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [i["metadata"]["name"] for i in report["install"]] == ["spark-validate-plugin"], report["install"]
    assert _freeze(python) == before  # the shared environment is left as it was


def test_plugin_in_sglangs_environment_runs_under_the_real_hook_registry(
    plugin_wheel: Path, tmp_path: Path
) -> None:
    """A venv layered over ``.venv-sglang`` (its site-packages on the path through a ``.pth`` file): the
    install lands in the layer, so the shared environment is untouched while pip and SGLang see both."""
    sglang_python = _sglang_python()
    site = subprocess.run(
        [str(sglang_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    layer = tmp_path / "layer"
    subprocess.run([str(sglang_python), "-m", "venv", "--without-pip", str(layer)], check=True, timeout=120)
    python = layer / "bin" / "python"
    (next((layer / "lib").glob("python3*")) / "site-packages" / "sglang-env.pth").write_text(
        str(Path(site).resolve()) + "\n"
    )
    before = _freeze(python)
    proc = _pip(python, "install", "-q", str(plugin_wheel))
    assert proc.returncode == 0, proc.stderr
    added = _freeze(python) - before
    assert _names(added) == {"spark-validate-plugin"}, added
    assert before <= _freeze(python)  # nothing removed or changed either

    script = tmp_path / "reg.py"
    standin = _STANDIN.replace("sys.path.insert(0, {repo!r})\n", "")
    assert "sys.path.insert" not in standin and "from validator.plugin import" in standin
    standin = standin.replace("from validator.plugin import", "from spark_validate_plugin.plugin import")
    script.write_text(
        standin
        + "import importlib.metadata as md, importlib.util, spark_validate_plugin.plugin as plugin\n"
        + "eps = md.entry_points(group='sglang.srt.plugins')\n"
        + "eps = [e.value for e in eps if e.name == 'spark_validate']\n"
        + "print('entry', eps, plugin.__file__)\n"
        + "print('validator importable', importlib.util.find_spec('validator') is not None)\n"
    )
    env = {**_bare_env(), "SPARK_VALIDATE_ATTESTATION": str(tmp_path / "att.json")}
    run = subprocess.run(
        [str(python), str(script)], capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"registered {sorted(hooks.HOOKS)}" in run.stdout
    assert "result original-result" in run.stdout
    assert 'doc {"model_loaded": "ran", "init_lm_head": "not_reached"}' in run.stdout
    assert f"entry ['spark_validate_plugin.plugin:register'] {layer}" in run.stdout
    assert "validator importable False" in run.stdout
