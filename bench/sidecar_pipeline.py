"""How long a pipelined burst on one connection holds the sidecar's other clients: client A writes 6,000
``GET /livez`` in one write and reads the replies, client B times one ``GET /livez`` meanwhile (the
kubelet's probe while someone floods the port). Prints B's wait, median and worst of the rounds, per tree.

The server is the sidecar's own ``SidecarServer`` in a child process per tree; ``--baseline-tree`` times
another checkout in the same run, the trees taking turns.

    python -m bench.sidecar_pipeline [--rounds 15] [--burst 6000] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.loopback import stop

REPO = Path(__file__).resolve().parents[1]
REQUEST = b"GET /livez HTTP/1.1\r\nHost: bench\r\n\r\n"

CHILD = r"""
import asyncio
from validator.daemon import http
try:
    from validator.daemon.endpoints import Endpoints
except ImportError:  # a tree from before endpoints.py
    Endpoints = http.Endpoints
from validator.daemon.metrics import DaemonMetrics
from validator.daemon.state import DaemonState

async def main():
    state = DaemonState()
    state.touch()
    server = http.SidecarServer(Endpoints(state, DaemonMetrics(), livez_stale_s=1e9))
    _, port = await server.start("127.0.0.1", 0)
    print(port, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _read_replies(sock: socket.socket, n: int) -> None:
    count, tail = 0, b""
    while count < n:
        data = sock.recv(1 << 20)
        if not data:
            return
        chunk = tail + data
        count += chunk.count(b"HTTP/1.1 200")
        tail = chunk[-11:]  # shorter than the marker: a marker cut between reads is counted once


def waits_ms(tree: Path, rounds: int, burst: int) -> list[float]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.PIPE,
    )  # fmt: skip
    out: list[float] = []
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        for _ in range(rounds):
            a = socket.create_connection(("127.0.0.1", port), timeout=30)
            b = socket.create_connection(("127.0.0.1", port), timeout=30)
            with a, b:
                time.sleep(0.05)
                reader = threading.Thread(target=_read_replies, args=(a, burst))
                reader.start()
                a.sendall(REQUEST * burst)
                time.sleep(0.002)
                t0 = time.perf_counter()
                b.sendall(REQUEST)
                b.recv(4096)
                out.append((time.perf_counter() - t0) * 1000)
                reader.join(30)
    finally:
        stop(proc)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--burst", type=int, default=6000)
    ap.add_argument("--baseline-tree", type=Path, help="another checkout: timed in the same run")
    opts = ap.parse_args()
    trees = [("this tree", REPO)]
    if opts.baseline_tree is not None:
        trees.append((opts.baseline_tree.name, opts.baseline_tree.resolve()))
    got: dict[str, list[float]] = {name: [] for name, _ in trees}
    for _ in range(3):  # the trees take turns
        for name, tree in trees:
            got[name] += waits_ms(tree, max(1, opts.rounds // 3), opts.burst)
    print(f"another client's /livez during a {opts.burst}-request pipelined burst")
    print(f"{'ms':<28} {'median':>8} {'worst':>8}")
    for name, _ in trees:
        print(f"{name:<28} {statistics.median(got[name]):8.1f} {max(got[name]):8.1f}")


if __name__ == "__main__":
    main()
