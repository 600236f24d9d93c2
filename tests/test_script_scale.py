"""``preflight --script`` stays linear in what a script builds: a value doubled twenty-two times (4 MB) and a
``set --`` of 50,000 words are read in seconds, as bash runs them, not in minutes (both were quadratic:
a 1 MB value took 46 s, 20,000 words 41 s). The bound is a guard against a hang, not a benchmark."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import run_cli


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "start.sh"
    path.write_text("#!/bin/bash\n" + body)
    return path


def test_a_doubled_value_is_read_in_linear_time(tmp_path: Path) -> None:
    body = (
        "a=x\n"
        + "a=$a$a\n" * 22
        + "exec python -m sglang.launch_server --model-path /m --served-model-name $a\n"
    )
    res = run_cli("preflight", "--script", str(_script(tmp_path, body)), "--format", "json", timeout=120)
    assert res.returncode in (69, 78), res.stderr[-2000:]
    assert "Traceback" not in res.stderr


def test_many_positional_words_are_read_in_linear_time(tmp_path: Path) -> None:
    body = (
        "set -- " + " ".join(["a"] * 50_000) + '\nexec python -m sglang.launch_server --model-path /m "$@"\n'
    )
    res = run_cli("preflight", "--script", str(_script(tmp_path, body)), timeout=120)
    assert res.returncode == 65, res.stderr[-2000:]
    line = res.stderr.strip()
    assert "unrecognized arguments: a a a" in line and "(49980 more)" in line and len(line) < 2500
