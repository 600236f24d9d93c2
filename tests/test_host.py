from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from tests.support.gb10_host import GIB_KB, MEM_TOTAL_KB, fake_host, gb10_host, host_env
from validator.facts import SGLangInstallFacts
from validator.sources.host.node import build_hash, interface_of, nccl_hash
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


def test_fifos_and_endless_files_under_a_host_root_are_unread_never_waited_on(tmp_path: Path) -> None:
    """A FIFO at each file the host reader opens (meminfo, the GPU's information, the board model) is
    unreadable, not a wait for a writer; a file without end (/dev/zero) is read only to a bound."""
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia" / "gpus" / "0").mkdir(parents=True)
    os.mkfifo(proc / "meminfo")
    os.mkfifo(proc / "driver" / "nvidia" / "gpus" / "0" / "information")
    board = tmp_path / "sys" / "firmware" / "devicetree" / "base"
    board.mkdir(parents=True)
    os.mkfifo(board / "model")
    dmi = tmp_path / "sys" / "class" / "dmi" / "id"
    dmi.mkdir(parents=True)
    (dmi / "product_name").symlink_to("/dev/zero")
    h = read_host(service_user=None, proc_root=proc, sys_root=tmp_path / "sys", machine="aarch64")
    assert (h.mem_total_bytes, h.gpu_name, h.is_dgx_spark) == (None, None, None)


def test_a_fifo_where_the_node_reader_hashes_or_routes_is_unread(tmp_path: Path) -> None:
    """The build's server_args.py, a route table and a mapped NCCL library that are FIFOs give "unknown",
    no interface and "unreadable": the node reader (the sidecar's, every interval) never waits on them."""
    srt = tmp_path / "sglang" / "srt"
    srt.mkdir(parents=True)
    os.mkfifo(srt / "server_args.py")
    assert build_hash(SGLangInstallFacts(root=srt.parent, located_by="test", version="0.5.23")) == "unknown"
    (tmp_path / "proc" / "net").mkdir(parents=True)
    os.mkfifo(tmp_path / "proc" / "net" / "route")
    assert interface_of("10.1.0.1", root=tmp_path) is None
    pid_dir = tmp_path / "proc" / "4242"
    pid_dir.mkdir()
    os.mkfifo(tmp_path / "libnccl.so.2")
    (pid_dir / "maps").write_text(f"7f00-7f01 r-xp 00000000 08:01 1 {tmp_path / 'libnccl.so.2'}\n")
    assert nccl_hash(4242, tmp_path / "proc") == ("unreadable", str(tmp_path / "libnccl.so.2"))
