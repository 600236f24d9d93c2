"""The humming-kernels reader against the real releases PyPI serves (tests/support/pypi_wheels.py).

Each release's property is first read here from its own files, independently of the reader (text and
``ast`` of ``humming/utils/device.py`` and the C++ device-info source), then the reader must reach the
verdict that property implies. A release line that changes shape again (a new module, a new guard) shows
up here as a disagreement, not as a silent ``error`` on every DGX Spark.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tests.support.pypi_wheels import HUMMING_SAFE, HUMMING_UNSAFE, HUMMING_VERSIONS, humming_site
from validator.sources.host.humming import gb10_bandwidth_safe, read_humming

QUERY = "nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)"


def _device(version: str) -> Path:
    return humming_site(version) / "humming" / "utils" / "device.py"


def _function(path: Path, name: str) -> ast.FunctionDef | None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return defs[-1] if defs else None


def _package_mentions(version: str, needle: str) -> list[str]:
    pkg = humming_site(version) / "humming"
    return sorted(
        str(p.relative_to(pkg)) for p in pkg.rglob("*.py") if needle in p.read_text(encoding="utf-8")
    )


def test_unguarded_release_is_what_the_test_says() -> None:
    """0.1.11: the memory-clock query sits in calculate_gpu_bandwidth inside a try that only has a
    finally, with no test of the compute capability; SGLang's path reaches it through
    estimate_compute_bound_threshold, which the layer imports from the same module."""
    fn = _function(_device("0.1.11"), "calculate_gpu_bandwidth")
    assert fn is not None
    text = ast.unparse(fn)
    assert QUERY in text and "(12, 1)" not in text
    tries = [n for n in ast.walk(fn) if isinstance(n, ast.Try)]
    outer = next(t for t in tries if any(QUERY in ast.unparse(s) for s in t.body))
    assert outer.finalbody and not outer.handlers
    threshold = _function(_device("0.1.11"), "estimate_compute_bound_threshold")
    assert threshold is not None and "calculate_gpu_bandwidth()" in ast.unparse(threshold)
    layer = (humming_site("0.1.11") / "humming" / "layer.py").read_text(encoding="utf-8")
    assert "from humming.utils.device import estimate_compute_bound_threshold" in layer


@pytest.mark.parametrize("version", ["0.1.12", "0.1.13"])
def test_early_return_releases_are_what_the_test_says(version: str) -> None:
    """0.1.12 and 0.1.13: calculate_gpu_bandwidth returns 273.0 for (12, 1) before the query."""
    fn = _function(_device(version), "calculate_gpu_bandwidth")
    assert fn is not None
    text = ast.unparse(fn)
    assert "if (major, minor) == (12, 1):" in text and "return 273.0" in text
    assert text.index("return 273.0") < text.index(QUERY)


@pytest.mark.parametrize("version", ["0.1.19", "0.1.20"])
def test_nvml_free_releases_are_what_the_test_says(version: str) -> None:
    """0.1.19 (and 0.1.20): no calculate_gpu_bandwidth, no NVML in any Python module; the bandwidth
    comes from the C++ device-info extension, which reads CUDA's attributes and special-cases sm_121."""
    assert _function(_device(version), "calculate_gpu_bandwidth") is None
    assert _package_mentions(version, "NVML_CLOCK_MEM") == []
    assert _package_mentions(version, "pynvml") == []
    cpp = (humming_site(version) / "humming" / "csrc" / "device_info.cpp").read_text(encoding="utf-8")
    assert "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE" in cpp and "sm_version == 121" in cpp


@pytest.mark.parametrize("version", HUMMING_VERSIONS)
def test_reader_on_the_real_release(version: str, tmp_path: Path) -> None:
    h = read_humming({"HOME": str(tmp_path)}, site_dirs=[humming_site(version)], service_user=None)
    assert h.installed and h.version == version, h.note
    assert h.gb10_bandwidth_safe is (version in HUMMING_SAFE), h.gb10_bandwidth_detail
    detail = h.gb10_bandwidth_detail or ""
    if version in HUMMING_UNSAFE:
        assert "humming/utils/device.py:33 in calculate_gpu_bandwidth" in detail
        assert "no fallback" in detail
    elif version in ("0.1.12", "0.1.13"):
        assert "calculate_gpu_bandwidth: returns at line" in detail and "(12, 1)" in detail
    else:
        assert detail.startswith("no module of humming queries NVML's memory clock")


def test_a_launchers_shim_over_the_unguarded_release(tmp_path: Path) -> None:
    """An operator's fix appended to 0.1.11's real device.py (the GB10 figure for sm_121, else the
    original): the last definition is what runs, so the shim makes it safe."""
    site = tmp_path / "site"
    shutil.copytree(humming_site("0.1.11"), site, ignore=shutil.ignore_patterns(".complete"))
    device = site / "humming" / "utils" / "device.py"
    device.write_text(
        device.read_text(encoding="utf-8")
        + "\n\n_orig = calculate_gpu_bandwidth\n\n\ndef calculate_gpu_bandwidth(gpu_index=0):\n"
        "    try:\n        return _orig(gpu_index)\n    except pynvml.NVMLError:\n        return 273.0\n",
        encoding="utf-8",
    )
    safe, detail = gb10_bandwidth_safe(site / "humming")
    assert safe is True and "replaced by a later definition" in detail


def test_unreadable_query_module_is_not_a_verdict(tmp_path: Path) -> None:
    """A module that mentions the query but does not parse (a truncated copy) cannot be judged."""
    pkg = tmp_path / "humming"
    pkg.mkdir()
    (pkg / "device.py").write_text("x = pynvml.NVML_CLOCK_MEM (\n")
    why = "humming/device.py mentions NVML_CLOCK_MEM but is not valid Python"
    assert gb10_bandwidth_safe(pkg) == (None, why)
    assert gb10_bandwidth_safe(tmp_path / "empty")[0] is None
