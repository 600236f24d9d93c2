"""Load on the sidecar while it probes: 200 concurrent keep-alive clients send 10,000 requests, half to
``/readyz`` and half to ``/metrics``; prints p50/p99 per endpoint and the daemon's RSS before and after.

The baseline, measured in the same run on the same machine, is a minimal asyncio server that answers every
request with one fixed 60-byte reply: the floor for a Python HTTP server here. Ratios are daemon / baseline.
Run: ``python -m bench.sidecar_load [--requests N] [--clients C]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.daemon_process import start_sim, stop
from tests.support.loopback import free_port, wait_listening

REPO = Path(__file__).resolve().parents[1]


BASELINE = r"""
import asyncio, sys
R = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"ok\":true}\r\n"
class P(asyncio.Protocol):
    def connection_made(self, t): self.t, self.b = t, b""
    def data_received(self, d):
        self.b += d
        while b"\r\n\r\n" in self.b:
            _, self.b = self.b.split(b"\r\n\r\n", 1); self.t.write(R)
async def main():
    s = await asyncio.get_running_loop().create_server(P, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    await s.serve_forever()
asyncio.run(main())
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _client(port: int, paths: list[bytes], lat: dict[bytes, list[float]]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for path in paths:
        t0 = time.perf_counter()
        writer.write(b"GET " + path + b" HTTP/1.1\r\nHost: bench\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        i = head.lower().find(b"content-length:")
        n = int(head[i + 15 : head.find(b"\r\n", i)])
        await reader.readexactly(n)
        lat[path].append(time.perf_counter() - t0)
    writer.close()


async def load(port: int, paths: list[bytes], total: int, clients: int) -> dict[bytes, list[float]]:
    lat: dict[bytes, list[float]] = {p: [] for p in paths}
    per = total // clients
    work = [[paths[(c + i) % len(paths)] for i in range(per)] for c in range(clients)]
    await asyncio.gather(*(_client(port, w, lat) for w in work))
    return lat


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=200)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    sim_port, d_port, b_port = free_port(), free_port(), free_port()
    sim = start_sim(sim_port, "healthy", speed=3.0, startup=0.2)  # slow decode: a probe lasts seconds
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "validator.daemon",
            "--url",
            f"http://127.0.0.1:{sim_port}",
            "--listen",
            f"127.0.0.1:{d_port}",
            "--interval",
            "1",
            "--probe-interval",
            "1",
            "--wait",
            "30",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = subprocess.Popen([sys.executable, "-c", BASELINE, str(b_port)], stdout=subprocess.DEVNULL)
    try:
        wait_listening(d_port, daemon, what="sidecar")
        wait_listening(b_port, base, what="baseline server")
        import httpx

        deadline = time.monotonic() + 30
        phase = ""
        while time.monotonic() < deadline:  # load while a probe is in flight
            phase = httpx.get(f"http://127.0.0.1:{d_port}/readyz").json()["phase"]
            if phase == "probing":
                break
            time.sleep(0.05)
        rss0 = rss_mb(daemon.pid)
        t0 = time.perf_counter()
        lat = asyncio.run(load(d_port, [b"/readyz", b"/metrics"], args.requests, args.clients))
        wall = time.perf_counter() - t0
        phase_after = httpx.get(f"http://127.0.0.1:{d_port}/readyz").json()["phase"]
        rss1 = rss_mb(daemon.pid)
        lat2 = asyncio.run(load(d_port, [b"/readyz", b"/metrics"], args.requests, args.clients))
        rss2 = rss_mb(daemon.pid)
        t1 = time.perf_counter()
        blat = asyncio.run(load(b_port, [b"/"], args.requests, args.clients))[b"/"]
        bwall = time.perf_counter() - t1
    finally:
        for p in (daemon, base):
            p.terminate()
            p.wait(timeout=10)
        stop(sim)
    b50, b99 = pct(blat, 0.5), pct(blat, 0.99)
    print(
        f"{args.requests} requests, {args.clients} concurrent keep-alive clients, load began in phase "
        f"{phase!r}, ended in {phase_after!r}"
    )
    print(f"{'target':<22}{'p50 ms':>9}{'p99 ms':>9}{'x base p50':>12}{'x base p99':>12}{'req/s':>9}")
    print(
        f"{'baseline (fixed reply)':<22}{b50:>9.2f}{b99:>9.2f}{1:>12.2f}{1:>12.2f}{len(blat) / bwall:>9.0f}"
    )
    n = sum(len(v) for v in lat.values())
    for path, xs in lat.items():
        p50, p99 = pct(xs, 0.5), pct(xs, 0.99)
        name = "daemon " + path.decode()
        print(f"{name:<22}{p50:>9.2f}{p99:>9.2f}{p50 / b50:>12.2f}{p99 / b99:>12.2f}{n / wall:>9.0f}")
    print(
        f"daemon RSS MB: before {rss0:.1f}, after {args.requests} {rss1:.1f}, after {2 * args.requests} "
        f"{rss2:.1f}"
    )
    print(json.dumps({"second_round_p99_ms": {p.decode(): round(pct(v, 0.99), 2) for p, v in lat2.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
