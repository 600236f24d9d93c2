"""The builtins and programs whose output the reader computes, for ``$(...)`` to capture: ``echo``,
``printf`` (also ``printf -v``, which assigns instead), ``pwd``, and the programs ``dirname``,
``basename`` and ``uname`` (``PROGRAMS``: looked up when no function or builtin has the
name). Output that depends on the run (``echo -e``, an unknown argument) is captured as ``Unknown``.
"""

from __future__ import annotations

import os
import re

from tree_sitter import Node

from validator.sources.launch.shell.api import Builtin, Shell
from validator.sources.launch.shell.machine import Prefix, known_words
from validator.sources.launch.shell.syntax import line_of
from validator.sources.launch.shell.values import Field, Unknown, Unmodelled, Value, join, join_with


def b_echo(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    values = [join(f) for f in args]
    if ev.m.posix and any(isinstance(v, Unknown) or "\\" in v or v.startswith("-") for v in values):
        ev.m.output_unknown("dash's echo (it reads backslashes and options otherwise)")
        return ev.m.errexit(0, node, "echo")
    newline = True
    while values and isinstance(values[0], str) and re.fullmatch(r"-[neE]+", values[0]):
        if "e" in values[0]:
            ev.m.output_unknown("echo -e")
            return ev.m.errexit(0, node, "echo")
        newline = newline and "n" not in values[0]
        values = values[1:]
    ev.m.emit(join([join_with(values, " "), "\n" if newline else ""]))
    return ev.m.errexit(0, node, "echo")


def _printf_format(fmt: str, values: list[Value], node: Node) -> Value:
    """``printf FORMAT ARGS``: ``%s``, ``%d`` on integers, ``%%``, ``\\n``/``\\t`` escapes; the format
    is reused while arguments remain, as bash does."""
    out: list[Value] = []
    k = 0
    first = True
    while first or k < len(values):
        first = False
        used = 0
        i = 0
        while i < len(fmt):
            c = fmt[i]
            if c == "\\" and i + 1 < len(fmt):
                esc = {"n": "\n", "t": "\t", "\\": "\\", "r": "\r"}.get(fmt[i + 1])
                if esc is None:
                    raise Unmodelled(f"printf escape \\{fmt[i + 1]}", line_of(node))
                out.append(esc)
                i += 2
                continue
            if c == "%":
                spec = fmt[i + 1 : i + 2]
                if spec == "%":
                    out.append("%")
                elif spec in ("s", "d"):
                    v = values[k] if k < len(values) else ""
                    k += 1
                    used += 1
                    if spec == "d" and isinstance(v, str):
                        if not re.fullmatch(r"[-+]?[0-9]{1,18}", v.strip() or "0"):
                            raise Unmodelled(f"printf %d of {v!r}", line_of(node))
                        v = str(int(v.strip() or "0"))
                    out.append(v)
                else:
                    raise Unmodelled(f"printf conversion %{spec}", line_of(node))
                i += 2
                continue
            out.append(c)
            i += 1
        if used == 0:
            break
    return join(out)


def b_printf(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    values = [join(f) for f in args]
    target: str | None = None
    if ev.m.posix and values and values[0] == "-v":
        raise Unmodelled("printf -v in a /bin/sh script", line_of(node))
    if len(values) >= 2 and values[0] == "-v":
        name = values[1]
        if isinstance(name, Unknown):
            raise Unmodelled(f"printf -v into a name known only at run time: {name.reason}", line_of(node))
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\[.+\])?", name):
            return ev.m.errexit(2, node, "printf -v")
        target = name
        values = values[2:]
    if values and values[0] == "--":
        values = values[1:]
    if not values:
        return ev.m.errexit(2, node, "printf")
    fmt = values[0]
    if isinstance(fmt, Unknown):
        result: Value = Unknown(f"printf with a format known only at run time: {fmt.reason}")
    else:
        result = _printf_format(fmt, values[1:], node)
    if target is None:
        ev.m.emit(result)
        return ev.m.errexit(0, node, "printf")
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(.+)\])?", target)
    assert m is not None
    if m.group(2) is not None:
        raise Unmodelled(f"printf -v into an array element {target!r}", line_of(node))
    ev.vars.assign(m.group(1), result, node)
    return ev.m.errexit(0, node, "printf")


def b_pwd(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = known_words(args, node, "pwd")
    if words and words != ["-L"]:
        raise Unmodelled(f"pwd {' '.join(words)}", line_of(node))
    ev.m.uses_cwd(".")
    ev.m.emit(join([ev.m.st.cwd, "\n"]))
    return ev.m.errexit(0, node, "pwd")


def pure_program(name: str) -> Builtin:
    """Programs whose output the reader computes (``dirname``, ``basename``, ``uname``); their
    arguments must be known."""

    def run(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
        words = [join(f) for f in args]
        if any(isinstance(w, Unknown) for w in words):
            ev.m.output_unknown(name)
            return ev.m.errexit(None, node, name)
        sw = [str(w) for w in words]
        if name == "dirname" and len(sw) == 1 and not sw[0].startswith("-"):
            ev.m.emit(_dirname(sw[0]) + "\n")
            return ev.m.errexit(0, node, name)
        if name == "basename" and len(sw) == 1 and not sw[0].startswith("-"):
            b = sw[0].rstrip("/")
            ev.m.emit((os.path.basename(b) if b else ("/" if sw[0] else "")) + "\n")
            return ev.m.errexit(0, node, name)
        if name == "uname" and (not sw or sw == ["-s"]):
            ev.m.emit(os.uname().sysname + "\n")
            return ev.m.errexit(0, node, name)
        ev.m.output_unknown(name)
        return ev.m.errexit(None, node, name)

    return run


def _dirname(p: str) -> str:
    """coreutils ``dirname``."""
    if not p:
        return "."
    s = p.rstrip("/")
    if not s:
        return "/"
    if "/" not in s:
        return "."
    d = s[: s.rfind("/")].rstrip("/")
    return d or "/"


PROGRAMS: dict[str, Builtin] = {
    "dirname": pure_program("dirname"),
    "basename": pure_program("basename"),
    "uname": pure_program("uname"),
}
