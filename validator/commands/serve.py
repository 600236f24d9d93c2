"""`spark-validate serve --url URL [--listen HOST:PORT ...]`: the sidecar daemon (validator/daemon).

Same live inputs as ``check`` (``--log`` is followed incrementally, ``journal:UNIT`` included); the findings
go to ``/readyz``, ``/metrics`` and ``/report``, not to the exit code. ``--unready-after`` is the readiness
hysteresis: how long a merely inconclusive re-check keeps a proven server ready. It exits 0 on SIGTERM, 2
on bad options (a ``--listen`` host that does not resolve included), 65 on malformed inputs and 69 when it
cannot listen on an address that resolves.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from validator.commands.common import add_common, pack_from, selection_of
from validator.errors import UsageError
from validator.live_inputs import LiveInputs, add_live_inputs, live_inputs_from
from validator.preflight_inputs import PreflightInputs
from validator.sources.host.server_command import use_stand_ins

if TYPE_CHECKING:  # the daemon loads only once the options are known good
    from validator.daemon.service import ServeConfig
    from validator.rulepack import LoadedPack

DEFAULT_LISTEN = "127.0.0.1:9464"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_live_inputs(p)
    g = p.add_argument_group("sidecar")
    g.add_argument(
        "--listen",
        action="append",
        default=None,
        metavar="HOST:PORT",
        help=f"where to serve /, /readyz, /livez, /metrics, /report; repeatable, e.g. the pod IP for the "
        f"kubelet and Prometheus plus 127.0.0.1 for `kubectl port-forward` (default {DEFAULT_LISTEN})",
    )
    g.add_argument(
        "--launch-state",
        metavar="FILE",
        type=Path,
        help="export the last `spark-validate launch` verdict written here (launch --state-file) as "
        "spark_validate_launch_* metrics, so that a refused start reaches Prometheus",
    )
    for flag, default, what in (
        ("--interval", 30.0, "re-check the configuration this often"),
        ("--probe-interval", 600.0, "run the acceptance probe again this often"),
        ("--health-interval", 5.0, "poll the server's /health this often to notice a restart"),
        (
            "--unready-after",
            30.0,
            "an inconclusive re-check (a transient 5xx, a timeout) drops /readyz only after staying "
            "inconclusive this long; a failed /health, a restart or a failing check drop it at once",
        ),
    ):
        g.add_argument(
            flag, type=float, default=default, metavar="SECONDS", help=f"{what} (default {default:g})"
        )
    f = p.add_argument_group(
        "running server and fleet",
        "With no --url the sidecar watches the SGLang server it finds from /proc (the same host, Compose "
        'pid: "service:sglang", Kubernetes shareProcessNamespace: true): it judges that process\'s argv and '
        "environment as `check` with no --url does, notices a restart by its PID and start time, and a "
        "worker node of a multi-node launch (no HTTP) is judged by its process and host alone.",
    )
    f.add_argument("--pid", type=int, metavar="PID", help="watch this server process (default: the only one)")
    f.add_argument(
        "--cluster",
        metavar="NAME",
        default=os.environ.get("SPARK_VALIDATE_CLUSTER"),
        help="the cluster label on every metric ($SPARK_VALIDATE_CLUSTER; default with no --url: the "
        "server's --dist-init-addr)",
    )
    f.add_argument(
        "--node",
        metavar="NAME",
        default=os.environ.get("SPARK_VALIDATE_NODE"),
        help="the node label on every metric ($SPARK_VALIDATE_NODE; default: the host name)",
    )
    add_common(p, report=False, auto=False)
    # A sidecar starts beside a server that loads for minutes: wait for it by default.
    p.set_defaults(wait_s=900.0)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6). A host that does not resolve is a usage error (exit 2),
    told before anything starts; one that resolves but is not this host's fails at bind (exit 69)."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise UsageError(f"serve: --listen expects HOST:PORT, got {value!r}")
    try:
        socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"serve: --listen {value!r}: host {host!r} does not resolve ({reason})") from None
    return host, int(port)


def run(args: argparse.Namespace) -> int:
    # here: the daemon brings uvicorn, starlette, httpx and prometheus_client, which `--help` need not load
    from validator.daemon.loop import Schedule
    from validator.daemon.service import ServeConfig, serve

    if args.url is not None and args.pid is not None:
        raise UsageError("serve: --pid picks a server found from /proc; leave out --url")
    listen = tuple(dict.fromkeys(parse_listen(v) for v in (args.listen or [DEFAULT_LISTEN])))
    for name in ("interval", "probe_interval", "health_interval"):
        if not getattr(args, name) > 0:
            raise UsageError(f"serve: --{name.replace('_', '-')} must be positive")
    if not (args.unready_after >= 0 and math.isfinite(args.unready_after)):
        raise UsageError("serve: --unready-after must be a number of seconds, 0 or more")
    loaded = pack_from(args)
    if loaded is None:  # a sidecar judges one recipe for its whole life; `check --rules auto` finds it
        raise UsageError("serve: --rules auto is for preflight and check; name the pack (--rules NAME)")
    from validator.sources.server.metrics_reading import MetricsWatch

    inputs = live_inputs_from(args, selection=selection_of(args, loaded))
    # one for the daemon's life
    inputs = replace(inputs, metrics_watch=MetricsWatch(inputs.stall_after_s))
    wait = max(0.0, inputs.wait_s)
    schedule = Schedule(
        interval_s=args.interval,
        probe_interval_s=max(args.probe_interval, args.interval),
        health_interval_s=args.health_interval,
        full_timeout_s=wait + (loaded.pack.probe.max_seconds if loaded.pack.probe else 0.0) + 120.0,
        recheck_timeout_s=120.0,
        probe=inputs.probe,
        unready_after_s=args.unready_after,
    )
    config = ServeConfig(listen=listen, strict=args.strict, schedule=schedule, launch_state=args.launch_state)
    fleet = {"cluster": args.cluster or "", "node": args.node or "", "role": "single", "node_rank": "0"}
    fleet["pack"] = loaded.name
    labels = fleet if (args.cluster or args.node) else None
    if args.url is not None:
        return serve(inputs, loaded, config, fleet_labels=labels)
    return _serve_process(args, inputs, loaded, config, labels)


def _serve_process(
    args: argparse.Namespace,
    inputs: LiveInputs,
    loaded: LoadedPack,
    config: ServeConfig,
    labels: dict[str, str] | None,
) -> int:
    """No --url: the server found from /proc. A worker node found at start serves no HTTP: nothing to
    probe, so its readiness is its checks' verdict alone."""
    from validator.daemon.process_watch import ProcessTarget
    from validator.daemon.service import serve
    from validator.running import RunningInputs

    use_stand_ins()
    target = ProcessTarget(pid=args.pid, users=inputs.server_uids)
    found = target.find()
    if found is not None and found.role == "worker":
        config = replace(config, schedule=replace(config.schedule, probe=False))
    running = RunningInputs(live=inputs, host=PreflightInputs(), cluster=args.cluster, node=args.node)
    return serve(inputs, loaded, config, running=running, target=target, fleet_labels=labels)
