"""One plugin, one import name, one entry point: what SGLang's loader finds in an environment holding the
full ``spark-validate`` distribution, and then the plugin distribution beside it.

SGLang 0.5.23's ``load_plugins_by_group`` (sglang/srt/plugins/__init__.py) lists
``importlib.metadata.entry_points(group="sglang.srt.plugins")``, keeps one callable per entry-point name
and ``ep.load()``s each; the script below does the same in the installed environment (``-I``, no checkout
on its path), then says what the load imported beyond the standard library.

The full distribution registers nothing there (an environment that holds it by mistake gains no second
plugin: before, it registered ``validator.plugin:register`` under the same name, and SGLang's dict kept
whichever came last); the plugin distribution registers ``spark_validate_plugin.plugin:register``, whose
load imports the standard library and its own package only, never ``validator``, even where the full
distribution is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.test_packaging import _venv, release
from tests.test_plugin_dist import plugin_wheel

__all__ = ["plugin_wheel", "release"]  # the two builds, as fixtures

_LOADER = """
import importlib.metadata as md, json, sys
eps = md.entry_points(group="sglang.srt.plugins")
before = set(sys.modules)
loaded = {ep.name: ep.load() for ep in eps}
new = sorted(set(sys.modules) - before)
print(json.dumps({
    "eps": [[ep.name, ep.value, ep.dist.name if ep.dist else None] for ep in eps],
    "callable": {name: callable(f) for name, f in loaded.items()},
    "third_party": [m for m in new if m.split(".")[0] not in sys.stdlib_module_names
                    and m.split(".")[0] != "spark_validate_plugin"],
    "validator": "validator" in sys.modules,
}))
"""


def _pip(bindir: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(bindir / "python"), "install", "-q", *args],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]


def _as_sglang_loads(bindir: Path, cwd: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["SPARK_VALIDATE_ATTESTATION"] = str(
        cwd / "attestation.json"
    )  # register writes nothing yet; if so, here
    run = subprocess.run(
        [str(bindir / "python"), "-I", "-c", _LOADER],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_sglangs_loader_finds_one_plugin_of_its_own_import_name(
    release: Path, plugin_wheel: Path, tmp_path: Path
) -> None:
    (full,) = release.glob("spark_validate-*.whl")
    bindir = _venv(tmp_path / "venv")
    _pip(bindir, "--no-deps", str(full))  # its files and metadata; its dependencies do not matter here
    alone = _as_sglang_loads(bindir, tmp_path)
    assert alone["eps"] == [], alone  # the full distribution registers no plugin
    _pip(bindir, str(plugin_wheel))
    both = _as_sglang_loads(bindir, tmp_path)
    assert both["eps"] == [
        ["spark_validate", "spark_validate_plugin.plugin:register", "spark-validate-plugin"]
    ]
    assert both["callable"] == {"spark_validate": True}
    assert both["third_party"] == [] and both["validator"] is False, both
