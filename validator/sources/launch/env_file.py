"""systemd ``EnvironmentFile=`` reader, exactly as systemd parses it (``src/basic/env-file.c``): comments,
trimmed ``KEY=value``, single quotes literal, double quotes with their escapes, continuations, later wins;
no ``export``, no ``$VAR`` expansion.

Where systemd silently drops or misreads something (no ``=``, ``export FOO=1``, a bad name, an open quote
swallowing the rest, control characters, bad UTF-8) this raises ``InputError(path, reason, line)``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from validator.bounded_files import TEXT_CAP, read_trusted_bounded
from validator.errors import InputError
from validator.sources.launch.unit_syntax import ENV_NAME, WHITESPACE
from validator.trusted_files import UnsafeLocation, creatable_by_others

_NEWLINE = "\n\r"
_SHELL_NEED_ESCAPE = '"\\`$'
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# The line's text is not quoted: a line holding only a pasted token is exactly that.
_NO_EQUALS = "no '=' in this line (systemd ignores it; its text is not shown, it may be a secret)"


def parse_env_text(text: str, *, where: str) -> dict[str, str]:
    """Parse EnvironmentFile syntax; ``where`` names the source in errors."""
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError(where, "NUL byte (systemd would stop reading here)", line)
    out: dict[str, str] = {}
    state = "pre_key"
    key: list[str] = []
    value: list[str] = []
    key_trail: int | None = None  # index where trailing whitespace of the key starts
    value_trail: int | None = None
    line = 1
    start_line = 1  # line where the current assignment began
    quote_line = 1

    def push() -> None:
        name = "".join(key if key_trail is None else key[:key_trail])
        val = "".join(value if value_trail is None else value[:value_trail])
        if name.startswith("export ") or name.startswith("export\t"):
            raise InputError(
                where, f"'export' is not allowed: systemd drops the variable {name!r}", start_line
            )
        if not ENV_NAME.match(name):
            raise InputError(where, f"invalid variable name {name!r} (systemd ignores it)", start_line)
        if _CONTROL.search(val):
            raise InputError(where, f"control character in the value of {name}", start_line)
        out[name] = val

    for c in text:
        if c in _NEWLINE and state in ("pre_value", "value"):  # unquoted, unescaped: the assignment ends
            push()
            state = "pre_key"
        elif state == "pre_key":
            if c in "#;":
                state = "comment"
            elif c not in WHITESPACE:
                state, key, value, key_trail, value_trail, start_line = "key", [c], [], None, None, line
        elif state == "key":
            if c in _NEWLINE:
                raise InputError(where, _NO_EQUALS, start_line)
            if c == "=":
                state = "pre_value"
            else:
                key_trail = _append(key, key_trail, c)
        elif state == "pre_value":
            if c == "'":
                state, quote_line = "single", line
            elif c == '"':
                state, quote_line = "double", line
            elif c == "\\":
                state = "value_escape"
            elif c not in WHITESPACE:
                state = "value"
                value.append(c)
        elif state == "value":
            if c == "\\":
                state, value_trail = "value_escape", None
            else:
                value_trail = _append(value, value_trail, c)
        elif state == "value_escape":
            state = "value"
            if c not in _NEWLINE:
                value.append(c)
        elif state == "single":
            if c == "'":
                state = "pre_value"
            else:
                value.append(c)
        elif state == "double":
            if c == '"':
                state = "pre_value"
            elif c == "\\":
                state = "double_escape"
            else:
                value.append(c)
        elif state == "double_escape":
            state = "double"
            if c in _SHELL_NEED_ESCAPE:
                value.append(c)
            elif c != "\n":
                value.extend(("\\", c))
        elif state == "comment":
            if c == "\\":
                state = "comment_escape"
            elif c in _NEWLINE:
                state = "pre_key"
        elif state == "comment_escape":
            state = "pre_key" if c in _NEWLINE else "comment"
        if c == "\n":
            line += 1

    if state in ("single", "double", "double_escape"):
        raise InputError(where, "unterminated quote (systemd would take the rest of the file)", quote_line)
    if state == "key":
        raise InputError(where, _NO_EQUALS, start_line)
    if state in ("pre_value", "value", "value_escape"):
        push()
    return out


def _append(buf: list[str], trail: int | None, c: str) -> int | None:
    """Append ``c`` to an unquoted key or value; return where its trailing white space now starts (None
    when it ends in another character). systemd drops that white space when the key or the value ends
    (``env-file.c``: ``last_key_whitespace``, ``last_value_whitespace``); quoted text never sets it."""
    buf.append(c)
    if c not in WHITESPACE:
        return None
    return len(buf) - 1 if trail is None else trail


def others_could_create(where: Path | str, trusted: Collection[int]) -> str | None:
    """The problem nearest ``where`` that lets another user create a file there (None: nobody but root, the
    reading user and ``trusted`` can): an optional env file that is absent is read as none only then."""
    try:
        problems = creatable_by_others(where, trusted)
    except UnsafeLocation as exc:
        problems = [str(exc)]
    return problems[-1] if problems else None


def read_env_file(path: Path | str, *, trusted_uids: Collection[int] = ()) -> dict[str, str]:
    """Read one EnvironmentFile; unreadable, malformed or writable by someone other than root, the reading
    user and ``trusted_uids`` (the unit's ``User=``) -> InputError naming the file."""
    p = Path(path)
    # regular files only (never /dev/zero or a FIFO), through directories nobody else can write
    data = read_trusted_bounded(p, TEXT_CAP, "environment file", trusted_uids=trusted_uids, names=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(str(p), "invalid UTF-8 (systemd refuses the file)", line) from None
    return parse_env_text(text, where=str(p))
