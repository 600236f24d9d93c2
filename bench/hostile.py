"""``check`` and the sidecar against each hostile server mode (slow, endless, huge and malformed replies),
against a healthy simulator measured in the same run.

For ``check``: exit code, time to the verdict and peak RSS (``wait4``), with ratios to ``check`` against
the healthy simulator. For the sidecar (``serve``): its peak RSS (sampled from ``/proc``) while it runs
against the mode for ``--wait`` + 10 s, and the latency of ``/livez`` polled every 100 ms meanwhile (p50 and
max; the bench client's first request, its own warm-up, is not counted), with the same ratios.
Goal: every mode exits 69 within ``--wait`` + 10 s under 200 MB (the ``/metrics`` parse modes, whose other
endpoints are healthy, end in a verdict, never 1 or 2, within the same time); the sidecar
stays under 200 MB and answers ``/livez`` within 50 ms.

Run: ``python -m bench.hostile [--wait S] [--modes a,b]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.bounded_run import run_bounded
from tests.support.hostile_server import LEAK_MODES, MODES, PARSE_MODES, hostile_process
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.private_dir import private_tempdir
from tests.support.sim_process import sim_process

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Sidecar:
    peak_rss_mb: float
    livez_p50_ms: float
    livez_max_ms: float
    livez_failures: int
    alive: bool


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):  # the process's own peak RSS so far
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def sidecar(url: str, wait_s: float, seconds: float, tmp: Path) -> Sidecar:
    port = free_port()
    err = tmp / f"serve-{port}.log"
    cmd = [
        sys.executable, "-m", "validator", "serve", "--url", url, "--listen", f"127.0.0.1:{port}",
        "--wait", str(wait_s),
    ]  # fmt: skip
    with err.open("wb") as errf:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL, stderr=errf
        )
    latencies: list[float] = []
    failures = 0
    peak = 0.0
    try:
        wait_listening(port, proc, what="serve", log=err)
        deadline = time.monotonic() + seconds
        with httpx.Client(timeout=2.0) as client:
            client.get(f"http://127.0.0.1:{port}/livez")  # warm-up, not counted: this client's lazy imports
            while time.monotonic() < deadline and proc.poll() is None:
                t0 = time.perf_counter()
                try:
                    ok = client.get(f"http://127.0.0.1:{port}/livez").status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies.append((time.perf_counter() - t0) * 1000)
                failures += not ok
                peak = max(peak, _rss_mb(proc.pid))
                time.sleep(0.1)
        alive = proc.poll() is None
    finally:
        stop(proc)
    return Sidecar(
        peak_rss_mb=peak,
        livez_p50_ms=statistics.median(latencies) if latencies else float("nan"),
        livez_max_ms=max(latencies, default=float("nan")),
        livez_failures=failures,
        alive=alive,
    )


@contextmanager
def healthy(tmp: Path) -> Iterator[tuple[str, list[str]]]:
    """The baseline: a healthy simulator, with the attestation it writes (the draft head's
    identity is proven only by it), so that its ``check`` is a real pass."""
    with sim_process(tmp) as sim:
        yield sim.url, ["--attestation", str(sim.attestation)]


@contextmanager
def hostile(mode: str) -> Iterator[tuple[str, list[str]]]:
    with hostile_process(mode) as url:
        yield url, []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait", type=float, default=5.0, help="--wait given to check and serve (default 5)")
    ap.add_argument("--modes", default="", help="comma-separated subset of the hostile modes")
    opts = ap.parse_args()
    modes = [m for m in (opts.modes.split(",") if opts.modes else sorted(set(MODES) - LEAK_MODES))]
    wait = opts.wait
    sidecar_s = wait + 10
    tmp = private_tempdir("bench-hostile-")  # the healthy baseline's attestation must be trusted
    targets: list[tuple[str, Callable[[], AbstractContextManager[tuple[str, list[str]]]]]] = [
        ("healthy sim", lambda: healthy(tmp))
    ]
    targets += [(m, lambda m=m: hostile(m)) for m in modes]  # type: ignore[misc]
    rows = []
    base_t = base_rss = base_side = None
    for name, target in targets:
        with target() as (url, evidence):
            res = run_bounded(
                ["check", "--url", url, "--wait", str(wait), "--format", "json", *evidence], timeout=wait + 60
            )
            side = sidecar(url, wait, sidecar_s, tmp)
        if base_t is None:
            base_t, base_rss, base_side = res.wall_s, res.peak_rss_mb, side
        assert base_rss is not None and base_side is not None
        bounded = res.wall_s < wait + 10 and res.peak_rss_mb < 200 and not res.timed_out
        if name == "healthy sim":
            goal = res.rc == 0
        elif name in PARSE_MODES:
            goal = res.rc in (0, 69, 78) and bounded
        else:
            goal = res.rc == 69 and bounded
        side_goal = (
            side.alive and side.peak_rss_mb < 200 and side.livez_max_ms < 50 and not side.livez_failures
        )
        rows.append(
            (
                name,
                f"{res.rc}{' (killed)' if res.timed_out else ''}",
                f"{res.wall_s:.2f}",
                f"{res.wall_s / base_t:.2f}",
                f"{res.peak_rss_mb:.0f}",
                f"{res.peak_rss_mb / base_rss:.2f}",
                "ok" if goal else "MISSED",
                f"{side.peak_rss_mb:.0f}",
                f"{side.peak_rss_mb / base_side.peak_rss_mb:.2f}",
                f"{side.livez_p50_ms:.1f}",
                f"{side.livez_max_ms:.1f}",
                f"{side.livez_failures}",
                "ok" if side_goal else "MISSED",
            )
        )
        print(f"  measured {name}", file=sys.stderr, flush=True)
    head = (
        "target", "check rc", "verdict s", "x healthy", "RSS MB", "x healthy", "goal",
        "serve RSS MB", "x healthy", "livez p50 ms", "livez max ms", "livez fail", "goal",
    )  # fmt: skip
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    print(
        f"check --wait {wait:g} and serve for {sidecar_s:g} s; goal: exit 69 within --wait + 10 s, < 200 MB;"
    )
    print(
        "serve < 200 MB, /livez < 50 ms. Baseline: the healthy simulator (first row), same run, same machine."
    )
    for r in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
