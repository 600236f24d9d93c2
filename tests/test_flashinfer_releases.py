"""The FlashInfer reader against the real releases PyPI serves (tests/support/pypi_wheels.py).

``validator/sources/host/flashinfer.py`` does not import FlashInfer: it re-derives where FlashInfer looks for
its precompiled ``fused_moe_120`` and which versions it compares at import. Each rule it relies on is read
here from the released code itself (flashinfer-python 0.6.2 and 0.6.3; 0.7.2, which SGLang 0.5.23 pins,
and 0.7.4, the newest; flashinfer-cubin 0.6.3 and 0.6.13, the newest), so a release that moves its cache or
changes its version check shows up as a failing test, and the reader is then run on the real
distributions (their own ``*.dist-info`` and ``jit/env.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.pypi_wheels import (
    FLASHINFER_PYTHON_NEW,
    FLASHINFER_PYTHON_OLD,
    FLASHINFER_PYTHON_VERSIONS,
    flashinfer_cubin_site,
    flashinfer_python_site,
)
from tests.support.sglang_wheel import sglang_site
from validator.sources.host.flashinfer import (
    MODULE,
    cubin_mismatch,
    jit_cache_matches,
    jit_cache_mismatch,
    read_flashinfer,
)


def _code(site: Path, rel: str) -> str:
    """The file's text with whitespace runs collapsed (statements wrap differently across releases)."""
    return re.sub(r"\s+", " ", (site / rel).read_text(encoding="utf-8"))


@pytest.mark.parametrize("version", FLASHINFER_PYTHON_VERSIONS)
def test_where_the_release_looks_for_its_kernels(version: str) -> None:
    """jit/env.py: ``$FLASHINFER_WORKSPACE_BASE`` (default: home) / .cache/flashinfer / <version> /
    <archs> / cached_ops; archs joins major and minor with an ``a`` suffix from sm_90 up (GB10's (12, 1)
    is ``121a``); the AOT fallback is the package's data/aot; the SM120-family CUTLASS MoE module is
    named ``fused_moe_120``; an AOT module is ``<aot dir>/<name>/<name>.so``."""
    site = flashinfer_python_site(version)
    env = _code(site, "flashinfer/jit/env.py")
    assert 'os.getenv("FLASHINFER_WORKSPACE_BASE", pathlib.Path.home().as_posix())' in env
    assert 'FLASHINFER_CACHE_DIR: pathlib.Path = FLASHINFER_BASE_DIR / ".cache" / "flashinfer"' in env
    assert "return FLASHINFER_CACHE_DIR / flashinfer_version / arch" in env
    assert 'FLASHINFER_JIT_DIR: pathlib.Path = FLASHINFER_WORKSPACE_DIR / "cached_ops"' in env
    context = _code(site, "flashinfer/compilation_context.py")
    fused = _code(site, "flashinfer/jit/fused_moe.py")
    assert 'gen_cutlass_fused_moe_module(nvcc_flags, "120", use_fast_build)' in fused
    assert 'f"fused_moe_{device_arch}"' in fused and MODULE == "fused_moe_120"
    core = _code(site, "flashinfer/jit/core.py")
    if version in FLASHINFER_PYTHON_OLD:
        assert 'return _package_root / "data" / "aot"' in env
        assert 'if major >= 9: minor = str(minor) + "a"' in context
        assert 'jit_env.FLASHINFER_AOT_DIR / self.name / f"{self.name}.so"' in core
    else:  # 0.7.x: the package's AOT directory is the fallback before the jit-cache providers
        assert 'FLASHINFER_AOT_DIR: pathlib.Path = _package_root / "data" / "aot"' in env
        assert 'fallback_path = FLASHINFER_AOT_DIR / module_name / f"{module_name}.so"' in env
        assert "return jit_env.get_aot_path(self.name)" in core
        # SM 12.1+ (GB10) keeps its minor with the 'a' suffix (121a) on CUDA >= 12.9, as before
        assert 'if is_cuda_version_at_least("12.9"): return (major, str(minor) + "a")' in context


@pytest.mark.parametrize("version", FLASHINFER_PYTHON_OLD)
def test_a_06_release_refuses_another_cubin_version(version: str) -> None:
    """0.6.x jit/env.py raises at import when flashinfer_cubin.__version__ differs from FlashInfer's own,
    unless FLASHINFER_DISABLE_VERSION_CHECK is set; both versions come from ``_build_meta``, which the
    wheels write with their METADATA version (what the reader compares)."""
    site = flashinfer_python_site(version)
    env = _code(site, "flashinfer/jit/env.py")
    assert (
        'not os.getenv("FLASHINFER_DISABLE_VERSION_CHECK") and flashinfer_version != flashinfer_cubin_version'
        in env
    )
    assert "flashinfer_cubin_version = flashinfer_cubin.__version__" in env
    assert "from ._build_meta import __version__ as __version__" in _code(site, "flashinfer/version.py")
    assert f'__version__ = "{version}"' in _code(site, "flashinfer/_build_meta.py")
    for cubin_version in ("0.6.3", "0.6.13"):
        cubin = flashinfer_cubin_site(cubin_version)
        assert "from . import _build_meta return _build_meta.__version__" in _code(
            cubin, "flashinfer_cubin/__init__.py"
        )
        assert f'__version__ = "{cubin_version}"' in _code(cubin, "flashinfer_cubin/_build_meta.py")
    assert cubin_mismatch([site]) == "raises"
    # flashinfer-jit-cache: _get_aot_dir raises too, on a version that does not start with FlashInfer's
    assert "and not flashinfer_jit_cache_version.startswith(flashinfer_version): raise RuntimeError(" in env
    assert jit_cache_mismatch([site]) == "raises"
    assert jit_cache_matches(f"{version}+cu129", version, "raises")
    assert not jit_cache_matches("0.5.3+cu129", version, "raises")


@pytest.mark.parametrize("version", FLASHINFER_PYTHON_NEW)
def test_a_07_release_ignores_another_cubin_and_downloads_at_first_use(version: str) -> None:
    """0.7.x jit/env.py ``_get_cubin_dir``: the same comparison (``_check_cubin_version``) sits in a try
    that logs "Ignoring incompatible flashinfer-cubin package (cubins will be downloaded on demand to
    <cache>/cubins)" and falls back to that directory; FLASHINFER_CUBIN_DIR now comes first."""
    site = flashinfer_python_site(version)
    env = _code(site, "flashinfer/jit/env.py")
    assert "try: _check_cubin_version(flashinfer_cubin.__version__) except RuntimeError as error:" in env
    assert (
        '"Ignoring incompatible flashinfer-cubin package (cubins will be " "downloaded on demand to %s)'
        in env
    )
    assert 'FLASHINFER_CACHE_DIR / "cubins"' in env
    assert f'__version__ = "{version}"' in _code(site, "flashinfer/_build_meta.py")
    assert cubin_mismatch([site]) == "ignored"
    # flashinfer-jit-cache: the same version or it with a CUDA suffix; another is ignored (JIT instead)
    assert 'and not package_version.startswith(f"{flashinfer_version}+")' in env
    assert (
        '"Ignoring incompatible flashinfer-jit-cache package (kernels will be " "JIT-compiled instead)' in env
    )
    assert jit_cache_mismatch([site]) == "ignored"
    assert jit_cache_matches(f"{version}+cu130", version, "ignored")
    assert not jit_cache_matches(f"{version}.post1", version, "ignored")


def test_sglang_0523_pins_flashinfer_072() -> None:
    meta = next(sglang_site().glob("sglang-0.5.23.dist-info")) / "METADATA"
    assert "Requires-Dist: flashinfer_python[cu13]==0.7.2" in meta.read_text(encoding="utf-8")
    assert "0.7.2" in FLASHINFER_PYTHON_NEW


@pytest.mark.parametrize(("python", "matched"), [("0.6.3", True), ("0.6.2", False)])
def test_reader_on_the_real_distributions(python: str, matched: bool, tmp_path: Path) -> None:
    """The real dist-infos of flashinfer-python and flashinfer-cubin 0.6.3, the way an interpreter lists
    them; a kernel precompiled where SGLang 0.5.23 sends FlashInfer (``~/.cache/sglang``) is found for
    the version the server imports, and one built for another version is not."""
    home = tmp_path / "home"
    so = home / f".cache/sglang/.cache/flashinfer/0.6.3/121a/cached_ops/{MODULE}/{MODULE}.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"\x7fELF")
    sites = [flashinfer_python_site(python), flashinfer_cubin_site("0.6.3")]
    fi = read_flashinfer({}, site_dirs=sites, home=home, sglang_redirects=True)
    assert (fi.python_version, fi.cubin_version, fi.jit_cache_version) == (python, "0.6.3", None), fi.note
    assert fi.cache_dir == home / ".cache/sglang/.cache/flashinfer"
    if matched:
        assert fi.kernels == [so] and fi.elsewhere == []
    else:
        assert fi.kernels == [] and fi.elsewhere == [so]


@pytest.mark.parametrize(
    ("python", "cubin", "behaviour"),
    [("0.7.2", "0.6.13", "ignored"), ("0.7.4", "0.6.13", "ignored"), ("0.6.2", "0.6.3", "raises")],
)
def test_reader_says_what_the_release_does_with_a_mismatched_cubin(
    python: str, cubin: str, behaviour: str, tmp_path: Path
) -> None:
    sites = [flashinfer_python_site(python), flashinfer_cubin_site(cubin)]
    fi = read_flashinfer({}, site_dirs=sites, home=tmp_path, sglang_redirects=True)
    assert (fi.python_version, fi.cubin_version, fi.cubin_mismatch) == (python, cubin, behaviour)
    matched = read_flashinfer(
        {},
        site_dirs=[flashinfer_python_site("0.6.3"), flashinfer_cubin_site("0.6.3")],
        home=tmp_path,
        sglang_redirects=True,
    )
    assert matched.cubin_mismatch is None  # nothing to judge: the pair matches
