"""``/livez`` while the sidecar starts: polled every 20 ms through the first seconds after it listens (when
it imports what a check needs and runs its first check, probe included, against a healthy simulator),
against the same sidecar once idle, measured in the same run (the kubelet's liveness probe must never see
a slow answer because a check is starting).

    python -m bench.sidecar_startup [--runs 5] [--baseline-tree DIR]

``--baseline-tree`` adds the same rows for another checkout (``git worktree add DIR COMMIT``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.loopback import free_port, stop, wait_listening
from tests.support.sim_process import sim_process

REPO = Path(__file__).resolve().parents[1]
POLL_S = 0.02


def _window(client: httpx.Client, url: str, seconds: float) -> list[float]:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        client.get(url)
        out.append((time.perf_counter() - t0) * 1000)
        time.sleep(POLL_S)
    return sorted(out)


def one_sidecar(tree: Path, sim_url: str, log: Path) -> tuple[list[float], list[float]]:
    """(latencies in the first 4 s after listening, latencies 6-10 s in, once idle) of one sidecar."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "validator", "serve", "--url", sim_url, "--listen", f"127.0.0.1:{port}",
        "--wait", "30", "--log", str(log),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, what="serve")
        url = f"http://127.0.0.1:{port}/livez"
        with httpx.Client(timeout=5.0) as client:
            client.get(url)  # this client's own lazy imports, not counted
            start = _window(client, url, 4.0)
            time.sleep(2.0)
            idle = _window(client, url, 4.0)
    finally:
        stop(proc)
    return start, idle


def _stats(samples: list[list[float]]) -> tuple[float, float, float]:
    """Medians over runs of each run's p50, p99 and worst answer."""
    return (
        statistics.median(statistics.median(s) for s in samples),
        statistics.median(s[int(len(s) * 0.99)] for s in samples),
        statistics.median(s[-1] for s in samples),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline-tree", type=Path, help="another checkout: the same rows for it")
    opts = ap.parse_args()
    trees = [("this tree", REPO)]
    if opts.baseline_tree is not None:
        trees.append((opts.baseline_tree.name, opts.baseline_tree.resolve()))
    got: dict[str, tuple[list[list[float]], list[list[float]]]] = {name: ([], []) for name, _ in trees}
    with tempfile.TemporaryDirectory() as tmp, sim_process(Path(tmp)) as sim:
        for _ in range(opts.runs):  # the trees take turns
            for name, tree in trees:
                start, idle = one_sidecar(tree, sim.url, sim.log)
                got[name][0].append(start)
                got[name][1].append(idle)
    print(f"{'/livez ms (median of runs)':<36} {'p50':>6} {'p99':>6} {'worst':>6} {'worst x idle':>13}")
    for name, _ in trees:
        start, idle = (_stats(s) for s in got[name])
        for what, row in ((", first 4 s", start), (", idle", idle)):
            print(f"{name + what:<36} {row[0]:6.1f} {row[1]:6.1f} {row[2]:6.1f} {row[2] / idle[2]:13.2f}")


if __name__ == "__main__":
    main()
