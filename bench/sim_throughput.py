"""Decode throughput of the simulator at --speed 1: healthy vs draft-head-weight-only vs no-spec.

Measured in the same run against the no-spec baseline, by wall clock over real HTTP; the ratios should
mirror domain.md (sampled GSM8K-like: all three ~1.4x over the no-MTP configurations' ~38-44 tok/s, the
broken draft head below baseline). Usage: ``python bench/sim_throughput.py [--tokens N] [--temperature T]``.
"""

from __future__ import annotations

import argparse
import time

import httpx

from validator.sim import SimServer


def measure(scenario: str, tokens: int, temperature: float, requests: int) -> tuple[float, float]:
    """(decode tok/s by wall clock, mean spec_accept_length or 0)."""
    with SimServer(
        scenario, speed=1.0, startup_seconds=0.0, attestation_path="/tmp/spark-validate/bench.json"
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
    a = ap.parse_args()
    rows = [(s, *measure(s, a.tokens, a.temperature, a.requests))
            for s in ("no-spec", "healthy", "draft-head-weight-only")]  # fmt: skip
    base = rows[0][1]
    print(f"{'scenario':<24} {'tok/s':>8} {'accept len':>10} {'vs no-spec':>10}")
    for name, tps, acc in rows:
        print(f"{name:<24} {tps:8.2f} {acc:10.2f} {tps / base:9.2f}x")


if __name__ == "__main__":
    main()
