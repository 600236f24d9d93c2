"""Launch-command parse cost: spark-validate's table replay against SGLang's real parser, same run.

Why: preflight runs as ExecStartPre on every start; parsing must not cost an SGLang import. Prints cold
process times (fresh interpreter, median of N) and in-process times, with ratios to the baseline (the real
``prepare_server_args`` in the SGLang venv). Usage: python -m bench.parse_speed [N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.support.launch_recipe import RECIPE_ARGV

REPO = Path(__file__).resolve().parents[1]


SGLANG_PYTHON = os.environ.get("SPARK_VALIDATE_SGLANG_PYTHON", str(REPO / ".venv-sglang" / "bin" / "python"))
OURS = (
    "from validator.sources.sglang.cli import parse_server_args\n"
    f"a, e = parse_server_args({RECIPE_ARGV!r}, origin='bench')\n"
    "assert a['moe_runner_backend'] == 'humming'\n"
)
REAL = (
    "from sglang.srt.server_args import prepare_server_args\n"
    f"sa = prepare_server_args({RECIPE_ARGV!r})\nassert sa.moe_runner_backend == 'humming'\n"
)


def cold(python: str, code: str, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([python, "-c", code], check=True, cwd=REPO, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rows: list[tuple[str, float]] = []
    have_real = Path(SGLANG_PYTHON).exists()
    if have_real:
        rows.append(("real prepare_server_args, cold process", cold(SGLANG_PYTHON, REAL, n)))
    rows.append(("spark-validate replay, cold process", cold(sys.executable, OURS, n)))
    rows.append(("python -c pass, cold process", cold(sys.executable, "pass", n)))

    from validator.sources.sglang import cli as sglang_cli
    from validator.sources.sglang import cli_table as sglang_cli_table

    t = time.perf_counter()
    sglang_cli_table.load_table()
    rows.append(("table load (first, in process)", time.perf_counter() - t))
    reps = 200
    t = time.perf_counter()
    for _ in range(reps):
        sglang_cli.parse_server_args(RECIPE_ARGV, origin="bench")
    rows.append(("recipe parse (warm, in process)", (time.perf_counter() - t) / reps))

    base = rows[0][1]
    print(f"{'what':44} {'seconds':>10} {'vs first row':>13}")
    for name, secs in rows:
        print(f"{name:44} {secs:10.4f} {secs / base:12.3f}x")
    if not have_real:
        print(f"(no {SGLANG_PYTHON}: baseline is our own cold process)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
