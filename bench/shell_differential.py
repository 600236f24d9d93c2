"""The launcher-script reader against real bash, at any size: ``python -m bench.shell_differential
--seed N --count M [--workers W] [--shell sh]``. Prints the outcomes (proven, partly: some part unresolved,
unresolved, no-launch: bash started no server either, disagree) overall and by construct, and the first
disagreements with their scripts. The CI test (``tests/test_shell_differential.py``) runs a fixed seed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.support.shell_differential import differential


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--show", type=int, default=3, help="disagreements to print")
    p.add_argument(
        "--shell", choices=["bash", "sh"], default="bash", help="sh: the scripts as #!/bin/sh (dash)"
    )
    args = p.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        totals, by, bad = differential(args.seed, args.count, Path(tmp), args.workers, args.shell)
    took = time.monotonic() - t0
    kinds = ["proven", "partly", "unresolved", "no-launch", "disagree"]
    print(
        f"{args.count} scripts, seed {args.seed}, {took:.1f} s: "
        + ", ".join(f"{k} {totals[k]}" for k in kinds)
    )
    print(f"{'construct':24} " + " ".join(f"{k:>10}" for k in kinds))
    for name in sorted(by):
        print(f"{name:24} " + " ".join(f"{by[name][k]:>10}" for k in kinds))
    for b in bad[: args.show]:
        print("=" * 72 + "\n" + b)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
