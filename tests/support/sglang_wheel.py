"""The real SGLang 0.5.23 wheel, fetched once and unpacked, for tests that must read SGLang's own source.

Tests never trust a hand-made copy of SGLang: they read the files of the wheel PyPI serves. The wheel is
downloaded with ``pip download --no-deps sglang==0.5.23`` into ``SPARK_VALIDATE_TEST_CACHE`` (default
``.cache/`` in the checkout) and unpacked next to it; `.ci/run` pre-fetches it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

SGLANG_VERSION = "0.5.23"
REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SPARK_VALIDATE_TEST_CACHE", REPO / ".cache"))


def sglang_wheel() -> Path:
    wheels = CACHE / "wheels"
    found = sorted(wheels.glob(f"sglang-{SGLANG_VERSION}-*.whl"))
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                f"sglang=={SGLANG_VERSION}",
                "-d",
                str(wheels),
            ],
            check=True,
        )
        found = sorted(wheels.glob(f"sglang-{SGLANG_VERSION}-*.whl"))
    return found[0]


def sglang_site() -> Path:
    """A directory holding the unpacked wheel: ``<site>/sglang/...`` (like a site-packages)."""
    site = CACHE / f"sglang-{SGLANG_VERSION}-site"
    marker = site / ".complete"
    if not marker.exists():
        site.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(sglang_wheel()) as zf:
            zf.extractall(site)
        marker.touch()
    return site


def sglang_root() -> Path:
    """The unpacked ``sglang`` package directory."""
    return sglang_site() / "sglang"


def class_fields(source: Path, name: str) -> set[str]:
    """The annotated fields of class ``name`` in the SGLang source file ``source``, read with ``ast``
    (SGLang's modules import torch and more; the test needs only the names)."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    return {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def returned_keys(source: Path, function: str) -> set[str]:
    """The string keys of the dict literal that ``function`` in the SGLang source file ``source`` returns
    (a builder such as ``build_memory_usage``), read with ``ast``."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    ret = next(n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and isinstance(n.value, ast.Dict))
    return {k.value for k in ret.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def memory_usage_keys(root: Path) -> set[str]:
    """The keys of ``internal_states[0].memory_usage``: what ``build_memory_usage``
    (srt/managers/scheduler_components/memory_usage.py) returns."""
    return returned_keys(root / "srt/managers/scheduler_components/memory_usage.py", "build_memory_usage")
