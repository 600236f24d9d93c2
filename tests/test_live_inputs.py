"""Every live input is stated once, as a field of ``LiveInputs``: each option of the real command line's
"live inputs" group (check, serve) reaches its field and no other, and each field with an option is on
the command line. A flag added to the parser but dropped on the way to the live job fails here."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from validator.cli import build_parser
from validator.cli_options import cli_options
from validator.errors import UsageError
from validator.live_inputs import LiveInputs, live_inputs_from


def _live_actions(parser: argparse.ArgumentParser, command: str) -> list[argparse.Action]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    (group,) = [g for g in sub.choices[command]._action_groups if g.title == "live inputs"]
    return list(group._group_actions)


def _values(tmp_path: Path) -> dict[str, tuple[list[str], dict[str, object]]]:
    """Per flag: what is given, and every field it must change (to what). A flag not named here is given
    a path (or nothing, for a switch) and must change its own field alone."""
    key = tmp_path / "key"
    key.write_text("k-123\n")
    return {
        "--url": (["http://127.0.0.1:1"], {"url": "http://127.0.0.1:1"}),
        "--api-key-file": ([str(key)], {"api_key": "k-123"}),
        "--attestation": ([str(tmp_path / "att")], {"attestation": tmp_path / "att"}),
        "--server-user": (["0"], {"server_uids": (0,), "server_uid": 0}),
        "--log": ([str(tmp_path / "log")], {"log": tmp_path / "log"}),
        "--wait": (["7"], {"wait_s": 7.0}),
        "--no-probe": ([], {"probe": False}),
        "--stall-after": (["5"], {"stall_after_s": 5.0}),
        "--retries": (["1"], {"retries": 1}),
        "--weights-checker": ([], {"weights_checker": True}),
    }


@pytest.mark.parametrize("command", ["check", "serve"])
def test_every_live_option_reaches_its_field(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_VALIDATE_API_KEY", raising=False)
    parser = build_parser(only=command)
    base = live_inputs_from(parser.parse_args([command]))
    values = _values(tmp_path)
    actions = _live_actions(parser, command)
    assert set(values) <= {a.option_strings[0] for a in actions}
    for action in actions:
        flag = action.option_strings[0]
        switch = action.nargs == 0
        given, expected = values.get(flag, ([] if switch else [str(tmp_path / "x")], {}))
        inputs = live_inputs_from(parser.parse_args([command, flag, *given]))
        changed = {
            f.name: getattr(inputs, f.name)
            for f in dataclasses.fields(inputs)
            if getattr(inputs, f.name) != getattr(base, f.name)
        }
        if flag in values:
            assert changed == expected, flag
        else:
            assert list(changed) == [action.dest], flag
            assert switch or str(changed[action.dest]) == str(tmp_path / "x"), flag


def test_every_option_field_is_on_the_command_line() -> None:
    for command in ("check", "serve"):
        flags = [a.option_strings[0] for a in _live_actions(build_parser(only=command), command)]
        assert flags == [opt.flag for _, opt in cli_options(LiveInputs)]  # in field order: the --help order


def test_a_bad_value_is_refused_by_its_field() -> None:
    parser = build_parser(only="check")
    with pytest.raises(UsageError, match="--stall-after must be a positive number of seconds"):
        live_inputs_from(parser.parse_args(["check", "--stall-after", "0"]))
    with pytest.raises(UsageError, match="several are for /proc"):
        live_inputs_from(parser.parse_args(["check", "--url", "http://h:1", "--server-user", "0,1"]))


def test_a_bad_option_is_reported_before_the_key_file_is_read(tmp_path: Path) -> None:
    """As before the options were fields: a usage error (exit 2) wins over an unreadable key file."""
    parser = build_parser(only="check")
    missing = str(tmp_path / "no-such-key")
    for argv in (
        ["--stall-after", "0"],
        ["--url", "http://h:1", "--server-user", "0,1"],
    ):
        with pytest.raises(UsageError):
            live_inputs_from(parser.parse_args(["check", "--api-key-file", missing, *argv]))


def test_live_inputs_are_not_changed_after_construction() -> None:
    inputs = LiveInputs(url="http://127.0.0.1:1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.selection = None  # type: ignore[misc]
    assert dataclasses.replace(inputs, wait_s=3.0).wait_s == 3.0
