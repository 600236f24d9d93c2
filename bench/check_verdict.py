"""Tokens and wall time for `spark-validate check` to reach its verdict, per scenario, against the
simulator at --speed 1 (its modelled DGX Spark step times), with a fixed 256-token probe as baseline.

For each scenario the script starts ``python -m validator.sim`` on a free loopback port, sends one
fixed 256-token greedy ``/generate`` (what a non-sequential probe would spend; measured in this run, on
this server), then runs the real CLI ``python -m validator check --format json`` as a subprocess and
reads the probe's tokens and wall time from its report. The ratio columns are check / baseline: what the
sequential probe saves (tokens) and what the whole check costs against generating 256 tokens (wall,
including the check process's own start-up).

Run: ``python -m bench.check_verdict [--repeat N] [--speed S]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.support.private_dir import private_tempdir
from tests.support.sim_process import SimProcess, sim_process, wait_healthy

REPO = Path(__file__).resolve().parents[1]


SCENARIOS = ("healthy", "draft-head-weight-only", "no-spec")
FIXED_TOKENS = 256
PROMPT = "Explain, step by step, how a speculative decoder verifies drafted tokens."


def fixed_probe(url: str) -> tuple[int, float]:
    """One greedy 256-token request, timed from send to the full reply."""
    import httpx

    body = {"text": PROMPT, "sampling_params": {"max_new_tokens": FIXED_TOKENS, "temperature": 0.0}}
    t0 = time.perf_counter()
    resp = httpx.post(f"{url}/generate", json=body, timeout=120)
    wall = time.perf_counter() - t0
    resp.raise_for_status()
    return int(resp.json()["meta_info"]["completion_tokens"]), wall


def run_check(url: str, sim: SimProcess) -> tuple[dict[str, object], int, float]:
    att, log = sim.attestation, sim.log
    cmd = [sys.executable, "-m", "validator", "check", "--url", url, "--format", "json", "--wait", "30"]
    cmd += ["--attestation", str(att), "--log", str(log)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    return json.loads(proc.stdout), proc.returncode, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario (median reported)")
    parser.add_argument("--speed", type=float, default=1.0, help="simulator speed-up (default 1: real pace)")
    args = parser.parse_args()

    import tempfile

    print(
        f"check vs a fixed {FIXED_TOKENS}-token probe; simulator --speed {args.speed:g}, "
        f"medians of {args.repeat}"
    )
    head = (
        f"{'scenario':<24} {'verdict':<8} {'exit':>4} {'tokens':>6} {'probe s':>8} {'check s':>8} "
        f"{'fixed s':>8} {'tok ratio':>9} {'wall ratio':>10}"
    )
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(dir=private_tempdir("bench-check-")) as tmp:
        for scenario in SCENARIOS:
            rows: list[tuple[str, int, int, float, float, float]] = []
            for i in range(args.repeat):
                d = Path(tmp) / f"{scenario}-{i}"
                d.mkdir()
                with sim_process(d, "--scenario", scenario, speed=args.speed, startup=0.2) as sim:
                    wait_healthy(sim.url)
                    fixed_tokens, fixed_wall = fixed_probe(sim.url)
                    assert fixed_tokens == FIXED_TOKENS, fixed_tokens
                    report, rc, check_wall = run_check(sim.url, sim)
                probe = report.get("probe") or {}
                assert isinstance(probe, dict)
                tokens = int(probe.get("completion_tokens") or 0)
                probe_wall = float(probe.get("wall_s") or 0.0)
                rows.append((str(report["verdict"]), rc, tokens, probe_wall, check_wall, fixed_wall))
            verdict, rc = rows[0][0], rows[0][1]
            tokens = int(statistics.median(r[2] for r in rows))
            probe_s = statistics.median(r[3] for r in rows)
            check_s = statistics.median(r[4] for r in rows)
            fixed_s = statistics.median(r[5] for r in rows)
            print(
                f"{scenario:<24} {verdict:<8} {rc:>4} {tokens:>6} {probe_s:>8.2f} {check_s:>8.2f} "
                f"{fixed_s:>8.2f} {tokens / FIXED_TOKENS:>9.2f} {check_s / fixed_s:>10.2f}"
            )
    print(
        "\ntokens/probe s: the sequential probe's tokens and time to its verdict (0 when speculation is off:"
        "\nthe server's own state already decides); check s: the whole CLI process; fixed s: one 256-token"
        "\ngreedy request on the same server; ratios are check / fixed."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
