"""systemd's unit-file syntax, pure functions over text: ``systemd.syntax(7)`` (continuations, comments,
sections, assignments) and ``systemd.service(5)``'s command lines (word splitting with quotes and C escapes,
``extract_first_word``; specifiers; ``$VAR``/``${VAR}``, ``replace_env_argv``). What systemd warns about and
skips raises ``InputError(path, reason, line)``.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from validator.errors import InputError

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
WHITESPACE = " \t\n\r"  # systemd's WHITESPACE
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


@dataclass
class Assignment:
    """One ``Key=value`` line: its value (stripped), the line it starts on, and the file it is in."""

    value: str
    line: int
    file: str


def _cunescape(text: str, i: int, where: str, line: int) -> tuple[str, int]:
    """Decode the escape starting after the backslash at ``text[i]``; returns (char, next index)."""
    if i >= len(text):
        raise InputError(where, "trailing backslash", line)
    c = text[i]
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], i + 1
    digits = {"x": (2, 16), "u": (4, 16), "U": (8, 16)}
    if c in digits:
        n, base = digits[c]
        chunk = text[i + 1 : i + 1 + n]
        if len(chunk) != n or not all(ch in "0123456789abcdefABCDEF" for ch in chunk):
            raise InputError(where, f"invalid escape \\{c}{chunk}", line)
        code = int(chunk, base)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise InputError(where, f"invalid escape \\{c}{chunk}", line)
        return chr(code), i + 1 + n
    if c in "01234567":
        chunk = text[i : i + 3]
        if len(chunk) != 3 or not all(ch in "01234567" for ch in chunk) or int(chunk, 8) == 0:
            raise InputError(where, f"invalid escape \\{chunk}", line)
        return chr(int(chunk, 8)), i + 3
    raise InputError(where, f"invalid escape \\{c}", line)


def split_words(text: str, *, where: str, line: int) -> list[str]:
    """systemd's ``extract_first_word(UNQUOTE|CUNESCAPE)`` over a whole value (a quoted ``"$FOO"`` is
    still expanded by systemd, in ``expand_env``)."""
    words: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in WHITESPACE:
            i += 1
        if i >= n:
            return words
        buf: list[str] = []
        quote: str | None = None
        while i < n:
            c = text[i]
            if quote is None and c in WHITESPACE:
                break
            if c == "\\":
                ch, i = _cunescape(text, i + 1, where, line)
                buf.append(ch)
                continue
            if quote is None and c in "'\"":
                quote = c
            elif quote is not None and c == quote:
                quote = None
            else:
                buf.append(c)
            i += 1
        if quote is not None:
            raise InputError(where, "unbalanced quoting", line)
        words.append("".join(buf))


def user_unit(unit: Path) -> bool:
    """Whether ``unit`` is one a user's service manager loads (``~/.config/systemd/user``,
    ``/etc/systemd/user``, ...: systemd.unit(5)'s user unit search path), not the system manager."""
    return any(pair == ("systemd", "user") for pair in pairwise(unit.parts))


def specifiers(text: str, unit: Path, env: dict[str, str], where: str, line: int) -> str:
    """Resolve the unit specifiers preflight can know; an unknown one is an error (systemd fails too).
    ``%h`` and ``%u`` are the service manager's user (systemd.unit(5): not influenced by ``User=``): root
    for a system unit, whatever this process's environment says; this user for a user unit."""
    name = unit.name
    mine = user_unit(unit)
    stem = name.rsplit(".", 1)[0]
    prefix, _, instance = stem.partition("@")
    known = {
        "%": "%",
        "n": name,
        "N": stem,
        "p": prefix,
        "P": prefix,
        "i": instance,
        "I": instance,
        "j": prefix.rsplit("-", 1)[-1],
        "J": prefix.rsplit("-", 1)[-1],
        "f": "/" + (instance or prefix).replace("-", "/"),
        "h": env.get("HOME", "/root") if mine else "/root",
        "u": env.get("USER", "root") if mine else "root",
        "t": "/run",
        "T": "/tmp",
        "V": "/var/tmp",
        "H": socket.gethostname(),
        "l": socket.gethostname().split(".")[0],
    }
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            raise InputError(where, "'%' at the end of a value (write '%%')", line)
        spec = text[i + 1]
        if spec not in known:
            raise InputError(where, f"unsupported specifier %{spec}", line)
        out.append(known[spec])
        i += 2
    return "".join(out)


def expand_env(words: list[str], env: dict[str, str], where: str, line: int) -> list[str]:
    """systemd's ``replace_env_argv``: whole-word ``$VAR`` splits, ``${VAR}`` stays one word, ``$$`` is $."""
    out: list[str] = []
    for word in words:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m:
            value = env.get(m.group(1), "")
            out.extend(split_words(value, where=where, line=line))
            continue
        out.append(_replace_braced(word, env))
    return out


def expanded_names(words: list[str]) -> set[str]:
    """The variables :func:`expand_env` puts into ``words``: a whole-word ``$VAR``, each ``${VAR}``."""
    names: set[str] = set()
    for word in words:
        if m := re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word):
            names.add(m.group(1))
            continue
        i = 0
        while i < len(word):
            if word.startswith("$$", i):
                i += 2
            elif word.startswith("${", i) and (end := word.find("}", i + 2)) != -1:
                if ENV_NAME.match(name := word[i + 2 : end]):
                    names.add(name)
                i = end + 1
            else:
                i += 1
    return names


def _replace_braced(word: str, env: dict[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(word):
        if word.startswith("$$", i):
            out.append("$")
            i += 2
        elif word.startswith("${", i) and (end := word.find("}", i + 2)) != -1:
            name = word[i + 2 : end]
            if ENV_NAME.match(name):
                out.append(env.get(name, ""))
            else:
                out.append(word[i : end + 1])
            i = end + 1
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash continuations; comment lines inside a continuation are dropped, as systemd does."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if pending and stripped[:1] in ("#", ";"):
            continue
        if not pending:
            start = number
        if raw.rstrip().endswith("\\") and stripped[:1] not in ("#", ";"):
            pending.append(raw.rstrip()[:-1] + " ")
            continue
        pending.append(raw)
        out.append((start, "".join(pending)))
        pending = []
    if pending:
        out.append((start, "".join(pending)))
    return out


def parse_unit_text(text: str, where: str) -> dict[str, dict[str, list[Assignment]]]:
    sections: dict[str, dict[str, list[Assignment]]] = {}
    current: str | None = None
    for line, content in _logical_lines(text):
        s = content.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            if not s.endswith("]") or len(s) < 3 or any(ch in s[1:-1] for ch in "[]"):
                raise InputError(where, f"invalid section header {s!r}", line)
            current = s[1:-1]
            sections.setdefault(current, {})
            continue
        if current is None:
            raise InputError(where, "assignment outside of any section", line)
        if "=" not in s:
            raise InputError(where, "missing '=' (the line is not shown: it may hold a secret)", line)
        key, _, value = s.partition("=")
        key = key.strip()
        if not key or any(ch in key for ch in WHITESPACE):
            raise InputError(where, f"invalid key {key!r}", line)
        sections[current].setdefault(key, []).append(Assignment(value.strip(), line, where))
    return sections
