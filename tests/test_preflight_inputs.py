"""Every preflight input is stated once, as a field of ``PreflightInputs``: each option the real command line
offers (preflight, launch, check) reaches its field, and each field with an option is on the command line.
A flag added to the parser but dropped on the way to preflight, or a field no flag fills, fails here."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

from validator.cli import build_parser
from validator.preflight_inputs import PreflightInputs, inputs_from, options

_DEFAULT = PreflightInputs()


def _group_actions(parser: argparse.ArgumentParser, command: str) -> list[argparse.Action]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command_parser = sub.choices[command]
    (group,) = [g for g in command_parser._action_groups if g.title == "preflight inputs"]
    return list(group._group_actions)


@pytest.mark.parametrize("command", ["preflight", "launch", "check"])
def test_every_option_reaches_its_field(command: str, tmp_path: Path) -> None:
    parser = build_parser(only=command)
    actions = _group_actions(parser, command)
    assert actions
    for action in actions:
        flag = action.option_strings[0]
        value = str(tmp_path / "x")
        argv = [command, flag, value, flag, value] if action.default == [] else [command, flag, value]
        if command == "launch":
            argv += ["--", "python", "-m", "sglang.launch_server"]
        args = parser.parse_args(argv)
        inputs = inputs_from(args)
        changed = [f.name for f in fields(inputs) if getattr(inputs, f.name) != getattr(_DEFAULT, f.name)]
        assert changed == [action.dest], (flag, changed)
        got = getattr(inputs, action.dest)
        assert str(got[-1] if isinstance(got, list) else got) == value, flag


def test_every_option_field_is_on_the_command_line() -> None:
    parser = build_parser(only="preflight")
    flags = {a.option_strings[0] for a in _group_actions(parser, "preflight")}
    assert flags == {opt.flag for _, opt in options()}
    launch = {a.option_strings[0] for a in _group_actions(build_parser(only="launch"), "launch")}
    assert launch == {opt.flag for _, opt in options("env", "host")}  # its command is its own argv
