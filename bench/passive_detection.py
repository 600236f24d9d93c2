"""Passive detection latency: how long after a server's production acceptance collapses to 1.00 does a
sidecar with ``--no-probe`` drop ``/readyz``, reading only the server's own ``/metrics``?

Each row runs a simulator with ``--enable-metrics --collapse-after C`` under back-to-back greedy traffic
(tests/support/passive_collapse.py) and a sidecar re-checking every ``interval`` seconds with the probe
off. The latency is from the send time of the first traffic request whose drafts were all rejected (the
collapse as a client could first see it) to the first ``/readyz`` poll (every 20 ms) that is not 200. The
goal: within two re-check intervals, and ``probe req`` (requests the server served beyond the traffic's)
0. Run: ``python -m bench.passive_detection [--intervals 1,2,5] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from tests.support.passive_collapse import run_collapse


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", default="1,2,5", help="re-check intervals to measure, seconds")
    ap.add_argument("--runs", type=int, default=3, help="runs per interval")
    ap.add_argument("--collapse-after", type=float, default=4.0, help="seconds of healthy traffic first")
    ap.add_argument("--speed", type=float, default=20.0, help="simulator speed (default 20)")
    args = ap.parse_args()
    rows = []
    for interval in (float(x) for x in args.intervals.split(",")):
        lat: list[float] = []
        probe = 0.0
        missed = 0
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="spark-validate-passive-") as tmp:
                run = run_collapse(
                    Path(tmp), interval_s=interval, collapse_after_s=args.collapse_after, speed=args.speed
                )
            if run.latency_s is None:
                missed += 1
            else:
                lat.append(run.latency_s)
            probe += run.probe_requests or 0.0
        rows.append((interval, lat, probe, missed))
    print(f"{'interval s':>10} {'runs':>4} {'median s':>9} {'max s':>7} {'max/interval':>12} {'<=2x':>5} "
          f"{'probe req':>9} {'missed':>6}")  # fmt: skip
    ok = True
    for interval, lat, probe, missed in rows:
        worst = max(lat) if lat else float("nan")
        within = bool(lat) and worst <= 2 * interval and not missed
        ok &= within and probe == 0
        med = statistics.median(lat) if lat else float("nan")
        print(f"{interval:>10g} {len(lat) + missed:>4} {med:>9.2f} {worst:>7.2f} {worst / interval:>12.2f} "
              f"{'yes' if within else 'NO':>5} {probe:>9g} {missed:>6}")  # fmt: skip
    print("goal (every drop within 2 re-check intervals, no probe request):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
