"""CPU a verdict-only live test spends: the live job in-process against the simulator's ASGI app
(``LiveInputs.transport``) against the baseline the live tests use today, a simulator process plus a
``python -m validator check`` process on loopback, per scenario, in the same run.

CPU is this process's own (``time.process_time``) for the in-process check and the children's
(``resource.getrusage(RUSAGE_CHILDREN)``, user + system) for the two processes: the figure that bounds
how many such tests two cores run per minute, whatever else the machine is doing.

Run: ``python -m bench.live_in_process [--repeat N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time

from tests.support.asgi_check import statuses_in_process
from tests.support.check_helpers import run_check
from tests.support.private_dir import private_tempdir
from tests.support.sim_process import sim_process

SCENARIOS = ("healthy", "draft-head-weight-only", "fp8-ignored")


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(
        statuses_in_process("healthy", private_tempdir("bench-live-"))
    )  # imports paid once, as in a test session
    print(f"{'scenario':<24}{'processes CPU s':>16}{'in-process CPU s':>18}{'ratio':>8}")
    for scenario in SCENARIOS:
        outside, inside = [], []
        for _ in range(args.repeat):
            c0 = _children_cpu()
            with sim_process(private_tempdir("bench-live-"), "--scenario", scenario) as sim:
                run_check(sim.url, "--wait", "20")
            outside.append(_children_cpu() - c0)
            t0 = time.process_time()
            asyncio.run(statuses_in_process(scenario, private_tempdir("bench-live-")))
            inside.append(time.process_time() - t0)
        o, i = statistics.median(outside), statistics.median(inside)
        print(f"{scenario:<24}{o:>16.2f}{i:>18.2f}{o / i:>7.1f}x")


if __name__ == "__main__":
    main()
