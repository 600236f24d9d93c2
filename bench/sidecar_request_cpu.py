"""The sidecar's own CPU per request, without the network or a client sharing the machine: one keep-alive
connection is fed a kubelet-like ``GET /readyz`` 20,000 times through a transport that only counts the
bytes written, so what is timed is the server's work alone (parse, route, send the reply).

``bench/sidecar_load.py`` measures latency under 200 real clients, whose own CPU shares the machine; this
gives the figure that decides between two HTTP parsers: microseconds of the sidecar's event loop per
request. ``--baseline-tree`` times another checkout in the same run, the trees taking turns.

    python -m bench.sidecar_request_cpu [--runs 7] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run in a child per tree, so that each tree's own modules are imported.
CHILD = r"""
import asyncio, sys, time
from validator.daemon import http
try:
    from validator.daemon.endpoints import Endpoints
except ImportError:  # a tree from before endpoints.py
    Endpoints = http.Endpoints
from validator.daemon.metrics import DaemonMetrics
from validator.daemon.state import DaemonState

REQUEST = (
    b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nUser-Agent: kube-probe/1.30\r\nAccept: */*\r\n"
    b"Connection: keep-alive\r\n\r\n"
)


class Counting(asyncio.Transport):
    def __init__(self):
        super().__init__()
        self.written, self.closed = 0, False
    def write(self, data): self.written += len(data)
    def set_write_buffer_limits(self, high=None, low=None): pass
    def get_write_buffer_size(self): return 0
    def is_closing(self): return self.closed
    def close(self): self.closed = True
    def abort(self): self.closed = True
    def pause_reading(self): pass
    def resume_reading(self): pass


async def main(n):
    endpoints = Endpoints(DaemonState(), DaemonMetrics())
    server = http.SidecarServer(endpoints)
    conn, transport = http._Protocol(endpoints, server), Counting()
    conn.connection_made(transport)
    conn.data_received(REQUEST)  # the first reply renders the state: not counted
    t0 = time.perf_counter()
    for _ in range(n):
        conn.data_received(REQUEST)
    elapsed = time.perf_counter() - t0
    if transport.closed or transport.written == 0:
        raise SystemExit("the connection closed or answered nothing")
    print(elapsed / n * 1e6)

asyncio.run(main(int(sys.argv[1])))
"""


def one_run(tree: Path, requests: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(requests)], cwd=tree, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    return float(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--baseline-tree", type=Path, help="another checkout: timed in the same run")
    opts = ap.parse_args()
    trees = [("this tree", REPO)]
    if opts.baseline_tree is not None:
        trees.append((opts.baseline_tree.name, opts.baseline_tree.resolve()))
    got: dict[str, list[float]] = {name: [] for name, _ in trees}
    for _ in range(opts.runs):
        for name, tree in trees:
            got[name].append(one_run(tree, opts.requests))
    last = statistics.median(got[trees[-1][0]])
    print(f"{'us of CPU per GET /readyz':<28} {'median':>8} {'min':>8} {'x ' + trees[-1][0]:>16}")
    for name, _ in trees:
        med = statistics.median(got[name])
        print(f"{name:<28} {med:8.1f} {min(got[name]):8.1f} {med / last:16.2f}")


if __name__ == "__main__":
    main()
