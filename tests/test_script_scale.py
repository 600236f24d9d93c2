"""``preflight --script`` stays linear in what a script builds: a value doubled twenty-two times (4 MB) and a
``set --`` of 50,000 words are read in seconds, as bash runs them, not in minutes (both were quadratic:
a 1 MB value took 46 s, 20,000 words 41 s). The bound is a guard against a hang, not a benchmark."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

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
    # refused before argparse (quadratic in option words: red team 22), in one short line
    assert "50002 server arguments, more than the 4096" in line and len(line) < 2500, line


def test_an_array_of_many_words_is_read_in_linear_time(tmp_path: Path) -> None:
    """red team 20: each word of an array literal looked for the highest index again (20,000 words: quadratic,
    tens of seconds); the words are numbered as they come."""
    body = (
        "A=("
        + " ".join(["a"] * 20_000)
        + ')\nexec python -m sglang.launch_server --model-path /m "${A[@]}"\n'
    )
    res = run_cli("preflight", "--script", str(_script(tmp_path, body)), timeout=120)
    assert res.returncode == 65 and "20002 server arguments" in res.stderr, res.stderr[-2000:]


def test_paths_whose_many_words_differ_are_not_each_parsed(tmp_path: Path) -> None:
    """red team 20: 256 paths whose arguments differ in number are each parsed with SGLang's flag table
    (argparse, quadratic in one argv's words): 256 argvs of 2,700 words took 50 s, of 15,000 over 5 minutes.
    Past 10,000 words over all the paths the launch is unresolved instead."""
    lines = ["X=()", "B=(" + " ".join(["--enable-metrics"] * 1_500) + ")"]
    for i in range(1, 9):
        lines.append(f"if nvidia-smi -L | grep -q GB{i}; then X+=(--mem-fraction-static 0.{i}); fi")
    lines.append('exec python3 -m sglang.launch_server --model-path /m "${B[@]}" "${X[@]}"\n')
    start = time.monotonic()
    res = run_cli(
        "preflight", "--script", str(_script(tmp_path, "\n".join(lines))), "--format", "json", timeout=120
    )
    assert res.returncode == 69, res.stderr[-2000:]
    assert "more than the 10000 read apart" in res.stdout
    assert time.monotonic() - start < 30


def test_the_trees_of_evald_texts_one_reading_keeps_are_bounded(tmp_path: Path, monkeypatch: Any) -> None:
    """red team 20: each text sourced or eval'd is parsed once per reading (F9), and its tree was kept
    whatever its size: 900 evals of a 280 KB text that differs each time (``eval "$S $i"``) kept 5.8 GB.
    What is kept is bounded by its text (2 MiB)."""
    from validator.sources.launch.script import read_exec
    from validator.sources.launch.shell import reader, state

    memos: list[state.Memo] = []

    class Kept(state.Memo):
        def __init__(self) -> None:
            super().__init__()
            memos.append(self)

    monkeypatch.setattr(reader, "Memo", Kept)
    body = 'S=": AAAAAAAAAAAAAAAA"\n' + 'S="$S $S"\n' * 11 + 'for ((i=0;i<80;i++)); do eval "$S $i"; done\n'
    read_exec(_script(tmp_path, body + "exec python3 -m sglang.launch_server --model-path /m\n"), {})
    assert memos and all(sum(len(text) for text, _ in m.trees) <= 2 * 1024 * 1024 for m in memos)
