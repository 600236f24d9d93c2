from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from tests.support.gb10_host import GIB_KB, MEM_TOTAL_KB, fake_host, gb10_host, host_env
from validator.sources.host.platform import read_host

GB10_INFO = "Model: \t\t NVIDIA GB10\nIRQ:   \t\t 42\nGPU UUID: \t GPU-0000\nBus Location: \t 000f:01:00.0\n"


def _proc(tmp_path: Path, mem_kb: int | None = 128_600_000, gpu_info: str | None = None) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    if mem_kb is not None:
        (proc / "meminfo").write_text(f"MemTotal:       {mem_kb} kB\nMemFree:        1000 kB\n")
    if gpu_info is not None:
        g = proc / "driver" / "nvidia" / "gpus" / "000f:01:00.0"
        g.mkdir(parents=True)
        (g / "information").write_text(gpu_info)
    return proc


def test_spark_from_nvidia_proc(tmp_path: Path) -> None:
    root = fake_host(tmp_path, board=None)
    h = read_host(service_user=None, proc_root=root / "proc", sys_root=root / "sys", machine="aarch64")
    assert h.gpu_name == "NVIDIA GB10" and h.is_dgx_spark is True
    assert h.mem_total_bytes == MEM_TOTAL_KB * 1024 and h.machine == "aarch64"


def test_spark_from_device_tree(tmp_path: Path) -> None:
    root = fake_host(tmp_path, gpu=None)
    h = read_host(service_user=None, proc_root=root / "proc", sys_root=root / "sys", machine="aarch64")
    assert h.is_dgx_spark is True and h.gpu_name == "NVIDIA GB10"


def test_the_host_root_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What preflight reads when SPARK_VALIDATE_HOST_ROOT names a tree (a container with the host's /proc
    and /sys mounted elsewhere, or a test's fake DGX Spark)."""
    for key, value in host_env(gb10_host(tmp_path / "spark", available_gib=40.0)).items():
        monkeypatch.setenv(key, value)
    h = read_host(service_user=None, machine="aarch64")
    assert h.is_dgx_spark is True and h.mem_available_bytes == 40 * GIB_KB * 1024
    for key, value in host_env(fake_host(tmp_path / "h200", gpu="NVIDIA H200", board=None)).items():
        monkeypatch.setenv(key, value)
    assert read_host(service_user=None, machine="x86_64").is_dgx_spark is False


def test_other_gpu_and_unknown_arm(tmp_path: Path) -> None:
    info = GB10_INFO.replace("GB10", "H200")
    h = read_host(
        service_user=None, proc_root=_proc(tmp_path, gpu_info=info), sys_root=tmp_path, machine="x86_64"
    )
    assert h.gpu_name == "NVIDIA H200" and h.is_dgx_spark is False
    (tmp_path / "p2").mkdir()
    h = read_host(service_user=None, proc_root=tmp_path / "p2", sys_root=tmp_path / "none", machine="aarch64")
    assert h.is_dgx_spark is None and h.gpu_name is None and h.mem_total_bytes is None
    h = read_host(service_user=None, proc_root=tmp_path / "p2", sys_root=tmp_path / "none", machine="x86_64")
    assert h.is_dgx_spark is False


def test_garbled_meminfo(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal: lots kB\n")
    assert read_host(service_user=None, proc_root=proc, sys_root=tmp_path).mem_total_bytes is None


def test_real_host_and_users() -> None:
    h = read_host(service_user=None)
    me = pwd.getpwuid(os.geteuid())
    assert h.machine == os.uname().machine and h.service_user == me.pw_name and h.home == Path(me.pw_dir)
    with open("/proc/meminfo") as fh:
        kb = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    assert h.mem_total_bytes == kb * 1024
    h = read_host(service_user="no-such-user-xyz")
    assert h.service_user == "no-such-user-xyz" and h.home is None
