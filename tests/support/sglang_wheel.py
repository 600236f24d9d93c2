"""The real SGLang 0.5.23 wheel, fetched once and unpacked, for tests that must read SGLang's own source.

Tests never trust a hand-made copy of SGLang: they read the files of the wheel PyPI serves. The wheel is
downloaded with ``pip download --no-deps sglang==0.5.23`` into ``SPARK_VALIDATE_TEST_CACHE`` (default
``.cache/`` in the checkout) and unpacked next to it; `.ci/run` pre-fetches it.
"""

from __future__ import annotations

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
