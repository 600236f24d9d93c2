"""A two-node simulated cluster per case, a sidecar per node (``serve`` with no ``--url``), scraped by a real
Prometheus that evaluates the shipped rules (``for:`` shortened to 1 s, scrape and evaluation every 1 s).

One head simulator (``--nnodes 2 --node-rank 0``, serving HTTP) and four workers (``--node-rank 1``, no
HTTP), all on loopback: a consistent one, one launched with another argument, one that has another NCCL
binary mapped, one whose ``SGLANG_HOST_IP`` is on a Wi-Fi interface. Each worker forms a cluster with the
head (the head's sidecar is run once per cluster label). CI machines have no Wi-Fi device: the Wi-Fi
worker's sidecar reads the host's network facts from a fixture tree (``SPARK_VALIDATE_NET_ROOT``: a
``/proc/net/route`` routing 10.0.0.0/24 through ``wlan0`` and ``/sys/class/net/wlan0/wireless``), the
way a sidecar reads a host's trees mounted elsewhere. The NCCL libraries are files the simulators map as
the loader maps a shared library, so the sidecars read them from ``/proc/PID/maps`` as on a real server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.support import web
from tests.support.cli import REPO
from tests.support.deploy_tools import DEPLOY, load_yaml, require_tool, running_prometheus, with_short_for
from tests.support.loopback import free_port, stop, wait_listening

RULES = DEPLOY / "prometheus" / "spark-validate.rules.yml"
PACK = DEPLOY / "cluster" / "ling-3.0-flash-dgx-spark-tp2.yaml"
SIDECAR = ["--allow-partial", "--no-probe", "--interval", "1", "--health-interval", "1"]
CLUSTER_ALERTS = {
    "SparkValidateClusterArgsDiffer",
    "SparkValidateClusterBuildDiffers",
    "SparkValidateClusterNcclDiffers",
    "SparkValidateClusterInterface",
    "SparkValidateNodeVanished",
}


@contextmanager
def _process(argv: list[str], env: dict[str, str], out: Path) -> Iterator[subprocess.Popen[bytes]]:
    with out.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env},
            stdout=fh, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield proc
    finally:
        stop(proc)


def _wifi_root(root: Path) -> Path:
    """A host tree whose routing table puts 10.0.0.0/24 on wlan0, a wireless device (sysfs's marker)."""
    (root / "proc" / "net").mkdir(parents=True)
    (root / "proc" / "net" / "route").write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "wlan0\t0000000A\t00000000\t0001\t0\t0\t600\t00FFFFFF\t0\t0\t0\n"
    )
    (root / "sys" / "class" / "net" / "wlan0" / "wireless").mkdir(parents=True)
    return root


def _flags(prom: Any) -> set[tuple[str, str]]:
    """(node, flag) of each firing SparkValidateClusterArgsDiffer that names a flag."""
    return {
        (a["labels"]["node"], a["labels"].get("flag", ""))
        for a in prom.alerts("firing")
        if a["labels"]["alertname"] == "SparkValidateClusterArgsDiffer"
    }


def _firing(prom: Any) -> set[tuple[str, str, str]]:
    return {
        (a["labels"]["alertname"], a["labels"].get("cluster", ""), a["labels"].get("node", ""))
        for a in prom.alerts("firing")
        if a["labels"]["alertname"] in CLUSTER_ALERTS
    }


def test_cluster_rules_name_the_node_that_differs_and_the_one_that_vanished(tmp_path: Path) -> None:
    require_tool("prometheus")
    # the shipped cluster pack as an operator saves it, in a directory of their own with nothing beside it
    pack = tmp_path / "srv" / "our-spark.yaml"
    pack.parent.mkdir(mode=0o700)
    pack.write_text(PACK.read_text())
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(with_short_for(load_yaml(RULES), "1s"), sort_keys=False))
    nccl_a, nccl_b = tmp_path / "a" / "libnccl.so.2", tmp_path / "b" / "libnccl.so.2"
    for path, content in ((nccl_a, b"NCCL 2.30.7 system build"), (nccl_b, b"NCCL 2.30.7 pip wheel")):
        path.parent.mkdir()
        path.write_bytes(content * 64)
    port, dist = free_port(), f"127.0.0.1:{free_port()}"
    loopback = {"SGLANG_HOST_IP": "127.0.0.1", "NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}
    base = {**loopback, "SPARK_VALIDATE_SIM_NCCL": str(nccl_a), "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    sim = ["-m", "validator", "sim", "--port", str(port), "--speed", "1000", "--startup-seconds", "0.2"]
    launch = ["--", "--nnodes", "2", "--dist-init-addr", dist]
    workers = {
        "ok": (base, []),
        "args": (base, ["--mem-fraction-static", "0.5"]),
        "nccl": ({**base, "SPARK_VALIDATE_SIM_NCCL": str(nccl_b)}, []),
        "wifi": ({**base, "SGLANG_HOST_IP": "10.0.0.5", "NCCL_SOCKET_IFNAME": "wlan0",
                  "GLOO_SOCKET_IFNAME": "wlan0"}, []),
    }  # fmt: skip
    wifi_root = _wifi_root(tmp_path / "wifi-host")
    with ExitStack() as stack:
        head = stack.enter_context(_process([*sim, *launch, "--node-rank", "0"], base, tmp_path / "head.out"))
        wait_listening(port, head, what="head simulator", log=tmp_path / "head.out", timeout=30)
        pids = {"head": head.pid}
        for name, (env, extra) in workers.items():
            argv = [*sim, *launch, "--node-rank", "1", *extra]
            pids[name] = stack.enter_context(_process(argv, env, tmp_path / f"{name}.out")).pid
        targets, sidecars, ports = [], {}, {}
        for name in workers:
            for node, pid in ((f"a-{name}", pids["head"]), (f"b-{name}", pids[name])):
                listen = free_port()
                env = {"SPARK_VALIDATE_NET_ROOT": str(wifi_root)} if node == "b-wifi" else {}
                argv = ["-m", "validator", "serve", "--pid", str(pid), "--cluster", f"c-{name}"]
                argv += ["--node", node, "--listen", f"127.0.0.1:{listen}", "--rules", str(pack), *SIDECAR]
                out = tmp_path / f"sidecar-{node}.out"
                sidecars[node] = stack.enter_context(_process(argv, env, out))
                wait_listening(listen, sidecars[node], what=f"sidecar {node}", log=out, timeout=60)
                targets.append(f"127.0.0.1:{listen}")
                ports[node] = listen
        scrape = [{"job_name": "spark-validate", "static_configs": [{"targets": targets}]}]
        prom = stack.enter_context(
            running_prometheus(tmp_path / "prometheus", scrape, [rules], interval="1s")
        )
        want = {
            ("SparkValidateClusterArgsDiffer", "c-args", "b-args"),
            ("SparkValidateClusterNcclDiffers", "c-nccl", "b-nccl"),
            ("SparkValidateClusterInterface", "c-wifi", "b-wifi"),
        }
        prom.wait_for("the three differences to fire", lambda: want <= _firing(prom), timeout=90)
        infos = prom.query("spark_validate_node_info")
        assert len(infos) == 8, infos
        # the consistent cluster fires nothing, and each difference fires only its own alert
        assert _firing(prom) == want, _firing(prom)
        # the planted difference is named: the alert carries the flag, and each node's /report its flags
        assert _flags(prom) == {("b-args", "--mem-fraction-static")}, _flags(prom)
        head_args, worker_args = (
            next(c for c in web.get(f"http://127.0.0.1:{ports[n]}/report", timeout=5).json()["checks"]
                 if c["id"] == "cluster.args")["evidence"]["arguments"]
            for n in ("a-args", "b-args")
        )  # fmt: skip
        differ = {f for f in head_args.keys() | worker_args.keys() if head_args.get(f) != worker_args.get(f)}
        assert differ == {"--mem-fraction-static"}, (head_args, worker_args)
        # the consistent cluster is ready: head and worker, under the operator's copy of the pack
        for node in ("a-ok", "b-ok"):
            ready = web.get(f"http://127.0.0.1:{ports[node]}/readyz", timeout=5)
            assert ready.status_code == 200, (node, ready.text)
        report = web.get(f"http://127.0.0.1:{ports['b-wifi']}/report", timeout=5).json()
        interface = next(c for c in report["checks"] if c["id"] == "cluster.interface")
        assert "SGLANG_HOST_IP 10.0.0.5 is on wlan0, a Wi-Fi interface" in interface["message"], interface
        stop(sidecars["b-ok"])
        vanished = ("SparkValidateNodeVanished", "c-ok", "b-ok")
        prom.wait_for("the vanished sidecar's alert", lambda: vanished in _firing(prom), timeout=60)
        assert _firing(prom) == want | {vanished}


def test_alertmanager_config_groups_by_cluster_and_routes_by_severity() -> None:
    """``amtool`` (Alertmanager's own) checks the shipped config and says which receiver each alert gets."""
    from tests.support.deploy_tools import run_tool

    config = DEPLOY / "prometheus" / "alertmanager.yml"
    amtool = require_tool("amtool")
    checked = run_tool([amtool, "check-config", str(config)])
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr
    route = load_yaml(config)["route"]
    assert "cluster" in route["group_by"]
    for severity, receiver in (("critical", "spark-validate-pager"), ("warning", "spark-validate-warnings")):
        got = run_tool(
            [amtool, "config", "routes", "test", f"--config.file={config}", f"severity={severity}",
             "alertname=SparkValidateClusterNcclDiffers", "cluster=c1"]
        )  # fmt: skip
        assert got.stdout.strip() == receiver, got.stdout + got.stderr
    # every severity the shipped rules use has its own route
    severities = {
        r["labels"]["severity"] for g in load_yaml(RULES)["groups"] for r in g["rules"] if "alert" in r
    }
    assert severities <= {"critical", "warning"}
