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


def _without_continuations(text: str, comments: bool) -> str:
    """``text`` with its line continuations removed as a shell does: an unescaped backslash and a newline,
    outside single quotes and comments (``\\\\`` then a newline is an escaped backslash and a newline)."""
    out, i, quote = [], 0, ""
    while i < len(text):
        c = text[i]
        if comments and c == "#" and not quote and (not out or out[-1][-1] in " \t\n"):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            out.append(text[i:end])
            i = end
            continue
        if c == "\\" and quote != "'" and text[i + 1 : i + 2] == "\n":
            i += 2
            continue
        if c == "\\" and quote != "'":
            out.append(text[i : i + 2])
            i += 2
            continue
        if c in "'\"" and quote in ("", c):
            quote = "" if quote else c
        out.append(c)
        i += 1
    return "".join(out)


def test_an_escaped_backslash_at_a_line_end_is_no_continuation() -> None:
    """``\\\\`` then a newline is an escaped backslash, then a separator (bash gives one word ``\\``): the
    splitter took the pair for a continuation and lost the backslash ([''] for ``\\\\\\n\\n``)."""
    assert split_command_line("\\\\\n\n", "w", {}) == ["\\"]
    assert split_command_line("a \\\n b", "w", {}) == ["a", "b"]
    assert split_command_line("'a\\\nb'", "w", {}) == ["a\\\nb"]  # single quotes keep both


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab -=/:'\"\\\n#x", max_size=40))
def test_split_without_tilde_is_shlex(text: str) -> None:
    """Where no `~` occurs, the words are exactly what `shlex.split` gives once line continuations are
    removed as a shell removes them (comments too, except a `#` inside a word, which shlex takes for a
    comment and a shell does not)."""
    for comments in (False, True):
        joined = _without_continuations(text, comments)
        if comments and re.search(r"(\S|\\\s)#", joined):
            continue
        try:
            expected: list[str] | None = shlex.split(joined, comments=comments)
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
