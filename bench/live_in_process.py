"""CPU a verdict-only live test spends: the real ``check`` front door in-process against the ``sim`` command's
own server (tests/support/in_process.py: ``LiveInputs.transport``, no socket for HTTP) against the baseline
the live tests used, a simulator process plus a ``python -m validator check`` process on loopback, per
scenario, each with the attestation and the log, in the same run.

CPU is this process's own (``time.process_time``, every thread: the simulator's loop runs on one) for the
in-process check and the children's (``resource.getrusage(RUSAGE_CHILDREN)``, user + system) for the two
processes: the figure that bounds how many such tests two cores run per minute, whatever else the machine
is doing.

Run: ``python -m bench.live_in_process [--repeat N]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from tests.support.check_helpers import CheckRun, evidence_files, run_check
from tests.support.in_process import check_in_process, sim_in_process
from tests.support.private_dir import private_tempdir
from tests.support.sim_process import sim_process

SCENARIOS = ("healthy", "draft-head-weight-only", "fp8-ignored", "malformed-json")


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _in_process(scenario: str) -> CheckRun:
    with sim_in_process(private_tempdir("bench-live-"), "--scenario", scenario) as sim:
        return check_in_process(sim, "--wait", "20", *evidence_files(sim))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    _in_process("healthy")  # imports paid once, as in a test session
    print(f"{'scenario':<24}{'processes CPU s':>16}{'in-process CPU s':>18}{'ratio':>8}  verdicts")
    for scenario in SCENARIOS:
        outside, inside, verdicts = [], [], set()
        for _ in range(args.repeat):
            c0 = _children_cpu()
            with sim_process(private_tempdir("bench-live-"), "--scenario", scenario) as sim:
                real = run_check(sim.url, "--wait", "20", *evidence_files(sim))
            outside.append(_children_cpu() - c0)
            t0 = time.process_time()
            run = _in_process(scenario)
            inside.append(time.process_time() - t0)
            for r in (real, run):
                verdicts.add(r.report["verdict"] if r.report is not None else f"rc {r.rc}")
        o, i = statistics.median(outside), statistics.median(inside)
        print(f"{scenario:<24}{o:>16.2f}{i:>18.2f}{o / i:>7.1f}x  {'/'.join(sorted(verdicts))}")


if __name__ == "__main__":
    main()
