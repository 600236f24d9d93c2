"""CPU a test file costs, as it stands in a base commit and as it stands in the working tree, in the same run:
user + system seconds of ``pytest FILE`` and every process it started and waited for
(``resource.getrusage(RUSAGE_CHILDREN)``), the figure that bounds how fast two cores run the suite whatever
else the machine is doing. The base version is the file's text at ``--base``, run from this checkout's
tests/ (so the support code is today's), removed afterwards.

Run: ``python -m bench.test_files_cpu [--base main] tests/test_a.py tests/test_b.py ...``.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _cpu_of(path: Path) -> tuple[float, int]:
    """CPU seconds of one quiet pytest run of ``path`` and its exit status."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), proc.returncode


def _base_copy(base: str, path: str) -> Path | None:
    """The file's text at ``base`` beside it in tests/, or None where the file is new since."""
    shown = subprocess.run(["git", "show", f"{base}:{path}"], cwd=REPO, capture_output=True, check=False)
    if shown.returncode != 0:
        return None
    copy = REPO / Path(path).with_name(f"_base_{Path(path).name}")
    copy.write_bytes(shown.stdout)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", default="main", help="the commit the files are compared with")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    print(f"{'file':<40}{'base CPU s':>12}{'now CPU s':>12}{'ratio':>8}  exit base/now")
    total_base = total_now = 0.0
    for name in args.files:
        copy = _base_copy(args.base, name)
        try:
            before, rc_before = _cpu_of(copy) if copy is not None else (0.0, -1)
        finally:
            if copy is not None:
                copy.unlink()
        now, rc_now = _cpu_of(REPO / name)
        total_base, total_now = total_base + before, total_now + now
        ratio = f"{before / now:>7.1f}x" if before and now else f"{'-':>8}"
        print(f"{Path(name).name:<40}{before:>12.1f}{now:>12.1f}{ratio}  {rc_before}/{rc_now}")
    print(f"{'total':<40}{total_base:>12.1f}{total_now:>12.1f}{total_base / max(total_now, 1e-9):>7.1f}x")


if __name__ == "__main__":
    main()
