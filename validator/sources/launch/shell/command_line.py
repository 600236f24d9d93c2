"""One command line (``--launch-cmd``, a unit's ``ExecStart``) split into words as a POSIX shell would.

Why not ``shlex``: it cannot tell a quoted ``~`` from a bare one, and the words the server gets depend on
it (``~`` is expanded only where it starts a word, or follows ``=``/``:`` in an assignment). Launcher
scripts, which are whole programs, are read by the rest of this package (``reader``) instead.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

from validator.errors import InputError

BINPRM_BUF_SIZE = 256  # the bytes of a file Linux reads to find its #! line (include/uapi/linux/binfmts.h)


def shebang_line(head: bytes) -> str | None:
    """The ``#!`` line of a file starting with ``head``, after ``#!``, as Linux reads it to exec the file
    (fs/binfmt_script.c): within its first 256 bytes; a line with no newline there is cut at byte 255, so
    what a longer line says past it (``#!/bin/bash<300 blanks>-f``) is never handed to the interpreter.
    None where there is no ``#!``."""
    if not head.startswith(b"#!"):
        return None
    buf = head[:BINPRM_BUF_SIZE]
    end = buf.find(b"\n")
    return (buf[2:end] if end >= 0 else buf[2 : BINPRM_BUF_SIZE - 1]).decode("utf-8", "replace")


def home_of(user: str, env: Mapping[str, str]) -> str | None:
    """``~`` (``user`` empty: $HOME, else the password database) or ``~user``."""
    if not user:
        home = env.get("HOME")
        if home:
            return home
        try:
            return pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            return None
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return None


def expand_tilde(text: str, env: Mapping[str, str], *, assignment: bool = False) -> str:
    """Tilde expansion of an unquoted word start (POSIX 2.6.1); in an assignment value also after each ``:``.
    An unknown ``~user`` stays as written, as in bash."""
    pieces = text.split(":") if assignment else [text]
    out = []
    for piece in pieces:
        if piece.startswith("~"):
            user, slash, rest = piece[1:].partition("/")
            home = home_of(user, env) if "\\" not in user else None
            if home is not None:
                piece = home.rstrip("/") + slash + rest if (slash or rest) else home
        out.append(piece)
    return ":".join(out)


def split_command_line(text: str, where: str, env: Mapping[str, str], *, comments: bool = False) -> list[str]:
    """A one-line command (``--launch-cmd``) split as a POSIX shell would: quoting, backslashes, ``#``
    comments (``comments=True``) and ``~`` (``HOME``; ``~user``: that user's home) apply; parameter
    expansions are kept as written (no script around the string sets variables)."""
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and (text[i] in " \t\n" or _continuation(text, i)):
            i += _continuation(text, i) or 1
        if i >= n:
            break
        if comments and text[i] == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        buf: list[str] = []
        bare_start = i  # where the word's unquoted leading text begins (for ~)
        tilde_ok = text[i] == "~"
        while i < n and text[i] not in " \t\n":
            c = text[i]
            if c == "\\":
                if skip := _continuation(text, i):
                    i += skip
                    continue
                if i + 1 >= n:
                    raise InputError(where, "cannot split the command: No escaped character")
                buf.append(text[i + 1])
                i += 2
                continue
            if c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise InputError(where, "cannot split the command: No closing quotation")
                buf.append(text[i + 1 : end])
                i = end + 1
                continue
            if c == '"':
                j = i + 1
                chunk: list[str] = []
                while j < n and text[j] != '"':
                    if skip := _continuation(text, j):
                        j += skip
                        continue
                    if text[j] == "\\" and j + 1 < n and text[j + 1] in '$`"\\':
                        chunk.append(text[j + 1])
                        j += 2
                        continue
                    chunk.append(text[j])
                    j += 1
                if j >= n:
                    raise InputError(where, "cannot split the command: No closing quotation")
                buf.append("".join(chunk))
                i = j + 1
                continue
            buf.append(c)
            i += 1
        word = "".join(buf)
        raw = text[bare_start:i]
        if tilde_ok:
            prefix = raw.split("/", 1)[0]
            if not any(q in prefix for q in "'\"\\"):
                word = expand_tilde(word, env)
        elif "~" in raw and _assignment_tilde(raw):
            name, _, value = word.partition("=")
            word = f"{name}={expand_tilde(value, env, assignment=True)}"
        words.append(word)
    return words


def _continuation(text: str, i: int) -> int:
    """The length of a line continuation (an unescaped backslash, then a newline or CRLF) at ``i``, else 0:
    removed outside single quotes; a backslash that is itself escaped (``\\\\`` at a line's end) is none."""
    if text.startswith("\\\n", i):
        return 2
    return 3 if text.startswith("\\\r\n", i) else 0


def _assignment_tilde(raw: str) -> bool:
    """``NAME=~/x`` (or ``NAME=a:~/x``) written bare: bash gives such words tilde expansion after the
    ``=`` and each ``:``, as for an assignment, also as a command argument (``env VAR=~/x cmd``)."""
    name, _, value = raw.partition("=")
    bare = not any(q in raw for q in "'\"\\")
    return name.isidentifier() and bare and (value.startswith("~") or ":~" in value)
