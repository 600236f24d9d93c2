"""The bounded child-process runner (the sglang probe, the flag-table generator) against a program that
floods its output: memory stays at the cap, the deadline holds, and the caller gets one clear line."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from validator.errors import InputError
from validator.sources.child_process import OutputTooLarge, run_in_own_session
from validator.sources.sglang.interpreter import probe_interpreter
from validator.sources.sglang.tables import generate


def _flooder(tmp_path: Path, stream: str = "") -> Path:
    """A "python" that prints without end (a wrapper script gone wrong, a hostile interpreter path)."""
    fake = tmp_path / "python3"
    fake.write_text(f"#!/bin/sh\nexec yes SPAMSPAMSPAMSPAMSPAMSPAMSPAMSPAM {stream}\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("stream", ["", "1>&2"])
def test_a_flood_is_cut_at_the_cap(tmp_path: Path, stream: str) -> None:
    fake = _flooder(tmp_path, stream)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(OutputTooLarge, match="printed more than 1048576 bytes on std"):
        run_in_own_session([str(fake)], timeout=20, cwd=tmp_path, max_output=1 << 20)
    assert time.monotonic() - started < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB: far under 64 MiB


def test_the_probe_and_the_generator_report_a_flood_in_one_line(tmp_path: Path) -> None:
    fake = _flooder(tmp_path)
    started = time.monotonic()
    probe = probe_interpreter(str(fake), timeout=3)
    assert probe.sglang_root is None and "printed more than" in (probe.error or ""), probe.error
    with pytest.raises(InputError, match="printed more than"):
        generate(str(fake), timeout=3)
    assert time.monotonic() - started < 15


def test_a_quiet_program_still_answers(tmp_path: Path) -> None:
    done = run_in_own_session(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10, cwd=tmp_path)
    assert done == (3, b"out\n", b"err\n")
    assert run_in_own_session(["sleep", "5"], timeout=0.5, cwd=tmp_path) is None
