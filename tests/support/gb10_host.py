"""A fake DGX Spark (GB10) host for tests: the ``/proc`` and ``/sys`` files
``validator/sources/host/platform.py`` reads, under a root that ``SPARK_VALIDATE_HOST_ROOT`` points
preflight at.

The files: the NVIDIA driver's ``/proc/driver/nvidia/gpus/<bus>/information`` (``Model: NVIDIA GB10``),
the device tree's NUL-terminated ``model`` string, and ``/proc/meminfo`` (``MemTotal`` of the unified
memory, ``MemAvailable``). Each can be left out or changed, to build the hosts the checks must tell apart
(another GPU, an ARM board whose GPU is not named, little memory available).
"""

from __future__ import annotations

from pathlib import Path

from validator.sources.host.root import HOST_ROOT_ENV

GIB_KB = 1024 * 1024
MEM_TOTAL_KB = 127_600_748  # a DGX Spark's MemTotal
BUS = "000f:01:00.0"


def fake_host(
    root: Path,
    *,
    gpu: str | None = "NVIDIA GB10",
    board: str | None = "NVIDIA DGX Spark",
    available_gib: float | None = 113.0,
    mem_total_kb: int | None = MEM_TOTAL_KB,
) -> Path:
    """Write the host's trees under ``root`` and return it. Defaults: an idle DGX Spark."""
    proc, sys_ = root / "proc", root / "sys"
    proc.mkdir(parents=True, exist_ok=True)
    sys_.mkdir(parents=True, exist_ok=True)
    if gpu is not None:
        d = proc / "driver" / "nvidia" / "gpus" / BUS
        d.mkdir(parents=True, exist_ok=True)
        (d / "information").write_text(
            f"Model: \t\t {gpu}\nIRQ:   \t\t 42\nBus Type: \t PCIe\nBus Location: \t {BUS}\n"
        )
    if board is not None:
        dt = sys_ / "firmware" / "devicetree" / "base"
        dt.mkdir(parents=True, exist_ok=True)
        (dt / "model").write_bytes(board.encode() + b"\x00")
    lines = []
    if mem_total_kb is not None:
        lines.append(f"MemTotal:       {mem_total_kb} kB")
    lines.append("MemFree:         1048576 kB")
    if available_gib is not None:
        lines.append(f"MemAvailable:   {int(available_gib * GIB_KB)} kB")
    (proc / "meminfo").write_text("\n".join(lines) + "\n")
    return root


def gb10_host(root: Path, *, available_gib: float = 113.0) -> Path:
    """An idle DGX Spark (``available_gib`` of memory available)."""
    return fake_host(root, available_gib=available_gib)


def host_env(root: Path) -> dict[str, str]:
    """The environment entry that makes spark-validate read ``root`` as the host."""
    return {HOST_ROOT_ENV: str(root)}
