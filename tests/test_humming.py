from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.prerequisite import missing
from validator.sources.host.humming import UnknownUser, read_humming, writable_by

ME = pwd.getpwuid(os.geteuid())
METADATA = (
    "Metadata-Version: 2.4\nName: humming-kernels\nVersion: 0.1.19\nSummary: JIT kernels\n\nVersion: 9.9\n"
)


def _site(tmp_path: Path, *, package: bool = True, metadata: str = METADATA) -> Path:
    site = tmp_path / "site-packages"
    info = site / "humming_kernels-0.1.19.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(metadata)
    if package:
        (site / "humming").mkdir()
        (site / "humming" / "__init__.py").write_text("")
    return site


def test_installed_version_defaults_and_cold_cache(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    f = read_humming({"HOME": str(home)}, site_dirs=[_site(tmp_path)], service_user=None)
    assert f.installed and f.version == "0.1.19"  # header block only: the body's "Version: 9.9" is ignored
    assert f.cache_dir == home / ".humming" / "cache" and f.tmp_dir == home / ".humming" / "tmp"
    assert f.cache_writable and f.tmp_writable  # not there yet, but creatable (humming mkdirs -p)
    assert f.cached_kernels == 0 and f.note is None


def test_env_overrides_and_counts_cubins(tmp_path: Path) -> None:
    cache, tmp = tmp_path / "c", tmp_path / "t"
    for i in range(3):
        (cache / f"{i:032x}").mkdir(parents=True)
        (cache / f"{i:032x}" / "kernel.cubin").write_bytes(b"\x7fELF")
    (cache / "nvrtc_compile" / "abc").mkdir(parents=True)  # helpers, not kernels
    (cache / "nvrtc_compile" / "abc" / "x.cubin").write_bytes(b"")
    (cache / "deadbeef").mkdir()
    (cache / "deadbeef" / "kernel_tmp.cubin").write_bytes(b"")  # an interrupted compile
    env = {"HUMMING_CACHE_DIR": str(cache), "HUMMING_TMP_DIR": str(tmp), "HOME": "/nonexistent"}
    f = read_humming(env, site_dirs=[_site(tmp_path)], service_user=None)
    assert (f.cache_dir, f.tmp_dir, f.cached_kernels) == (cache, tmp, 3)


def test_relative_env_value_is_kept_verbatim_with_note(tmp_path: Path) -> None:
    f = read_humming({"HUMMING_CACHE_DIR": "~/hc", "HOME": str(tmp_path)}, site_dirs=[], service_user=None)
    assert f.cache_dir == Path("~/hc") and f.note is not None and "relative" in f.note


def test_not_installed_and_half_installed(tmp_path: Path) -> None:
    f = read_humming({"HOME": str(tmp_path)}, site_dirs=[tmp_path], service_user=None)
    assert not f.installed and f.version is None and f.note is not None and "not installed" in f.note
    f = read_humming({"HOME": str(tmp_path)}, site_dirs=[_site(tmp_path, package=False)], service_user=None)
    assert not f.installed and f.note is not None and "package is missing" in f.note


def test_read_only_dir_for_current_user(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    target = locked / "cache"
    expected = os.access(locked, os.W_OK)  # root may write anyway: compare with the kernel's answer
    f = read_humming(
        {"HUMMING_CACHE_DIR": str(target), "HOME": str(tmp_path)}, site_dirs=[], service_user=None
    )
    assert f.cache_writable is expected
    file_in_way = tmp_path / "file"
    file_in_way.write_text("")
    assert writable_by(file_in_way / "sub", ME) is False


def test_another_user_by_ownership_and_mode() -> None:
    if os.geteuid() != 0:
        missing("creating directories owned by another user needs root (CI runs as root)")
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="humming-perm-", dir="/tmp"))  # parents traversable by anyone
    try:
        base.chmod(0o755)
        d = base / "svc"
        d.mkdir(mode=0o755)
        assert writable_by(d, nobody) is False  # root-owned 755: others may not write
        d.chmod(0o777)
        assert writable_by(d / "new" / "deeper", nobody) is True
        d.chmod(0o700)
        assert writable_by(d, nobody) is False
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
        assert writable_by(d, nobody) is True  # owner bits
        base.chmod(0o700)
        assert writable_by(d, nobody) is False  # a parent it cannot traverse
    finally:
        shutil.rmtree(base)


def test_service_user_home_and_unknown_user(tmp_path: Path) -> None:
    f = read_humming({"HOME": str(tmp_path)}, site_dirs=[], service_user=ME.pw_name)
    assert f.cache_dir == Path(ME.pw_dir) / ".humming" / "cache" and f.service_user == ME.pw_name
    with pytest.raises(UnknownUser, match="'no-such-user-xyz' does not exist"):  # not "not writable"
        read_humming({}, site_dirs=[], service_user="no-such-user-xyz")
