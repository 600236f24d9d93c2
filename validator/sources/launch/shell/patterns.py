"""Bash patterns (``case``, ``[[ == ]]``, ``${v#p}``, ``${v/p/r}``) as Python regular expressions, and the
pattern operators of parameter expansion (shortest/longest prefix and suffix removal, substitution with
bash 5.2's ``patsub_replacement``).

Pure functions of text: kept apart from the expansion that feeds them, and tested through it.
"""

from __future__ import annotations

import re

from validator.sources.launch.shell.values import Unknown, Unmodelled, Value

_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v",
    "xdigit": "0-9A-Fa-f",
    "blank": " \\t",
}


def glob_regex(pieces: list[tuple[Value, bool]], line: int, posix: bool) -> re.Pattern[str] | Unknown:
    """A bash pattern (``case``, ``[[ == ]]``, ``${v#p}``) as a regex: unquoted ``*`` ``?`` ``[...]`` are
    special, quoted text is literal. Extended globs and collating classes are not modelled, nor ``[^...]``
    in a ``/bin/sh`` script (bash negates it, dash does not)."""
    out: list[str] = []
    for value, quoted in pieces:
        if isinstance(value, Unknown):
            return value
        if quoted:
            out.append(re.escape(value))
            continue
        i = 0
        while i < len(value):
            c = value[i]
            if c == "\\":
                out.append(re.escape(value[i + 1 : i + 2] or "\\"))
                i += 2
                continue
            if c in "@!+*?" and value[i + 1 : i + 2] == "(":
                raise Unmodelled(f"extended pattern {value!r}", line)
            if c == "*":
                out.append(".*")
            elif c == "?":
                out.append(".")
            elif c == "[":
                end, cls = _bracket(value, i, line, posix)
                if cls is None:
                    out.append(re.escape("["))
                else:
                    out.append(cls)
                    i = end
            else:
                out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _bracket(v: str, start: int, line: int, posix: bool) -> tuple[int, str | None]:
    """``[...]`` at ``start``: (index of its ``]``, regex class), or (start, None) when it is literal."""
    i = start + 1
    if posix and v[i : i + 1] == "^":
        raise Unmodelled(f"[^...] in {v!r} in a /bin/sh script (bash negates it, dash does not)", line)
    neg = i < len(v) and v[i] in "!^"
    if neg:
        i += 1
    items: list[str] = []
    first = True
    while i < len(v):
        c = v[i]
        if c == "]" and not first:
            return i, f"[{'^' if neg else ''}{''.join(items)}]"
        first = False
        if c == "[" and v[i + 1 : i + 2] in (":", "=", "."):
            close = v.find(v[i + 1] + "]", i + 2)
            if close < 0:
                items.append(re.escape(c))
                i += 1
                continue
            name = v[i + 2 : close]
            if v[i + 1] != ":" or name not in _CLASSES:
                raise Unmodelled(f"bracket expression [{v[i + 1]}{name}{v[i + 1]}]", line)
            items.append(_CLASSES[name])
            i = close + 2
            continue
        if c == "\\" and i + 1 < len(v):
            items.append(re.escape(v[i + 1]))
            i += 2
            continue
        if i + 2 < len(v) and v[i + 1] == "-" and v[i + 2] != "]":
            lo, hi = c, v[i + 2]
            if hi == "\\" and i + 3 < len(v):
                hi = v[i + 3]
                i += 1
            if ord(lo) > ord(hi):
                raise Unmodelled(f"bracket range {lo}-{hi}", line)
            items.append(f"{re.escape(lo)}-{re.escape(hi)}")
            i += 3
            continue
        items.append(re.escape(c))
        i += 1
    return start, None


def strip_pattern(value: str, rx: re.Pattern[str], op: str) -> str:
    """``${v#p}`` ``${v##p}`` (shortest / longest prefix) and ``${v%p}`` ``${v%%p}`` (suffix)."""
    n = len(value)
    if op in ("#", "##"):
        for k in range(0, n + 1) if op == "#" else range(n, -1, -1):
            if rx.fullmatch(value[:k]):
                return value[k:]
        return value
    for k in range(n, -1, -1) if op == "%" else range(0, n + 1):
        if rx.fullmatch(value[k:]):
            return value[:k]
    return value


def substitute_pattern(value: str, rx: re.Pattern[str], rep: list[tuple[str, bool]], op: str) -> str:
    """``${v/p/r}`` (first, longest), ``//`` (all), ``/#`` (anchored at the start), ``/%`` (at the end).
    In the replacement an unquoted ``&`` is the matched text (bash 5.2's ``patsub_replacement``)."""

    def render(match: str) -> str:
        out: list[str] = []
        for t, quoted in rep:
            if quoted:
                out.append(t)
                continue
            i = 0
            while i < len(t):
                if t[i] == "\\" and i + 1 < len(t):
                    out.append(t[i + 1])
                    i += 2
                    continue
                out.append(match if t[i] == "&" else t[i])
                i += 1
        return "".join(out)

    n = len(value)
    if op == "/#":
        for k in range(n, -1, -1):
            if rx.fullmatch(value[:k]):
                return render(value[:k]) + value[k:]
        return value
    if op == "/%":
        for k in range(0, n + 1):
            if rx.fullmatch(value[k:]):
                return value[:k] + render(value[k:])
        return value
    out: list[str] = []
    i = 0
    while i <= n:
        for end in range(n, i - 1, -1):
            if rx.fullmatch(value[i:end]):
                if end == i:  # an empty match replaces nothing in bash
                    continue
                out.append(render(value[i:end]))
                if op == "/":
                    return "".join(out) + value[end:]
                i = end
                break
        else:
            if i < n:
                out.append(value[i])
            i += 1
    return "".join(out)
