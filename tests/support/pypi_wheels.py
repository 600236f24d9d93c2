"""Real releases of the third-party packages whose installed code spark-validate reads, fetched from PyPI.

The readers in ``validator/sources`` (humming-kernels' device code, FlashInfer's distributions and cache
rules) make claims about other projects' files. Tests check those claims against the files PyPI serves,
not against copies written for the test: each release is downloaded once with ``pip download --no-deps``
into ``SPARK_VALIDATE_TEST_CACHE`` (default ``.cache/`` in the checkout, as ``sglang_wheel`` does) and
unpacked beside it as a site-packages directory, the layout pip would install. `.ci/run` pre-fetches them
(``python -m tests.support.pypi_wheels``).

DGX Spark is aarch64, so platform wheels are the ``manylinux_2_28_aarch64`` builds (their Python files
are what a Spark runs); releases that ship a pure wheel get that one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.support.sglang_wheel import CACHE

SPARK_PLATFORM = ("--platform", "manylinux_2_28_aarch64", "--platform", "any", "--python-version", "3.12")

# humming-kernels releases and what their humming/utils/device.py does on GB10, each read from the wheel:
#   0.1.11  calculate_gpu_bandwidth calls nvmlDeviceGetMaxClockInfo(handle, NVML_CLOCK_MEM) inside a
#           try/finally that catches nothing: NVML raises NotSupported on GB10 (0.1.0 to 0.1.11 are alike).
#   0.1.12  calculate_gpu_bandwidth returns 273.0 for compute capability (12, 1) before that query.
#   0.1.13  the same early return, without the try/finally (NVML initialised once per process).
#   0.1.19  no NVML at all: calculate_gpu_bandwidth is gone; bandwidth comes from a C++ extension
#           (humming/csrc/device_info.cpp, CUDA driver attributes, GB10 handled for sm_121), 0.1.14 onwards.
#   0.1.20  the same as 0.1.19 (the newest release on the index in Dec 2026).
HUMMING_UNSAFE = ("0.1.11",)
HUMMING_SAFE = ("0.1.12", "0.1.13", "0.1.19", "0.1.20")
HUMMING_VERSIONS = HUMMING_UNSAFE + HUMMING_SAFE

# SGLang releases besides 0.5.23 (tests/support/sglang_wheel.py): 0.5.9 predates everything the recipes
# need: no DSPARK (no worker, no SpeculativeAlgorithm member), no humming MoE backend, no FP8-head
# variable, MOE_RUNNER_BACKEND_CHOICES still in srt/server_args.py.
SGLANG_OLD = "0.5.9"

# flashinfer-python and flashinfer-cubin: 0.6.3 both (a matching pair), and flashinfer-python 0.6.2
# (a mismatch with cubin 0.6.3, which 0.6.x's flashinfer/jit/env.py refuses at import). 0.7.2 is what
# SGLang 0.5.23 pins (flashinfer_python[cu13]==0.7.2) and 0.7.4 the newest on the index (Dec 2026); both
# ignore a mismatched flashinfer-cubin and download cubins on demand, and no flashinfer-cubin 0.7.x exists
# there: 0.6.13 is the newest.
FLASHINFER_PYTHON_OLD = ("0.6.2", "0.6.3")
FLASHINFER_PYTHON_NEW = ("0.7.2", "0.7.4")
FLASHINFER_PYTHON_VERSIONS = FLASHINFER_PYTHON_OLD + FLASHINFER_PYTHON_NEW
FLASHINFER_CUBIN_VERSIONS = ("0.6.3", "0.6.13")


def _dist_file(name: str) -> str:
    return name.replace("-", "_")


def wheel(name: str, version: str) -> Path:
    """The release's wheel in the cache, downloaded on first use."""
    wheels = CACHE / "wheels"
    pattern = f"{_dist_file(name)}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
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
                "--only-binary=:all:",
                *SPARK_PLATFORM,
                f"{name}=={version}",
                "-d",
                str(wheels),
            ],
            check=True,
            timeout=600,
        )
        found = sorted(wheels.glob(pattern))
    return found[0]


def site(name: str, version: str, *, keep: Callable[[str], bool] | None = None) -> Path:
    """A site-packages directory holding the unpacked release (its packages and ``*.dist-info``).

    ``keep`` selects archive members (a release too large to keep whole: flashinfer-cubin's 150 MB of
    cubins, FlashInfer's CUDA sources, are not what any reader looks at); its wheel is then deleted once
    unpacked."""
    where = CACHE / f"{_dist_file(name)}-{version}-site"
    marker = where / ".complete"
    if not marker.exists():
        if where.exists():
            shutil.rmtree(where)
        where.mkdir(parents=True)
        whl = wheel(name, version)
        with zipfile.ZipFile(whl) as zf:
            members = [m for m in zf.namelist() if keep is None or keep(m)]
            zf.extractall(where, members)
        if keep is not None:
            whl.unlink()
        marker.touch()
    return where


def _not_cubins(member: str) -> bool:
    return not member.startswith("flashinfer_cubin/cubins/")


def _python_and_metadata(member: str) -> bool:
    """FlashInfer's Python modules and its dist-info: what the tests read (the CUDA sources and headers
    that make up most of the 48 MB unpacked are not)."""
    return member.endswith(".py") or ".dist-info/" in member


def humming_site(version: str) -> Path:
    return site("humming-kernels", version)


def flashinfer_python_site(version: str) -> Path:
    return site("flashinfer-python", version, keep=_python_and_metadata)


def flashinfer_cubin_site(version: str) -> Path:
    return site("flashinfer-cubin", version, keep=_not_cubins)


def install_into(target: Path, sites: Iterable[Path]) -> Path:
    """Copy unpacked releases into ``target`` (a fake server venv's site-packages), as pip would lay
    them out; returns ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for src in sites:
        for entry in src.iterdir():
            if entry.name == ".complete":
                continue
            if entry.is_dir():
                shutil.copytree(entry, target / entry.name, dirs_exist_ok=True)
            else:
                shutil.copy2(entry, target / entry.name)
    return target


def install_dist_info(target: Path, site_dir: Path) -> Path:
    """Copy only the release's ``*.dist-info`` into ``target`` (for readers of the installed versions)."""
    for info in site_dir.glob("*.dist-info"):
        shutil.copytree(info, target / info.name, dirs_exist_ok=True)
    return target


def sglang_old_site() -> Path:
    return site("sglang", SGLANG_OLD)


def fetch_all() -> list[Path]:
    """Every release the tests read (for `.ci/run`, so no test downloads)."""
    out = [humming_site(v) for v in HUMMING_VERSIONS] + [sglang_old_site()]
    out += [flashinfer_python_site(v) for v in FLASHINFER_PYTHON_VERSIONS]
    out += [flashinfer_cubin_site(v) for v in FLASHINFER_CUBIN_VERSIONS]
    return out


if __name__ == "__main__":
    for path in fetch_all():
        print(path)
