"""Time `spark-validate preflight` on the recipe as a whole process, against a bare interpreter start
measured in the same run (goal: under 0.3 s and within 5x of `python -c pass`), in wall time and in CPU
time (the steadier figure on a busy machine).

The recipe runs against SGLang 0.5.23's real files with the Ling-3.0 patch's two additions, located
through a server-venv interpreter (the subprocess probe is part of the cost), and a real-shape
checkpoint written as safetensors headers over sparse files.

    python -m bench.preflight [--runs 15] [--baseline-tree DIR]

``--baseline-tree`` adds the recipe row run from another checkout (``git worktree add DIR COMMIT``), so a
change's effect is a ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.sglang_builds import fake_interpreter, make_build

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict[str, str], runs: int, tree: Path) -> tuple[float, float, float, int]:
    """Median and best wall time, and median CPU time (user + system of the process and its children:
    steadier than wall time on a shared machine)."""
    samples, cpu = [], []
    rc = 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        rc = subprocess.run(
            cmd,
            env={**env, "PYTHONPATH": str(tree)},
            cwd=tree,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ).returncode
        samples.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(samples), min(samples), statistics.median(cpu), rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--baseline-tree", type=Path, help="another checkout: its preflight on the recipe too")
    opts = ap.parse_args()
    runs = opts.runs
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        site = base / "site-packages"
        make_build(site)
        dist = site / "humming_kernels-0.1.19.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: humming-kernels\nVersion: 0.1.19\n")
        (site / "humming").mkdir()
        (site / "humming" / "__init__.py").write_text("")
        kernel = base / "cache" / "0" / "kernel.cubin"
        kernel.parent.mkdir(parents=True)
        kernel.write_bytes(b"\x7fELF")
        python = fake_interpreter(base / "venv" / "bin", site)
        model = base / "model"
        write_checkpoint(model, small=False)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "SGLANG_ENABLE_FP8_LM_HEAD": "1",
            "HUMMING_CACHE_DIR": str(base / "cache"),
            "PYTHONPATH": str(REPO),
        }
        recipe = (
            f"{python} -m sglang.launch_server --model-path {model} --moe-runner-backend humming "
            "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
            f"--speculative-num-draft-tokens 4 --speculative-draft-model-path {model}"
        )
        recipe_cmd = [sys.executable, "-m", "validator", "preflight", "--launch-cmd", recipe]
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("python -c 'import validator.cli'", [sys.executable, "-c", "import validator.cli"]),
            (
                "python -c 'import pydantic.BaseModel'",
                [sys.executable, "-c", "from pydantic import BaseModel"],
            ),
            (
                "preflight (--sglang-root, no interpreter probe)",
                [
                    sys.executable,
                    "-m",
                    "validator",
                    "preflight",
                    "--launch-cmd",
                    recipe,
                    "--sglang-root",
                    str(site / "sglang"),
                ],
            ),
            ("preflight (recipe, interpreter probe)", recipe_cmd),
            (
                "preflight --format json",
                [sys.executable, "-m", "validator", "preflight", "--launch-cmd", recipe, "--format", "json"],
            ),
        ]
        trees = [REPO] * len(rows)
        if opts.baseline_tree is not None:
            rows.append((f"preflight (recipe) at {opts.baseline_tree.name}", recipe_cmd))
            trees.append(opts.baseline_tree.resolve())
        pairs = zip(rows, trees, strict=True)
        results = [(name, *timed(cmd, env, runs, tree)) for (name, cmd), tree in pairs]
    base_med, base_cpu = results[0][1], results[0][3]
    head = f"{'what':<52} {'median ms':>10} {'min ms':>8} {'x bare':>7} {'cpu ms':>7} {'x bare':>7} {'rc':>3}"
    print(head)
    for name, med, lo, cpu, rc in results:
        print(
            f"{name:<52} {med * 1e3:10.1f} {lo * 1e3:8.1f} {med / base_med:7.2f}"
            f" {cpu * 1e3:7.1f} {cpu / base_cpu:7.2f} {rc:>3}"
        )


if __name__ == "__main__":
    main()
