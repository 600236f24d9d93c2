"""The sidecar following a server log that grows from 0 to 1 GB: re-check duration and ``/livez`` latency
against a sidecar without ``--log``, both running in the same run against the same simulator.

A reader that re-read the whole file took 7.4 s per check on a 200 MB log (1.1 s without) and ``/livez``
unanswered for 30 s at 1.5 GB. The follower parses only what is new, off the event loop, so the goal is a
re-check within 1.2x of the no-log sidecar's at every size and ``/livez`` p99 under 50 ms.

For each size the log is first grown to it in one burst (the follower then catches up in one bounded
read: its check is shown apart, as ``catch-up``), then, during the measuring window, it keeps growing at
``--rate`` KB/s of real ``Decode batch`` lines while both sidecars re-check every ``--interval`` seconds and
``/livez`` of both is polled every 20 ms. The log lives in a private temporary directory (not /tmp: the
attestation beside it must be trusted), deleted at the end.
Run: ``python -m bench.sidecar_log [--sizes 0,64,256,512,1024] [--rate 256]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.support.daemon_process import stop
from tests.support.loopback import free_port, wait_listening
from tests.support.private_dir import private_tempdir

REPO = Path(__file__).resolve().parents[1]
# the child processes find this checkout first, then whatever the caller's PYTHONPATH names
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


DECODE = (
    b"[2026-12-01 09:00:00 TP0] Decode batch, #running-req: 1, #full token: 300, full token usage: 0.01, "
    b"mamba num: 1, mamba usage: 0.01, accept len: 3.05, accept rate: 0.68, cuda graph: True, "
    b"gen throughput (token/s): 58.50, #queue-req: 0\n"
)
BLOCK = DECODE * ((4 << 20) // len(DECODE))  # ~4 MB of decode lines per write


class Sidecar:
    def __init__(self, tmp: Path, url: str, name: str, extra: list[str], interval: float) -> None:
        self.port = free_port()
        self.name = name
        self.err = tmp / f"sidecar-{name}.log"
        cmd = [
            sys.executable, "-m", "validator", "serve", "--url", url, "--listen", f"127.0.0.1:{self.port}",
            "--interval", str(interval), "--probe-interval", "3600", "--health-interval", "5",
            "--no-probe", "--wait", "30", "--attestation", str(tmp / "attestation.json"),
            # without the probe the acceptance is not proven: accepted here, since what is
            # measured is the cost of a re-check, not its verdict
            "--allow-partial", *extra,
        ]  # fmt: skip
        with self.err.open("wb") as fh:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=fh)
        wait_listening(self.port, self.proc, what=f"sidecar {name}", log=self.err)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)

    def checks(self) -> list[dict[str, object]]:
        """The canonical ``check`` lines logged so far (one per run), with the time they were read."""
        out = []
        for line in self.err.read_text(encoding="utf-8", errors="replace").splitlines():
            if '"event": "check"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def ready(self) -> bool:
        return self.client.get("/readyz").status_code == 200

    def close(self) -> None:
        self.client.close()
        stop(self.proc)


def _grow_to(log: Path, size: int) -> None:
    with log.open("ab") as fh:
        while fh.tell() < size:
            fh.write(BLOCK[: max(len(DECODE), min(len(BLOCK), size - fh.tell()))])


def _wait_checks(sidecar: Sidecar, after: int, timeout: float = 120.0) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = sidecar.checks()
        if len(runs) > after:
            return runs[after:]
        time.sleep(0.05)
    raise TimeoutError(f"sidecar {sidecar.name} ran no check within {timeout:.0f} s")


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes", default="0,64,256,512,1024", help="log sizes in MB (default 0,64,256,512,1024)"
    )
    ap.add_argument(
        "--rate", type=float, default=256.0, help="log growth while measuring, KB/s (default 256)"
    )
    ap.add_argument("--window", type=float, default=8.0, help="seconds measured per size (default 8)")
    ap.add_argument("--interval", type=float, default=1.0, help="the sidecars' --interval (default 1)")
    args = ap.parse_args()
    sizes = [int(float(s) * (1 << 20)) for s in args.sizes.split(",")]

    tmp = private_tempdir("spark-validate-sidecar-log-")  # its attestation must be trusted: not /tmp
    port = free_port()
    log = tmp / "sglang.log"
    sim: subprocess.Popen[bytes] | None = None
    url = f"http://127.0.0.1:{port}"
    cars: list[Sidecar] = []
    try:
        sim = _start_sim_with_log(port, log, tmp / "attestation.json")
        plain = Sidecar(tmp, url, "no-log", [], args.interval)
        follow = Sidecar(tmp, url, "log", ["--log", str(log)], args.interval)
        cars = [plain, follow]
        deadline = time.monotonic() + 60
        while not (plain.ready() and follow.ready()):
            if time.monotonic() > deadline:
                raise TimeoutError("the sidecars did not become ready: " + follow.err.read_text()[-2000:])
            time.sleep(0.1)
        rows = []
        for size in sizes:
            n_plain, n_follow = len(plain.checks()), len(follow.checks())
            t_burst = time.monotonic()
            _grow_to(log, size)
            burst_s = time.monotonic() - t_burst
            # the first check that ends after the burst may have started during it: the catch-up is done
            # by the second at the latest; the slower of the two is the catch-up cost
            first = _wait_checks(follow, n_follow)
            second = _wait_checks(follow, n_follow + 1)
            catch_up = max(first[0], second[0], key=lambda c: float(str(c["wall_s"])))
            n_plain, n_follow = len(plain.checks()), len(follow.checks())
            lat: dict[str, list[float]] = {"no-log": [], "log": []}
            stop_grow = threading.Event()

            def grow(stop_grow: threading.Event = stop_grow) -> None:
                per_tick = int(args.rate * 1024 / 10)
                with log.open("ab") as fh:
                    while not stop_grow.wait(0.1):
                        fh.write(DECODE * max(1, per_tick // len(DECODE)))
                        fh.flush()

            grower = threading.Thread(target=grow, daemon=True)
            grower.start()
            t_end = time.monotonic() + args.window
            while time.monotonic() < t_end:
                for car in cars:
                    t0 = time.perf_counter()
                    r = car.client.get("/livez")
                    lat[car.name].append((time.perf_counter() - t0) * 1e3)
                    assert r.status_code == 200, f"{car.name} /livez {r.status_code}"
                time.sleep(0.02)
            stop_grow.set()
            grower.join()
            plain_runs = [float(str(c["wall_s"])) * 1e3 for c in plain.checks()[n_plain:]]
            follow_checks = follow.checks()[n_follow:]
            follow_runs = [float(str(c["wall_s"])) * 1e3 for c in follow_checks]
            verdicts = {str(c.get("verdict")) for c in follow_checks}
            rows.append(
                (
                    size >> 20,
                    log.stat().st_size >> 20,
                    burst_s,
                    float(str(catch_up["wall_s"])) * 1e3,
                    statistics.median(plain_runs) if plain_runs else float("nan"),
                    statistics.median(follow_runs) if follow_runs else float("nan"),
                    _pct(lat["no-log"], 0.99),
                    _pct(lat["log"], 0.99),
                    ",".join(sorted(verdicts)),
                    len(follow_runs),
                )
            )
        print(
            f"sidecar following a growing log: re-checks every {args.interval:g} s, "
            f"growth {args.rate:g} KB/s while measuring ({args.window:g} s per size), "
            "baseline = the same sidecar without --log"
        )
        print(
            f"{'size MB':>8} {'on disk':>8} {'catch-up ms':>12} {'no-log ms':>10} {'log ms':>8} {'ratio':>6} "
            f"{'livez p99 no-log':>17} {'livez p99 log':>14} {'runs':>5}  verdict"
        )
        worst = 0.0
        for size, disk, _burst, catch, p_ms, f_ms, p99a, p99b, verdict, runs in rows:
            ratio = f_ms / p_ms if p_ms else float("nan")
            worst = max(worst, ratio)
            print(
                f"{size:>8} {disk:>8} {catch:>12.1f} {p_ms:>10.1f} {f_ms:>8.1f} {ratio:>6.2f} "
                f"{p99a:>14.1f} ms {p99b:>11.1f} ms {runs:>5}  {verdict}"
            )
        livez = max(r[7] for r in rows)
        print(
            f"goal: ratio <= 1.2 at every size (worst {worst:.2f}); /livez p99 < 50 ms (worst {livez:.1f} ms)"
        )
        return 0
    finally:
        for car in cars:
            car.close()
        if sim is not None:
            stop(sim)
        shutil.rmtree(tmp, ignore_errors=True)


def _start_sim_with_log(port: int, log: Path, attestation: Path) -> subprocess.Popen[bytes]:
    """The simulator logs to ``log`` and attests in the benchmark's own directory (the sidecars read it:
    the draft head's identity is proven only by the attestation)."""
    from tests.support.sim_process import sim_command

    cmd = sim_command(
        port, speed=1000.0, startup=0.3, extra=["--log", str(log), "--attestation", str(attestation)]
    )
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_listening(port, proc, what="simulator")
    return proc


if __name__ == "__main__":
    raise SystemExit(main())
