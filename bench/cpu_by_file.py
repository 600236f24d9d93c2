"""Where a test run's CPU goes, per test file: the records ``tests/support/cpu_profile.py`` wrote when the
run had ``SPARK_VALIDATE_CPU_PROFILE=DIR`` set (xdist workers included).

Prints the files that cost most (CPU of pytest's process and of the children it waited for, with the
share of the run's total), the costliest single tests, and what each worker spent before its first test
(interpreter start, imports and collecting the whole suite). CPU, not wall: on a shared machine it is
the figure that adds up.

Run: ``python -m bench.cpu_by_file DIR [--top N]``. ``--wall-table`` prints instead each file's wall
seconds, longest first: the table ``tests/wall_by_file.txt`` that orders the files of a CI run.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--wall-table", action="store_true", help="each file's wall seconds, longest first")
    args = parser.parse_args()
    tests: list[dict[str, object]] = []
    collections: list[dict[str, object]] = []
    for path in sorted(args.dir.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            (tests if "test" in record else collections).append(record)
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for t in tests:
        row = per_file[str(t["test"]).split("::")[0]]
        row[0] += 1
        row[1] += float(str(t["self"]))
        row[2] += float(str(t["children"]))
        row[3] += float(str(t["wall"]))
    if args.wall_table:
        print("# wall seconds of each test file in a CI run, longest first")
        print("# (python -m bench.cpu_by_file DIR --wall-table; tests/conftest.py orders the files by it)")
        for name, row in sorted(per_file.items(), key=lambda kv: (-kv[1][3], kv[0])):
            if name.startswith("tests/test_"):  # not a record of the zygotes' own CPU
                print(f"{row[3]:.1f} {Path(name).name}")
        return
    tests_cpu = sum(r[1] + r[2] for r in per_file.values())
    collect_cpu = sum(float(str(c["collection"])) for c in collections)
    total = tests_cpu + collect_cpu
    print(f"{len(tests)} tests in {len(per_file)} files, {len(collections)} processes")
    print(f"CPU s: tests {tests_cpu:.0f}, before the first test {collect_cpu:.0f}, total {total:.0f}")
    print(f"\n{'file':<44}{'tests':>6}{'self s':>8}{'child s':>9}{'CPU s':>8}{'share':>7}{'wall s':>8}")
    ranked = sorted(per_file.items(), key=lambda kv: kv[1][1] + kv[1][2], reverse=True)
    for name, (n, own, kids, wall) in ranked[: args.top]:
        cpu = own + kids
        print(f"{name:<44}{n:>6.0f}{own:>8.1f}{kids:>9.1f}{cpu:>8.1f}{cpu / total:>7.1%}{wall:>8.1f}")
    print(f"\n{'test':<90}{'CPU s':>8}{'share':>7}")
    costly = sorted(tests, key=lambda t: float(str(t["self"])) + float(str(t["children"])), reverse=True)
    for t in costly[: args.top]:
        cpu = float(str(t["self"])) + float(str(t["children"]))
        print(f"{str(t['test'])[:89]:<90}{cpu:>8.1f}{cpu / total:>7.1%}")
    print(f"\n{'process':<12}{'CPU s before the first test':>28}")
    for c in sorted(collections, key=lambda c: str(c["worker"])):
        print(f"{c['worker']!s:<12}{float(str(c['collection'])):>28.1f}")


if __name__ == "__main__":
    main()
