"""cluster.* on one node's facts, and the node facts read from a host tree: what a node can tell alone.

The cross-node comparisons are the Prometheus rules' (tests/test_cluster_e2e.py); here each local finding
is shown failing and passing, and the network reader on a fixture tree (a routing table and sysfs).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.private_dir import trusted_copy
from validator.engine import run_checks
from validator.facts import Facts, NodeFacts
from validator.rulepack import LoadedPack, load_pack
from validator.sources.host.node import _ifname, interface_kind, interface_of

SHIPPED = Path(__file__).resolve().parents[1] / "deploy" / "cluster" / "ling-3.0-flash-dgx-spark-tp2.yaml"


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> LoadedPack:
    """The shipped cluster pack, copied where the verdict may trust it: the checkout itself may be under
    /tmp (a fresh clone), whose files no pack loader trusts."""
    return load_pack(str(trusted_copy(SHIPPED, tmp_path_factory.mktemp("cluster-pack"))))


GOOD = NodeFacts(
    cluster="c", node="spark-b", role="worker", node_rank=1, nnodes=2, pack="p", args_hash="a",
    build_hash="b", nccl_hash="n", nccl_path="/usr/lib/libnccl.so.2", dist_init_addr="10.1.0.1:29500",
    host_ip="10.1.0.2", nccl_ifname="enp1s0f0np0", gloo_ifname="enp1s0f0np0", interface="enp1s0f0np0",
    interface_kind="connectx", dist_interface="enp1s0f0np0",
)  # fmt: skip


def _status(pack: LoadedPack, node: NodeFacts | None) -> dict[str, tuple[str, str]]:
    facts = Facts(mode="preflight")
    facts.node = node
    only = {"cluster.args", "cluster.build", "cluster.interface"}
    results = run_checks(facts, pack, mode="preflight", only=only)
    return {r.id: (r.status.value, r.message) for r in results}


def test_a_consistent_worker_passes_every_local_check(pack: LoadedPack) -> None:
    assert {k: v[0] for k, v in _status(pack, GOOD).items()} == dict.fromkeys(
        ("cluster.args", "cluster.build", "cluster.interface"), "pass"
    )


def test_one_node_and_no_process_do_not_apply(pack: LoadedPack) -> None:
    assert {v[0] for v in _status(pack, replace(GOOD, nnodes=1)).values()} == {"skip"}
    assert {v[0] for v in _status(pack, None).values()} == {"skip"}


@pytest.mark.parametrize(
    ("change", "check", "status", "words"),
    [
        ({"dist_init_addr": None}, "cluster.args", "fail", "without --dist-init-addr"),
        ({"node_rank": 2}, "cluster.args", "fail", "not below --nnodes 2"),
        ({"nccl_hash": "none", "nccl_path": None}, "cluster.build", "error", "no process of the server"),
        ({"host_ip": None}, "cluster.interface", "fail", "SGLANG_HOST_IP is not set"),
        ({"interface": "wlan0", "interface_kind": "wifi"}, "cluster.interface", "fail", "a Wi-Fi interface"),
        ({"nccl_ifname": "eth0"}, "cluster.interface", "fail", "NCCL_SOCKET_IFNAME=eth0 is not enp1s0f0np0"),
        ({"gloo_ifname": None}, "cluster.interface", "fail", "GLOO_SOCKET_IFNAME does not name"),
        ({"dist_interface": "wlan0"}, "cluster.interface", "fail", "reached through wlan0"),
        ({"env_known": False}, "cluster.interface", "error", "environment could not be read"),
        ({"gid_index": "3"}, "cluster.interface", "fail", "NCCL_IB_GID_INDEX=3 fixes the RDMA GID index"),
    ],
)
def test_each_local_finding(
    pack: LoadedPack, change: dict[str, object], check: str, status: str, words: str
) -> None:
    got_status, message = _status(pack, replace(GOOD, **change))[check]  # type: ignore[arg-type]
    assert got_status == status and words in message, message


def test_the_interface_of_an_address_is_the_longest_matching_route(tmp_path: Path) -> None:
    (tmp_path / "proc" / "net").mkdir(parents=True)
    (tmp_path / "proc" / "net" / "route").write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"  # default route via Wi-Fi
        "wlan0\t0001A8C0\t00000000\t0001\t0\t0\t600\t00FFFFFF\t0\t0\t0\n"  # 192.168.1.0/24
        "enp1s0f0np0\t0000010A\t00000000\t0001\t0\t0\t100\t0000FFFF\t0\t0\t0\n"  # 10.1.0.0/16
    )
    assert interface_of("10.1.0.2", tmp_path) == "enp1s0f0np0"
    assert interface_of("192.168.1.20", tmp_path) == "wlan0"
    assert interface_of("8.8.8.8", tmp_path) is None  # only the default route: not a local subnet
    assert interface_of("127.0.0.1", tmp_path) == "lo"
    assert interface_of("not-an-address", tmp_path) is None


def test_the_kind_of_an_interface_comes_from_sysfs(tmp_path: Path) -> None:
    net = tmp_path / "sys" / "class" / "net"
    (net / "wlp1s0" / "wireless").mkdir(parents=True)
    (net / "enp1s0f0np0" / "device").mkdir(parents=True)
    drivers = tmp_path / "drivers" / "mlx5_core"
    drivers.mkdir(parents=True)
    (net / "enp1s0f0np0" / "device" / "driver").symlink_to(drivers)
    (net / "eno1").mkdir()
    assert interface_kind("wlp1s0", tmp_path) == "wifi"
    assert interface_kind("enp1s0f0np0", tmp_path) == "connectx"
    assert interface_kind("eno1", tmp_path) == "ethernet"
    assert interface_kind("lo", tmp_path) == "loopback"
    assert interface_kind("wlan9", tmp_path) == "wifi"  # not in sysfs: systemd's wl* names are WLAN
    assert interface_kind("eth7", tmp_path) == "missing"


def test_an_interface_name_from_the_servers_environment_never_leaves_sysfs(tmp_path: Path) -> None:
    """``NCCL_SOCKET_IFNAME`` is the word of whoever started the server (red team 17): a name that climbs
    out of ``/sys/class/net`` was looked at by name as root, and the kind said what stands there (a
    directory: ``ethernet``; with ``wireless``: ``wifi``; a ``device/driver`` link: its target's name).
    No interface can be called so (the kernel's ``dev_valid_name``): it is missing, whatever is there."""
    (tmp_path / "sys" / "class" / "net").mkdir(parents=True)
    private = tmp_path / "private"
    (private / "nic" / "device").mkdir(parents=True)
    (private / "wl" / "wireless").mkdir(parents=True)
    drivers = tmp_path / "drivers" / "mlx5_core"
    drivers.mkdir(parents=True)
    (private / "nic" / "device" / "driver").symlink_to(drivers)
    for name in ("nic", "wl", "absent"):
        assert interface_kind(f"../../../private/{name}", tmp_path) == "missing", name
    assert interface_kind("..", tmp_path) == "missing"
    assert interface_kind("a" * 16, tmp_path) == "missing"


def test_nccl_interface_spellings() -> None:
    assert _ifname("=enp1s0f0np0") == "enp1s0f0np0"
    assert _ifname("enp1s0f0np0,enp1s0f1np1") == "enp1s0f0np0"
    assert _ifname("^docker,lo") is None
    assert _ifname(None) is None


def test_each_launch_flag_is_hashed_alone_and_a_credential_never(pack: LoadedPack) -> None:
    """The per-flag hashes the sidecar exports (``spark_validate_node_arg``) and ``cluster.args`` shows:
    two ranks that differ in one flag differ in exactly that flag; ``--node-rank`` is not among them; an
    API key's value is not hashed alone (a short hash of a short key is a guess away)."""
    from validator.sources.host.node import arg_hashes
    from validator.sources.launch.command import launch_from_argv

    common = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2", "--nnodes", "2"]
    head = arg_hashes(
        launch_from_argv([*common, "--node-rank", "0", "--api-key", "k1"], origin="head").parsed()
    )
    worker = arg_hashes(
        launch_from_argv(
            [*common, "--node-rank", "1", "--api-key", "k2", "--mem-fraction-static", "0.5"], origin="w"
        ).parsed()
    )
    assert "--node-rank" not in head and "--model-path" in head and "--tp-size" in head
    differ = {f for f in head.keys() | worker.keys() if head.get(f) != worker.get(f)}
    assert differ == {"--mem-fraction-static"}, (head, worker)
    assert head["--api-key"] == worker["--api-key"] == "redacted"
    facts = Facts(mode="preflight")
    facts.node = replace(GOOD, arg_hashes=worker)
    (result,) = run_checks(facts, pack, mode="preflight", only={"cluster.args"})
    assert result.evidence["arguments"] == worker
