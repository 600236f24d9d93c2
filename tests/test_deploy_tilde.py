"""`~` in a launch command: expanded as the operator's shell does in `--launch-cmd`, `--launch-args-file`
and `--script` (the published guide writes `--model-path ~/models/...`); not in unit files, where systemd
leaves it alone and preflight says so."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.in_process import preflight_json_in_process
from validator.errors import InputError
from validator.sources.launch.shell.command_line import split_command_line

LINES = [
    "python3 -m sglang.launch_server --model-path ~/models/Ling-3.0-flash-fp4",
    "a ~ ~/x \"~/y\" x~ ~root/z \\~/e '~'/f",
    "env HUMMING_CACHE_DIR=~/.humming/cache A=a:~/b --model-path=~/m",
    "~nosuchuser/x ~/ ~",
]


@pytest.mark.parametrize("line", LINES)
def test_split_matches_bash(line: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {line}"],
        capture_output=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=10,
        check=True,
    )
    bash_words = proc.stdout.decode().split("\0")[:-1]
    assert split_command_line(line, "--launch-cmd", {"HOME": str(tmp_path)}) == bash_words


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab -=/:'\"\\\n#x", max_size=40))
def test_split_without_tilde_is_shlex(text: str) -> None:
    """Where no `~` occurs, the words are exactly what the previous `shlex.split` gave (comments too, except
    a `#` inside a word, which shlex takes for a comment and a shell does not)."""
    for comments in (False, True):
        if comments and re.search(r"(\S|\\\s)#", text.replace("\\\n", "")):
            continue
        try:
            expected: list[str] | None = shlex.split(text.replace("\\\n", ""), comments=comments)
        except ValueError:
            expected = None
        try:
            got: list[str] | None = split_command_line(text, "w", {"HOME": "/h"}, comments=comments)
        except InputError:
            got = None
        assert got == expected, (text, comments)


def _preflight(env: dict[str, str], *args: str) -> dict[str, Any]:
    _, report, err = preflight_json_in_process(env, *args)
    assert report, err
    return report


def _checkpoint(report: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == "checkpoint.layout")


CMD = "python3 -m sglang.launch_server --model-path ~/models/Ling --moe-runner-backend humming"


def test_launch_cmd_and_args_file_read_the_checkpoint_under_home(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "models" / "Ling", small=False)
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    check = _checkpoint(_preflight(env, "--launch-cmd", CMD))
    assert check["status"] == "pass", check
    args = tmp_path / "args"
    args.write_text("--model-path ~/models/Ling  # the guide's path\n--moe-runner-backend humming\n")
    assert _checkpoint(_preflight(env, "--launch-args-file", str(args)))["status"] == "pass"
    script = tmp_path / "start.sh"
    script.write_text(f"#!/bin/sh\nexec {CMD}\n")
    assert _checkpoint(_preflight(env, "--script", str(script)))["status"] == "pass"


def test_unit_file_tilde_is_not_expanded_and_says_so(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "models" / "Ling", small=False)
    unit = tmp_path / "sglang.service"
    unit.write_text(f"[Service]\nExecStart=/usr/bin/{CMD}\n")
    check = _checkpoint(_preflight({"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, "--unit", str(unit)))
    assert check["status"] == "error"
    assert "systemd does not expand '~'" in check["message"] and "absolute path" in check["message"]
