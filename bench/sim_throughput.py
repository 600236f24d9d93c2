"""Decode throughput of the simulator at --speed 1, per scenario, against no-spec measured in the same run.

By wall clock over real HTTP; the ratios should mirror domain.md and recipes.md (sampled GSM8K-like: all
three ~1.4x over the no-MTP configurations' ~38-44 tok/s, the broken draft head below baseline; DSpark
between the community's 40 tok/s on prose and 72 on code at its 5.29 mean; the baseline recipe near the
published 36 to 38 tok/s).
Usage: ``python -m bench.sim_throughput [--tokens N] [--temperature T] [--scenarios a,b,...]``.
"""

from __future__ import annotations

import argparse
import time

import httpx

from validator.sim.runner import SimServer


def measure(scenario: str, tokens: int, temperature: float, requests: int) -> tuple[float, float]:
    """(decode tok/s by wall clock, mean spec_accept_length or 0)."""
    with SimServer(  # --enable-metrics: the replies carry first_token_latency, which the timing needs
        scenario,
        speed=1.0,
        startup_seconds=0.0,
        attestation_path="/tmp/spark-validate/bench.json",
        enable_metrics=True,
    ) as sim:
        sim.wait_ready(10)
        total_tokens, total_decode_s, lengths = 0, 0.0, []
        for i in range(requests):
            body = {
                "text": f"bench {i}",
                "sampling_params": {"max_new_tokens": tokens, "temperature": temperature},
            }
            t0 = time.perf_counter()
            meta = httpx.post(f"{sim.url}/generate", json=body, timeout=120).json()["meta_info"]
            wall = time.perf_counter() - t0
            total_tokens += meta["completion_tokens"] - 1
            total_decode_s += wall - meta["first_token_latency"]
            lengths.append(meta.get("spec_accept_length", 0.0))
    return total_tokens / total_decode_s, sum(lengths) / len(lengths)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument(
        "--scenarios",
        default="healthy,draft-head-weight-only,dspark,dspark-broken-drafter,cookbook,baseline",
        help="compared against no-spec, which always runs first",
    )
    a = ap.parse_args()
    names = ["no-spec", *[n for n in a.scenarios.split(",") if n and n != "no-spec"]]
    rows = [(s, *measure(s, a.tokens, a.temperature, a.requests)) for s in names]
    base = rows[0][1]
    print(f"{'scenario':<24} {'tok/s':>8} {'accept len':>10} {'vs no-spec':>10}")
    for name, tps, acc in rows:
        print(f"{name:<24} {tps:8.2f} {acc:10.2f} {tps / base:9.2f}x")


if __name__ == "__main__":
    main()
