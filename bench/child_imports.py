"""CPU a test's child spends importing the live check's HTTP client, with and without an extra site
directory on its path: ``--with`` names the directory (.ci/run's ``.cache/lint-tools``, which holds
import-linter and rich, or ``.cache/browser-tools``, selenium and trio) whose presence the test environment
once had. httpx imports its command-line client's modules (click, pygments, rich) whenever they are
installed, and httpcore imports trio, in every child that imports them.

Run: ``python -m bench.child_imports --with .cache/lint-tools [--runs 30]``. Prints CPU ms per child, both
ways in the same run, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

IMPORTS = {
    "import httpx": "import httpx",
    "the live check's client": "import validator.sources.server.client",
    # what a client's first request imports (httpcore's locks, which import trio where it is installed)
    "a client's transport": "import httpx, httpcore._synchronization",
}


def _cpu_ms(code: str, env: dict[str, str]) -> float:
    """CPU milliseconds (user + system) of one ``python -c CODE`` child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with", dest="extra", type=Path, required=True, help="the extra site directory")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    # bytecode written on first import, as in .ci/run (where PYTHONDONTWRITEBYTECODE is unset)
    plain = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    extra = {**plain, "PYTHONPATH": str(args.extra.resolve())}
    print(f"{'child':<26}{'without ms':>12}{'with ms':>10}{'ratio':>8}")
    for label, code in IMPORTS.items():
        _cpu_ms(code, plain), _cpu_ms(code, extra)  # bytecode written, caches warm, for both
        without = with_ = 0.0
        for _ in range(args.runs):  # alternated, so the machine's load falls on both alike
            without += _cpu_ms(code, plain) / args.runs
            with_ += _cpu_ms(code, extra) / args.runs
        print(f"{label:<26}{without:>12.0f}{with_:>10.0f}{without / with_:>8.2f}")


if __name__ == "__main__":
    main()
