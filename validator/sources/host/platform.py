"""Evidence about the host, read from /proc and /sys only (no CUDA, no nvidia-smi).

Preflight runs before the GPU driver is touched and must stay fast, so the GPU is identified from the
driver's /proc entry or, on GB10 boards, from the firmware's model string (device tree or DMI). The roots
are parameters so tests can point them at fixture trees.
"""

from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

from validator.bounded_files import read_head
from validator.facts import HOST, HostFacts
from validator.sources.gathering import Gathering, preflight_source
from validator.sources.host.root import host_root

SPARK_MARKERS = re.compile(r"\bGB10\b|DGX[ _-]?Spark", re.IGNORECASE)
_ARM = frozenset({"aarch64", "arm64"})


def read_host(
    *,
    service_user: str | None,
    proc_root: Path | None = None,
    sys_root: Path | None = None,
    machine: str | None = None,
) -> HostFacts:
    proc_root = proc_root or host_root() / "proc"
    sys_root = sys_root or host_root() / "sys"
    arch = machine or os.uname().machine
    gpu = _nvidia_gpu_name(proc_root)
    board = _board_model(sys_root)
    if gpu is None and board and SPARK_MARKERS.search(board):
        gpu = "NVIDIA GB10"  # the only GPU a GB10 board carries
    if (gpu and SPARK_MARKERS.search(gpu)) or (board and SPARK_MARKERS.search(board)):
        is_spark: bool | None = True
    elif gpu is not None or arch not in _ARM:
        is_spark = False
    else:
        is_spark = None  # an ARM host whose GPU we cannot name without CUDA
    user, home = _user_home(service_user)
    mem = _meminfo(proc_root)
    return HostFacts(
        machine=arch,
        mem_total_bytes=mem.get("MemTotal"),
        gpu_name=gpu,
        is_dgx_spark=is_spark,
        service_user=user,
        home=home,
        mem_available_bytes=mem.get("MemAvailable"),
    )


_MEMINFO_KEYS = ("MemTotal", "MemAvailable")
_HEAD_CAP = 64 * 1024  # /proc and /sys files read here are a few hundred bytes


def _meminfo(proc_root: Path) -> dict[str, int]:
    """MemTotal and MemAvailable in bytes. MemAvailable, not MemFree: the page cache the kernel reclaims on
    demand counts as available (on GB10 CUDA's own free figure is MemFree and undercounts it). A key
    that is missing or garbled is left out; the first 64 lines are enough (both lead the file)."""
    found: dict[str, int] = {}
    try:  # bounded, and a FIFO under a --host-root is unreadable, never waited on
        lines = read_head(proc_root / "meminfo", _HEAD_CAP).decode("ascii", "replace").splitlines()
    except OSError:
        return found
    for line in lines[:64]:
        key, _, rest = line.partition(":")
        if key not in _MEMINFO_KEYS or key in found:
            continue
        parts = rest.split()
        try:
            unit = parts[1].lower() if len(parts) > 1 else "kb"
            found[key] = int(parts[0]) * (1024 if unit == "kb" else 1)
        except (ValueError, IndexError):
            continue
    return found


def _nvidia_gpu_name(proc_root: Path) -> str | None:
    """``/proc/driver/nvidia/gpus/<bus>/information`` holds ``Model: NVIDIA GB10`` per GPU."""
    for info in sorted((proc_root / "driver" / "nvidia" / "gpus").glob("*/information")):
        try:
            for line in read_head(info, _HEAD_CAP).decode(errors="replace").splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "Model" and value.strip():
                    return value.strip()
        except OSError:
            continue
    return None


def _board_model(sys_root: Path) -> str | None:
    for rel in ("firmware/devicetree/base/model", "class/dmi/id/product_name"):
        try:
            text = read_head(sys_root / rel, _HEAD_CAP).replace(b"\x00", b"").decode(errors="replace").strip()
        except OSError:
            continue
        if text:
            return text
    return None


def _user_home(service_user: str | None) -> tuple[str | None, Path | None]:
    try:
        entry = pwd.getpwnam(service_user) if service_user else pwd.getpwuid(os.geteuid())
    except KeyError:
        return service_user, None
    return entry.pw_name, Path(entry.pw_dir)


@preflight_source(HOST, 40)
def gather(g: Gathering) -> None:
    """The host the server runs on, and the home of the account it runs as."""
    g.facts.host = read_host(service_user=g.service_user)
