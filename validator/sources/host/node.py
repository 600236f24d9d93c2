"""One node of a multi-node launch, as its own host shows it: the facts a cluster's nodes must share.

What broke real two-Spark setups is a difference no single node sees: another argument, build or NCCL binary
(a pip wheel with the system's version string wedged servers under load), or ZeroMQ bound to Wi-Fi. Each
node exports hashes on ``spark_validate_node_info`` and the shipped Prometheus rules compare them:
``args_hash`` (all but ``--node-rank``), ``build_hash``, ``nccl_hash`` (the mapped ``libnccl.so*``, cached by
inode, size and mtime) and ``interface`` (``SGLANG_HOST_IP``'s, from ``/proc/net/route``, ``/sys/class/net``).
Read under ``$SPARK_VALIDATE_NET_ROOT`` (default ``$SPARK_VALIDATE_HOST_ROOT``, else ``/``).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import os
import socket
import sys
from pathlib import Path

from validator.bounded_files import open_regular, read_head
from validator.errors import InputError
from validator.facts import LaunchFacts, NodeFacts, SGLangInstallFacts
from validator.redact import is_secret_key
from validator.sources.host.listening import ListeningError, descendants
from validator.sources.host.process import ProcessFacts
from validator.sources.host.root import host_root

NET_ROOT_ENV = "SPARK_VALIDATE_NET_ROOT"
MAX_PROCESSES = 256  # the server and its children whose maps are read for NCCL
MAPS_CAP = 8 * 1024 * 1024
_SHORT = 12  # hex digits of a hash shown as a label value: enough to tell builds apart


def net_root() -> Path:
    return Path(os.environ.get(NET_ROOT_ENV) or host_root())


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_SHORT]


def args_hash(launch: LaunchFacts) -> str:
    """The launch arguments every rank must share: all given explicitly but ``--node-rank``."""
    shared = {d: launch.args.get(d) for d in sorted(launch.explicit) if d != "node_rank"}
    return _digest(json.dumps(shared, sort_keys=True, default=str).encode())


MAX_ARGS = 64  # per-flag series a node exports (a real launch gives about twenty)


def arg_hashes(launch: LaunchFacts) -> dict[str, str]:
    """Each launch argument every rank must share (as :func:`args_hash` reads them), by its flag
    (``--mem-fraction-static``), with a hash of its value: one series per flag lets the cluster rules name
    the flag a worker sets otherwise than its head. A credential's value is not hashed alone (a short
    hash of a short key is a guess away): its flag reads ``redacted``, and only ``args_hash`` tells it."""
    out: dict[str, str] = {}
    for dest in sorted(launch.explicit):
        if dest == "node_rank" or len(out) >= MAX_ARGS:
            continue
        value = launch.args.get(dest)
        flag = "--" + dest.replace("_", "-")
        out[flag] = (
            "redacted"
            if is_secret_key(dest, value)
            else _digest(json.dumps(value, sort_keys=True, default=str).encode())
        )
    return out


def build_hash(sglang: SGLangInstallFacts | None) -> str:
    """The SGLang build's identity: its version and ``srt/server_args.py``, or the build a stand-in names."""
    if sglang is not None and sglang.build_id is not None:
        return _digest(sglang.build_id.encode())
    if sglang is None or sglang.root is None:
        return "unknown"
    h = hashlib.sha256((sglang.version or "").encode())
    try:  # a FIFO or device planted there is unreadable, never waited on
        h.update(read_head(sglang.root / "srt" / "server_args.py", 16 * 1024 * 1024))
    except OSError:
        return "unknown"
    return h.hexdigest()[:_SHORT]


def _mapped_nccl(pids: list[int], proc: Path) -> str | None:
    for pid in pids[:MAX_PROCESSES]:
        try:
            with open(proc / str(pid) / "maps", "rb") as fh:
                data = fh.read(MAPS_CAP)
        except OSError:
            continue
        for line in data.decode("utf-8", "replace").splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5]).startswith("libnccl.so"):
                return parts[5].removesuffix(" (deleted)")
    return None


@functools.lru_cache(maxsize=16)
def _file_hash(path: str, ino: int, size: int, mtime: int) -> str:
    h = hashlib.sha256()
    with os.fdopen(open_regular(path, "the mapped NCCL library"), "rb") as fh:  # never a FIFO's writer
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:_SHORT]


def nccl_hash(pid: int, proc: Path) -> tuple[str, str | None]:
    """(hash, path) of the NCCL library the server's processes have mapped; ("none", None) if none."""

    try:
        below = sorted(descendants(pid, proc=proc))
    except ListeningError:
        below = []
    path = _mapped_nccl([pid, *below], proc)
    if path is None:
        return "none", None
    try:
        st = os.stat(path)
        return _file_hash(path, st.st_ino, st.st_size, int(st.st_mtime)), path
    except (OSError, InputError):
        return "unreadable", path


def _routes(root: Path) -> list[tuple[str, int, int]]:
    """(interface, network, mask) of each IPv4 route, from ``/proc/net/route`` (host byte order)."""
    out: list[tuple[str, int, int]] = []
    try:
        lines = (
            read_head(root / "proc" / "net" / "route", 1 << 20).decode("ascii", "replace").splitlines()[1:]
        )
    except OSError:
        return out
    for line in lines:
        f = line.split()
        if len(f) < 8:
            continue
        try:  # the kernel prints each network-order address as the host-order integer it is stored in
            dest, mask = int(f[1], 16), int(f[7], 16)
        except ValueError:
            continue
        if dest > 0xFFFFFFFF or mask > 0xFFFFFFFF:
            continue
        if sys.byteorder == "little":
            dest, mask = socket.ntohl(dest), socket.ntohl(mask)
        out.append((f[0], dest, mask))
    return out


def interface_of(address: str, root: Path | None = None) -> str | None:
    """The interface an IPv4 address is on (or reached through): the longest matching route; loopback
    addresses are ``lo``'s (the kernel's local table, which ``/proc/net/route`` does not list)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if ip.is_loopback:
        return "lo"
    if ip.version != 4:
        return None
    value = int(ip)
    best: tuple[int, str] | None = None
    for name, net, mask in _routes(root or net_root()):
        if mask and value & mask == net and (best is None or mask > best[0]):
            best = (mask, name)
    return best[1] if best else None


def _valid_ifname(name: str) -> bool:
    """A name the kernel could give an interface (``dev_valid_name``): 1 to 15 bytes, not ``.`` or ``..``,
    no ``/``, ``:`` or white space. ``NCCL_SOCKET_IFNAME`` is the server's environment, the word of whoever
    started it: ``../../srv/private/x`` would have been looked at by name as this process (root), and
    what ``interface_kind`` answered (``missing``, ``wifi``, the driver link's name) told them what is
    there."""
    return (
        0 < len(name.encode(errors="surrogateescape")) < 16
        and name not in (".", "..")
        and not any(c == "/" or c == ":" or c.isspace() for c in name)
    )


def interface_kind(name: str, root: Path | None = None) -> str:
    """``loopback``, ``wifi``, ``connectx``, ``ethernet`` (another device) or ``missing``."""
    if name == "lo":
        return "loopback"
    if not _valid_ifname(name):  # no interface is called that: never a path out of /sys/class/net
        return "missing"
    base = (root or net_root()) / "sys" / "class" / "net" / name
    if not base.exists():
        return "wifi" if name.startswith("wl") else "missing"  # systemd names WLAN devices wl*
    if (base / "wireless").exists() or (base / "phy80211").exists():
        return "wifi"
    try:
        driver = os.path.basename(os.readlink(base / "device" / "driver"))
    except OSError:
        driver = ""
    return "connectx" if driver.startswith("mlx5") else "ethernet"


def _ifname(value: str | None) -> str | None:
    """The interface NCCL/Gloo would use for ``NCCL_SOCKET_IFNAME`` (``=eth0`` exact, ``eth`` prefix,
    ``a,b`` a list: the first; ``^x`` excludes and names none)."""
    if not value or value.startswith("^"):
        return None
    return value.split(",")[0].lstrip("=") or None


def read_node(
    proc_facts: ProcessFacts,
    launch: LaunchFacts,
    sglang: SGLangInstallFacts | None,
    *,
    cluster: str | None,
    node: str | None,
    pack: str,
    proc: Path,
) -> NodeFacts:
    args = launch.args
    nnodes = args.get("nnodes") if isinstance(args.get("nnodes"), int) else 1
    rank = args.get("node_rank") if isinstance(args.get("node_rank"), int) else 0
    assert isinstance(nnodes, int) and isinstance(rank, int)
    dist = args.get("dist_init_addr")
    role = "single" if nnodes <= 1 else "head" if rank == 0 else "worker"
    env = proc_facts.env or {}
    host_ip = env.get("SGLANG_HOST_IP")
    hashed, nccl_path = nccl_hash(proc_facts.pid, proc)
    facts = NodeFacts(
        cluster=cluster or (str(dist) if dist else ""),
        node=node or socket.gethostname(),
        role=role,
        node_rank=rank,
        nnodes=nnodes,
        pack=pack,
        args_hash=args_hash(launch),
        arg_hashes=arg_hashes(launch),
        build_hash=build_hash(sglang),
        nccl_hash=hashed,
        nccl_path=nccl_path,
        dist_init_addr=str(dist) if dist else None,
        env_known=proc_facts.env is not None,
        host_ip=host_ip,
        nccl_ifname=_ifname(env.get("NCCL_SOCKET_IFNAME")),
        gloo_ifname=_ifname(env.get("GLOO_SOCKET_IFNAME")),
        gid_index=env.get("NCCL_IB_GID_INDEX"),
    )
    root = net_root()
    facts.interface = (interface_of(host_ip, root) if host_ip else None) or facts.nccl_ifname or "unknown"
    facts.interface_kind = (
        interface_kind(facts.interface, root) if facts.interface != "unknown" else "unknown"
    )
    if facts.dist_init_addr:
        head_host = facts.dist_init_addr.rsplit(":", 1)[0].strip("[]")
        facts.dist_interface = interface_of(head_host, root)
    return facts
