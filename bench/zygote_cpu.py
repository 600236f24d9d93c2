"""CPU of the tests' ``python -m validator`` children exec'd and forked from the warm zygote
(tests/support/zygote.py), in the same run: per command (user + system seconds of one child, the mean of
``--runs``), then, with ``--files``, one pytest process over the test files conftest's ``WARM_CHILDREN``
lists (or those named), the zygote off (``SPARK_VALIDATE_ZYGOTE=0``) and on. One pytest process for all
the files is how an xdist worker meets them: its zygotes start once and serve every file.

Run: ``python -m bench.zygote_cpu [--runs 5] [--files [tests/test_a.py ...]]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

from tests.support import zygote

REPO = Path(__file__).resolve().parents[1]
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--version",),
    ("rules", "list"),
    ("rules", "lint", "validator/data/rules/ling-3.0-flash-dgx-spark.yaml"),
    ("check", "--url", "http://127.0.0.1:1", "--format", "json", "--wait", "0", "--no-probe"),
    ("preflight", "--format", "json", "--launch-cmd", "python -m sglang.launch_server --model-path /m"),
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _per_command(runs: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    print(f"{'command (CPU s per child)':<44}{'exec':>8}{'zygote':>8}{'ratio':>8}")
    start = _children_cpu()
    with zygote.opted_in(True):
        zygote.run([sys.executable, "-m", "validator", "--version"], env=env, cwd=REPO, timeout=120)
    for args in COMMANDS:
        cmd = [sys.executable, "-m", "validator", *args]
        t0 = _children_cpu()
        for _ in range(runs):
            subprocess.run(cmd, capture_output=True, env=env, cwd=REPO, timeout=120, check=False)
        t1 = _children_cpu()
        with zygote.opted_in(True):
            for _ in range(runs):
                zygote.run(cmd, env=env, cwd=REPO, timeout=120)
        t2 = _children_cpu()
        cold, warm = (t1 - t0) / runs, (t2 - t1) / runs
        print(f"{' '.join(args)[:43]:<44}{cold:>8.3f}{warm:>8.3f}{cold / max(warm, 1e-9):>7.1f}x")
    before = _children_cpu()
    zygote.stop_all()
    print(f"the zygote's own CPU (start, imports, warm-up forks, {zygote.served} forks): "
          f"{_children_cpu() - before:.2f} s; whole section {_children_cpu() - start:.1f} s")  # fmt: skip


def _pytest_cpu(files: list[str], switch: str) -> tuple[float, int]:
    t0 = _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO, env={**os.environ, zygote.ENV_SWITCH: switch}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    return _children_cpu() - t0, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", nargs="*", default=None)
    args = parser.parse_args()
    _per_command(args.runs)
    if args.files is None:
        return
    from tests.conftest import WARM_CHILDREN

    files = args.files or sorted({f"tests/{entry.partition('::')[0]}.py" for entry in WARM_CHILDREN})
    cold, rc_cold = _pytest_cpu(files, "0")
    warm, rc_warm = _pytest_cpu(files, "1")
    ratio = cold / max(warm, 1e-9)
    print(f"\n{len(files)} files in one pytest process: exec {cold:.1f} CPU s (exit {rc_cold}), zygote "
          f"{warm:.1f} CPU s (exit {rc_warm}): {ratio:.2f}x, {cold - warm:.1f} s less")  # fmt: skip


if __name__ == "__main__":
    main()
