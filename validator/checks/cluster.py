"""``cluster.*``: one node of a multi-node launch, judged on its own host; comparisons across nodes are the
shipped Prometheus rules' job, over each node's ``spark_validate_node_info``.

``cluster.args`` (``--dist-init-addr``, ``--node-rank`` below ``--nnodes``); ``cluster.build`` (the mapped
NCCL library hashed: a pip NCCL with the system's version string but another binary wedged two-Spark
servers); ``cluster.interface`` (``SGLANG_HOST_IP`` on a ConnectX or loopback interface, the NCCL/GLOO
interface variables naming it, the init address reached through it, no fixed ``NCCL_IB_GID_INDEX``).
"""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.facts import NODE, PROCESS, Facts, NodeFacts


def _node(facts: Facts) -> NodeFacts | check.Outcome:
    node = facts.node
    if node is None:
        return check.skipped("no running server was read (its node facts come from its process)")
    if node.nnodes <= 1:
        return check.skipped("a single-node launch (--nnodes 1): no other rank to agree with", [NODE])
    return node


def _ev(node: NodeFacts) -> dict[str, Any]:
    return {
        "cluster": node.cluster,
        "node": node.node,
        "role": node.role,
        "node_rank": node.node_rank,
        "nnodes": node.nnodes,
    }


@check.builtin("cluster.args", "preflight")
def cluster_args(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    node = _node(facts)
    if isinstance(node, check.Outcome):
        return node
    ev = {
        **_ev(node),
        "args_hash": node.args_hash,
        "arguments": dict(node.arg_hashes),  # compare with the head's /report: the flags that differ
        "dist_init_addr": node.dist_init_addr,
    }
    if not node.dist_init_addr:
        return check.failed(
            f"--nnodes {node.nnodes} without --dist-init-addr: the ranks cannot find the head", [NODE], **ev
        )
    if not 0 <= node.node_rank < node.nnodes:
        return check.failed(f"--node-rank {node.node_rank} is not below --nnodes {node.nnodes}", [NODE], **ev)
    return check.passed(
        f"{node.role} rank {node.node_rank} of {node.nnodes}, arguments {node.args_hash} (compared with the "
        "other ranks by the shipped Prometheus rules)",
        [NODE, PROCESS],
        **ev,
    )


@check.builtin("cluster.build", "preflight")
def cluster_build(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    node = _node(facts)
    if isinstance(node, check.Outcome):
        return node
    ev = {**_ev(node), "build_hash": node.build_hash, "nccl_hash": node.nccl_hash, "nccl": node.nccl_path}
    if node.nccl_hash == "none":
        return check.errored(
            "no process of the server has an NCCL library mapped (not loaded yet, or not visible here): "
            "which NCCL binary this rank runs is not known",
            [NODE],
            **ev,
        )
    if node.nccl_hash == "unreadable":
        return check.errored(f"the NCCL library {node.nccl_path} cannot be read to hash it", [NODE], **ev)
    return check.passed(
        f"SGLang build {node.build_hash}, NCCL {node.nccl_path} sha256 {node.nccl_hash} (compared with the "
        "other ranks by the shipped Prometheus rules)",
        [NODE, PROCESS],
        **ev,
    )


@check.builtin("cluster.interface", "preflight")
def cluster_interface(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    node = _node(facts)
    if isinstance(node, check.Outcome):
        return node
    ev = {
        **_ev(node),
        "SGLANG_HOST_IP": node.host_ip,
        "NCCL_SOCKET_IFNAME": node.nccl_ifname,
        "GLOO_SOCKET_IFNAME": node.gloo_ifname,
        "interface": node.interface,
        "interface_kind": node.interface_kind,
        "dist_init_addr": node.dist_init_addr,
        "dist_interface": node.dist_interface,
        "NCCL_IB_GID_INDEX": node.gid_index,
    }
    if not node.env_known:
        return check.errored("the server's environment could not be read (see server.process)", [NODE], **ev)
    problems: list[str] = []
    if not node.host_ip:
        problems.append(
            "SGLANG_HOST_IP is not set: SGLang's ZeroMQ queue binds the auto-detected address (often the "
            "Wi-Fi one on a Spark) and the server freezes after NCCL init"
        )
    elif node.interface == "unknown":
        problems.append(f"SGLANG_HOST_IP {node.host_ip} is on no interface of this host")
    if node.interface_kind == "wifi":
        problems.append(f"SGLANG_HOST_IP {node.host_ip} is on {node.interface}, a Wi-Fi interface")
    elif node.interface_kind == "missing":
        problems.append(f"interface {node.interface} does not exist on this host")
    for name, value in (("NCCL_SOCKET_IFNAME", node.nccl_ifname), ("GLOO_SOCKET_IFNAME", node.gloo_ifname)):
        if value is None:
            problems.append(f"{name} does not name the interface (NCCL/Gloo would pick one themselves)")
        elif node.interface != "unknown" and not node.interface.startswith(value):
            problems.append(f"{name}={value} is not {node.interface}, the interface of SGLANG_HOST_IP")
    if node.dist_interface is not None and node.interface not in ("unknown", node.dist_interface):
        where = "on" if node.role == "head" else "reached through"
        problems.append(f"the --dist-init-addr host is {where} {node.dist_interface}, not {node.interface}")
    if node.gid_index:
        problems.append(
            f"NCCL_IB_GID_INDEX={node.gid_index} fixes the RDMA GID index, which differs between nodes (RoCE "
            "v1/v2 and IPv4/IPv6 entries): leave it unset so that NCCL picks each node's"
        )
    if problems:
        return check.failed(f"{node.node}: " + "; ".join(problems), [NODE, PROCESS], **ev)
    note = " (loopback: a one-host cluster only)" if node.interface_kind == "loopback" else ""
    return check.passed(
        f"SGLANG_HOST_IP, NCCL, Gloo and --dist-init-addr are on {node.interface} "
        f"({node.interface_kind}){note}",
        [NODE, PROCESS],
        **ev,
    )
