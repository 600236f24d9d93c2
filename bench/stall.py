"""Detection latency of ``server.progress``: how long a stalled server stays Ready behind the sidecar.

Three runs of the real sidecar (``serve``) against the real simulator, the same settings for each:

- control: a healthy simulator under traffic, for as long as the stall runs take: readiness must never drop
  (a false stall is the cost of a fast detector);
- traffic: the simulator (``--enable-metrics``) under traffic stalls ``--stall-at`` seconds after start; the
  sidecar reads it from ``/metrics`` at its re-checks. Goal: readiness drops within 2 re-check intervals
  (plus the ``--stall-after`` floor beyond one interval), spending 0 probe tokens;
- idle: no traffic, no ``/metrics``: the stall is seen at the next full check, by its own bounded request.
  Goal: within one probe interval plus that request's timeout (30 s);
- log: traffic, no ``/metrics``, the server log followed (``--log``): the scheduler's last batch line says
  requests are queued and no batch line follows. Goal: as with traffic (2 re-check intervals, or the
  ``--stall-after`` floor past one), 0 probe tokens.

The stall's start is the simulator's own stderr line (system-wide monotonic clock); the detection is the
first ``/readyz`` 503 seen by a 0.1 s poll. Run: ``python -m bench.stall [--interval S] [--probe-interval S]``
(defaults: the sidecar's, 30 and 600 s is long: the bench's default probe interval is 60).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.loopback import free_port, stop, wait_listening
from tests.support.private_dir import private_tempdir
from tests.support.sim_process import REPO, sim_command
from validator.sources.server.progress import REQUEST_S

_STALLED = re.compile(rb"scheduler stalled \(monotonic ([0-9.]+)\)")


@dataclass
class Run:
    name: str
    bound_s: float
    latency_s: float | None  # None: never detected (or, for the control, no false stall)
    drops: int  # readiness drops seen
    probe_tokens: int | None  # tokens of the sidecar's own requests in the report that saw the stall
    source: str | None


def _traffic(url: str, stop_ev: threading.Event, clients: int = 3) -> list[threading.Thread]:
    def client() -> None:
        with httpx.Client(timeout=120) as c:
            while not stop_ev.is_set():
                body = {"text": "bench", "sampling_params": {"max_new_tokens": 64, "temperature": 0.6}}
                try:
                    c.post(f"{url}/generate", json=body)
                except httpx.HTTPError:
                    stop_ev.wait(0.2)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    return threads


def one(
    name: str,
    opts: argparse.Namespace,
    tmp: Path,
    *,
    metrics: bool,
    load: bool,
    stall: bool,
    log: bool = False,
) -> Run:
    port = free_port()
    sim_err = tmp / f"sim-{port}.log"
    server_log = tmp / f"sglang-{port}.log"
    extra = ["--idle-metrics-interval", str(opts.idle_metrics)]
    if log:
        extra += ["--log", str(server_log)]
    if metrics:
        extra.append("--enable-metrics")
    if stall:
        extra += ["--stall-after", str(opts.stall_at)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with sim_err.open("wb") as errf:
        sim = subprocess.Popen(
            sim_command(port, speed=1000.0, startup=0.3, extra=extra),
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=errf,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    side_port = free_port()
    side_err = tmp / f"serve-{side_port}.log"
    cmd = [
        sys.executable, "-m", "validator", "serve", "--url", url, "--listen", f"127.0.0.1:{side_port}",
        "--interval", str(opts.interval), "--probe-interval", str(opts.probe_interval), "--wait", "30",
        "--allow-partial", "--stall-after", str(opts.stall_after),
        *(["--log", str(server_log)] if log else []),
    ]  # fmt: skip
    stop_ev = threading.Event()
    drops, latency, tokens, source = 0, None, None, None
    side = None
    try:
        wait_listening(port, sim, what="simulator")
        if load:
            _traffic(url, stop_ev)
        with side_err.open("wb") as errf:
            side = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=errf)
        wait_listening(side_port, side, what="serve", log=side_err)
        base = f"http://127.0.0.1:{side_port}"
        bound = _bound(opts, (metrics or log) and load)
        deadline = time.monotonic() + opts.stall_at + bound + 30
        was_ready = False
        with httpx.Client(timeout=5) as c:
            while time.monotonic() < deadline:
                ready = c.get(f"{base}/readyz").status_code == 200
                if was_ready and not ready:
                    drops += 1
                    found = _STALLED.search(sim_err.read_bytes())
                    if found and latency is None:
                        latency = time.monotonic() - float(found.group(1))
                        checks = {x["id"]: x for x in c.get(f"{base}/report").json()["checks"]}
                        ev = checks.get("server.progress", {}).get("evidence", {})
                        tokens, source = int(ev.get("request_tokens", 0)), ev.get("source")
                        break
                was_ready = was_ready or ready
                time.sleep(0.1)
    finally:
        stop_ev.set()
        if side is not None:
            stop(side)
        stop(sim, kill=True)
    return Run(name, _bound(opts, (metrics or log) and load), latency, drops, tokens, source)


def _bound(opts: argparse.Namespace, traffic: bool) -> float:
    if traffic:  # two re-check intervals, or the stall floor past one interval where that is longer
        return max(2 * opts.interval, opts.interval + opts.stall_after)
    return opts.probe_interval + REQUEST_S


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=30.0, help="sidecar --interval (default 30)")
    ap.add_argument(
        "--probe-interval", type=float, default=60.0, help="sidecar --probe-interval (default 60)"
    )
    ap.add_argument("--stall-after", type=float, default=30.0, help="sidecar --stall-after (default 30)")
    ap.add_argument("--idle-metrics", type=float, default=30.0, help="sim --idle-metrics-interval (30)")
    ap.add_argument("--stall-at", type=float, default=20.0, help="the stall starts this long after start")
    opts = ap.parse_args()
    tmp = private_tempdir("bench-stall-")
    runs = [
        one("control: healthy, traffic", opts, tmp, metrics=True, load=True, stall=False),
        one("traffic: /metrics", opts, tmp, metrics=True, load=True, stall=True),
        one("idle: own request", opts, tmp, metrics=False, load=False, stall=True),
        one("log: traffic, no /metrics", opts, tmp, metrics=False, load=True, stall=True, log=True),
    ]
    print(
        f"sidecar --interval {opts.interval:g} --probe-interval {opts.probe_interval:g} --stall-after "
        f"{opts.stall_after:g}; sim --idle-metrics-interval {opts.idle_metrics:g}; "
        f"stall {opts.stall_at:g} s in"
    )
    head = ("run", "bound s", "latency s", "x bound", "x interval", "drops", "probe tokens", "source", "goal")
    rows = []
    for r in runs:
        if r.name.startswith("control"):
            goal = r.drops == 0
            lat = ratio = per = "-"
        else:
            goal = r.latency_s is not None and r.latency_s <= r.bound_s
            goal = goal and (r.probe_tokens == 0 if r.name.startswith(("traffic", "log")) else True)
            lat = f"{r.latency_s:.1f}" if r.latency_s is not None else "never"
            ratio = f"{r.latency_s / r.bound_s:.2f}" if r.latency_s is not None else "-"
            per = f"{r.latency_s / opts.interval:.2f}" if r.latency_s is not None else "-"
        tok = "-" if r.probe_tokens is None else str(r.probe_tokens)
        rows.append((r.name, f"{r.bound_s:g}", lat, ratio, per, str(r.drops), tok, r.source or "-",
                     "ok" if goal else "MISSED"))  # fmt: skip
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
