"""systemd EnvironmentFile reader: systemd's quoting rules, strict where systemd is silent."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from validator.errors import InputError
from validator.sources.launch.env_file import parse_env_text, read_env_file


def test_systemd_syntax(tmp_path: Path) -> None:
    f = tmp_path / "sglang.env"
    f.write_text(
        "# comment\n; also a comment\n\n"
        "SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        "  SPACED  =  two words  \n"
        "SINGLE='it''s $HOME \\n'\n"
        'DOUBLE="a \\" b \\\\ c \\$d \\n e"\n'
        "CONT=first\\\nsecond\n"
        "EMPTY=\n"
        'MULTI="line1\nline2"\n'
        "HASH=x # stays\n"
        "SGLANG_ENABLE_FP8_LM_HEAD=0\n"
    )
    env = read_env_file(f)
    assert env == {
        "SGLANG_ENABLE_FP8_LM_HEAD": "0",  # later assignment wins
        "SPACED": "two words",
        "SINGLE": "its $HOME \\n",
        "DOUBLE": 'a " b \\ c $d \\n e',
        "CONT": "firstsecond",
        "EMPTY": "",
        "MULTI": "line1\nline2",
        "HASH": "x # stays",
    }


def test_last_line_without_newline_and_crlf() -> None:
    assert parse_env_text("A=1\r\nB=2", where="f") == {"A": "1", "B": "2"}


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("A=1\nexport B=2\n", 2, "export"),
        ("A=1\n\nB\n", 3, "no '='"),
        ("A='open\nB=2\n", 1, "unterminated quote"),
        ("9X=1\n", 1, "invalid variable name"),
        ("A=\x07\n", 1, "control character"),
        ("A=1\nB=\x00\n", 2, "NUL"),
    ],
)
def test_malformed_lines_are_input_errors(text: str, line: int, words: str) -> None:
    with pytest.raises(InputError) as info:
        parse_env_text(text, where="/etc/sglang.env")
    assert info.value.where == "/etc/sglang.env" and info.value.line == line
    assert words in info.value.reason


def test_invalid_utf8_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.env"
    f.write_bytes(b"A=1\nB=\xff\n")
    with pytest.raises(InputError) as info:
        read_env_file(f)
    assert info.value.line == 2 and str(f) in str(info.value)
    with pytest.raises(InputError, match="cannot read"):
        read_env_file(tmp_path / "absent.env")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_ever_raise_input_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    f = tmp_path_factory.mktemp("envfuzz") / "x.env"
    f.write_bytes(data)
    try:
        env = read_env_file(f)
    except InputError as exc:
        assert str(f) in str(exc)
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("AB_=1 '\"\\#;\n\t$x"), max_size=80))
def test_random_syntax_soup_only_ever_raises_input_error(text: str) -> None:
    try:
        env = parse_env_text(text, where="f")
    except InputError:
        return
    for name in env:
        assert name and not name[0].isdigit()
