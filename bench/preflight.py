"""Time `spark-validate preflight` on the recipe as a whole process against its ceiling: under 300 ms
median wall on the 2-core box (issue 31). Wall and CPU time (the steadier figure on a busy machine) per row,
with floor rows (a bare interpreter, pydantic's import and first adapter, `check --help`, preflight's
imports alone, the interpreter probe alone) that say where the time goes.

The recipe runs against SGLang 0.5.23's real files with the Ling-3.0 patch's two additions, located
through a server-venv interpreter (the subprocess probe is part of the cost), and a real-shape
checkpoint written as safetensors headers over sparse files.

    python -m bench.preflight [--runs 15] [--baseline-tree DIR]

``--baseline-tree`` adds the recipe row run from another checkout (``git worktree add --detach DIR COMMIT``
outside /tmp: a pack below a directory others may write is refused); the ratios are then against that
row, so a change's effect is measured in the same run. Without it they are against the bare interpreter.
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
from validator.sources.sglang.interpreter import _PROBE

REPO = Path(__file__).resolve().parents[1]
RECIPE = "preflight (recipe, interpreter probe)"  # the row the ceiling holds
CEILING_S = 0.3
IMPORTS = (
    "import yaml, validator.cli, validator.commands.preflight, validator.preflight, validator.outputs.text; "
    "from validator.checks.registry import builtins; builtins(); "
    "import validator.sources.sglang.install, validator.sources.sglang.cli, "
    "validator.sources.launch.command, validator.sources.host.checkpoint, validator.sources.host.humming, "
    "validator.sources.host.platform"
)


def once(cmd: list[str], env: dict[str, str], tree: Path) -> tuple[float, float, int]:
    """Wall time, CPU time (user + system of the process and its children: steadier than wall time on a
    shared machine) and exit code of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    child_env = {**env, "PYTHONPATH": str(tree)}
    out = subprocess.DEVNULL
    rc = subprocess.run(cmd, env=child_env, cwd=tree, stdout=out, stderr=out).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, rc


def timed(
    rows: list[tuple[str, list[str]]], trees: list[Path], env: dict[str, str], runs: int
) -> list[tuple[str, float, float, float, int]]:
    """Per row: median and best wall time, median CPU time, last exit code. The rows take turns, one run
    each per round, so that a machine getting busier or quieter moves every row alike."""
    samples: list[list[tuple[float, float, int]]] = [[] for _ in rows]
    for _ in range(runs):
        for i, ((_name, cmd), tree) in enumerate(zip(rows, trees, strict=True)):
            samples[i].append(once(cmd, env, tree))
    return [
        (
            name,
            statistics.median(s[0] for s in got),
            min(s[0] for s in got),
            statistics.median(s[1] for s in got),
            got[-1][2],
        )
        for (name, _cmd), got in zip(rows, samples, strict=True)
    ]


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
            # what validating one document costs before any of ours is read: pydantic's import, and
            # its first adapter (which loads pydantic's plugin machinery, importlib.metadata included)
            (
                "pydantic: import, one TypeAdapter",
                [sys.executable, "-c", "from pydantic import TypeAdapter; TypeAdapter(int)"],
            ),
            # what every command pays before its work: the CLI, the command's module, its options
            ("spark-validate check --help", [sys.executable, "-m", "validator", "check", "--help"]),
            # what a preflight on the recipe cannot do without: its imports (no work done), and the
            # server's interpreter asked where sglang is (one more interpreter start)
            ("preflight's imports alone", [sys.executable, "-c", IMPORTS]),
            ("the interpreter probe alone", [str(python), "-c", _PROBE]),
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
            (RECIPE, recipe_cmd),
            (
                "preflight --format json",
                [sys.executable, "-m", "validator", "preflight", "--launch-cmd", recipe, "--format", "json"],
            ),
        ]
        trees = [REPO] * len(rows)
        if opts.baseline_tree is not None:
            rows.append((f"preflight (recipe) at {opts.baseline_tree.name}", recipe_cmd))
            trees.append(opts.baseline_tree.resolve())
        results = timed(rows, trees, env, runs)
    # ratios against the baseline checkout's recipe row when there is one, else the bare interpreter
    ref = results[-1] if opts.baseline_tree is not None else results[0]
    col = "x base" if opts.baseline_tree is not None else "x bare"
    print(f"{'what':<52} {'median ms':>10} {'min ms':>8} {col:>7} {'cpu ms':>7} {col:>7} {'rc':>3}")
    for name, med, lo, cpu, rc in results:
        print(
            f"{name:<52} {med * 1e3:10.1f} {lo * 1e3:8.1f} {med / ref[1]:7.2f}"
            f" {cpu * 1e3:7.1f} {cpu / ref[3]:7.2f} {rc:>3}"
        )
    recipe = next(r for r in results if r[0] == RECIPE)
    verdict = "within" if recipe[1] < CEILING_S else "OVER"
    print(
        f"ceiling: {RECIPE}: {recipe[1] * 1e3:.0f} ms median wall, {verdict} {CEILING_S * 1e3:.0f} ms"
        f" (load average {os.getloadavg()[0]:.1f}; judge it on a quiet machine)"
    )


if __name__ == "__main__":
    main()
