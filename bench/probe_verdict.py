"""Tokens and wall time the acceptance probe needs to reach its verdict, per case.

Two parts. ``in-memory``: 200 seeded runs of the real probe loop against simulated speculative rounds (no
network), reporting the verdict counts and tokens-to-verdict (mean, max); the baseline row is a fixed
256-token probe (what a non-sequential probe would spend), so the ratio column shows what stopping early
saves. NEXTN cases draft K = 3 tokens per round against the default pack's threshold 1.5; DSpark cases
K = 8 (Ling-3.0-flash-dspark's block size) against the DSpark packs' threshold 2.0, from a broken drafter
(1.00) through the published per-workload range (3.5 to 6.4, macro mean 5.29). ``simulator``: one run per
scenario against ``spark-validate sim`` on loopback, with wall time.

Run: ``python -m bench.probe_verdict [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from tests.support.probe_sim import SimCase, SimServer
from validator.probe import ProbeConfig, load_prompts, probe_server, probe_verdict, run_probe
from validator.sources.server.client import SGLangClient

FIXED_BUDGET = 256  # baseline: a fixed-length probe


NEXTN = ProbeConfig()  # the default pack: threshold 1.5, 4 draft tokens (K = 3)
DSPARK = ProbeConfig(threshold=2.0, num_draft_tokens=9)  # the DSpark packs: block size 8 (K = 8)
DSPARK_CASES = [
    SimCase("dspark broken (1.00)", 1.0, k=8),
    SimCase("dspark marginal (1.60)", 1.6, 0.1, k=8),
    SimCase("dspark prose (3.50)", 3.5, k=8),
    SimCase("dspark mean (5.29)", 5.29, k=8),
    SimCase("dspark code (6.40)", 6.4, k=8),
]


def in_memory(runs: int) -> None:
    prompts = load_prompts()
    cases = [
        (SimCase("broken (1.00)", 1.0), NEXTN),
        (SimCase("marginal (1.30)", 1.3, 0.1), NEXTN),
        (SimCase("healthy (2.68)", 2.68), NEXTN),
    ]
    cases += [(SimCase("healthy (3.05)", 3.05), NEXTN), (SimCase("healthy (3.90)", 3.9), NEXTN)]
    cases += [(case, DSPARK) for case in DSPARK_CASES]
    print(f"in-memory, {runs} seeded runs per case; baseline = fixed {FIXED_BUDGET}-token probe")
    print(
        f"{'case':<24} {'pass':>5} {'fail':>5} {'undec':>5} {'mean tok':>9} {'max tok':>8} "
        f"{'vs base':>8} {'ms/run':>7}"
    )
    for case, config in cases:
        counts = {"pass": 0, "fail": 0, "undecided": 0}
        tokens: list[int] = []
        t0 = time.perf_counter()
        for seed in range(runs):
            r = asyncio.run(run_probe(SimServer(case, seed), prompts, config))
            counts[probe_verdict(r).value] += 1
            tokens.append(r.completion_tokens)
        ms = 1000 * (time.perf_counter() - t0) / runs
        mean = sum(tokens) / len(tokens)
        print(
            f"{case.name:<24} {counts['pass']:>5} {counts['fail']:>5} {counts['undecided']:>5} {mean:>9.1f} "
            f"{max(tokens):>8} {mean / FIXED_BUDGET:>8.2f} {ms:>7.2f}"
        )


def simulator() -> None:
    try:
        from validator.sim.runner import SimServer as Sim
    except ImportError:
        print("simulator: not available")
        return
    print("\nsimulator on loopback (speed 1.0: the simulator's modelled step times)")
    print(f"{'scenario':<24} {'verdict':<10} {'tokens':>6} {'requests':>8} {'accept':>7} {'wall s':>7}")
    runs = [("healthy", NEXTN), ("draft-head-weight-only", NEXTN), ("no-spec", NEXTN)]
    runs += [("dspark", DSPARK), ("dspark-broken-drafter", DSPARK)]
    for scenario, config in runs:
        with Sim(scenario, seed=1, startup_seconds=0.05) as sim:
            sim.wait_ready(10)

            async def go(url: str, config: ProbeConfig = config) -> object:
                async with SGLangClient(url) as c:
                    return await probe_server(c, config=config)

            r = asyncio.run(go(sim.url))
            from validator.facts import ProbeResult

            assert isinstance(r, ProbeResult)
            acc = f"{r.accept_length:.2f}" if r.accept_length is not None else "-"
            print(
                f"{scenario:<24} {probe_verdict(r).value:<10} {r.completion_tokens:>6} {r.requests:>8} "
                f"{acc:>7} {r.wall_s or 0:>7.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    in_memory(args.runs)
    simulator()


if __name__ == "__main__":
    main()
