"""Build hook: record the commit a wheel or sdist is built from in ``validator/_build.json``, so that
``spark-validate --version`` can name it where there is no ``.git`` (release wheels, the container image).

Everything else about the package is in ``pyproject.toml``. The file is written into the build tree only
(never into the checkout); an sdist carries it, so a wheel built from the sdist keeps the commit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

BUILD_FILE = Path("validator") / "_build.json"


def _commit() -> str | None:
    if BUILD_FILE.is_file():  # building a wheel from an sdist: the sdist recorded it
        try:
            commit = json.loads(BUILD_FILE.read_text(encoding="utf-8")).get("commit")
        except ValueError:
            commit = None
        return commit if isinstance(commit, str) else None
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _write(base: Path) -> None:
    commit = _commit()
    if commit is None:
        return
    target = base / BUILD_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"commit": commit}) + "\n", encoding="utf-8")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):  # an editable install reads the checkout's own .git
            _write(Path(self.build_lib))


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        _write(Path(base_dir))


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
