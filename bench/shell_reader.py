"""How fast ``preflight --script``'s reader reads a launcher script, in process: ``python -m
bench.shell_reader [--seed N] [--count M] [--rounds R]``.

Why: the reader runs inside preflight, which runs before every server start. The scripts are the
differential test's (``tests/support/shell_gen.py``: real recipes' statements and attacks), read with
``read_exec`` as preflight reads them. Prints the median over rounds of the whole read per script, and of
its parse alone (tree-sitter plus ``bash -n``), so that the evaluation's share shows apart from the
subprocess, as wall time and as this process's CPU time (steadier on a shared machine). Compare two
checkouts by running this file from each on the same machine, interleaved.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time

from tests.support.private_dir import private_tempdir
from tests.support.shell_differential import sandbox
from tests.support.shell_gen import Gen
from validator.errors import InputError, UnresolvedLaunch
from validator.sources.launch.script import read_exec

try:  # the parse step, wherever this checkout keeps it
    from validator.sources.launch.shell.syntax import parse
except ImportError:  # pragma: no cover - an older layout, for before/after runs
    from validator.sources.shell_parse import parse  # type: ignore[no-redef]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--count", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    rng = random.Random(args.seed)
    scripts = [Gen(random.Random(rng.getrandbits(64))).script() for _ in range(args.count)]
    root = private_tempdir("shell-reader-")
    base = sandbox(root)
    paths = []  # one file per script
    for k, s in enumerate(scripts):
        path = root / f"s{k}.sh"
        path.write_text(s.text)
        paths.append(path)
    reads: list[tuple[float, float]] = []  # (wall, this process's CPU) per script
    parses: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        t, c = time.perf_counter(), time.process_time()
        for s, path in zip(scripts, paths, strict=True):
            with contextlib.suppress(InputError, UnresolvedLaunch):  # a refusal is a reading too
                read_exec(path, {**base, **s.env}, s.args)
        reads.append(((time.perf_counter() - t) / len(scripts), (time.process_time() - c) / len(scripts)))
        t, c = time.perf_counter(), time.process_time()
        for path in paths:
            with contextlib.suppress(InputError, UnresolvedLaunch):
                parse(path.read_bytes(), str(path))
        parses.append(((time.perf_counter() - t) / len(scripts), (time.process_time() - c) / len(scripts)))
    print(f"{args.count} scripts (seed {args.seed}), median of {args.rounds} rounds, ms per script:")
    for k, what in enumerate(("wall", "CPU of this process (bash -n not counted)")):
        read = statistics.median(r[k] for r in reads)
        parse_only = statistics.median(p[k] for p in parses)
        print(
            f"  {what}: read {read * 1e3:.2f}, parse {parse_only * 1e3:.2f}, "
            f"evaluation {(read - parse_only) * 1e3:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
