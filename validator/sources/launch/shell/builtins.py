"""The builtins' table (``BUILTINS``; ``POSIX_BUILTINS``: what dash has too), looked up by ``commands``
after the script's functions, and the builtins that look a command up again (``exec``, ``command``,
``command -v``, ``builtin``) or change how names are looked up (``hash``, ``alias``, ``shopt``,
``enable``), each modelled exactly or ``Unmodelled``. A builtin is ``f(executor, argument fields, prefix
assignments, node) -> status`` (None: known only at run time); the rest are grouped by what they do:
``builtins_vars`` (variables, options, arguments), ``builtins_flow`` (control flow, ``eval``, ``source``,
``cd``, ``trap``), ``builtins_output`` (known output, and the programs whose output is computed).
"""

from __future__ import annotations

import os

from tree_sitter import Node

from validator.sources.launch.shell.api import Builtin, Shell
from validator.sources.launch.shell.builtins_flow import (
    b_bracket,
    b_cd,
    b_eval,
    b_exit,
    b_false,
    b_loop,
    b_return,
    b_source,
    b_test,
    b_trap,
)
from validator.sources.launch.shell.builtins_output import PROGRAMS, b_echo, b_printf, b_pwd
from validator.sources.launch.shell.builtins_vars import b_export, b_getopts, b_let, b_read, b_set, b_shift
from validator.sources.launch.shell.machine import Prefix
from validator.sources.launch.shell.programs import which
from validator.sources.launch.shell.state import RESERVED
from validator.sources.launch.shell.syntax import line_of
from validator.sources.launch.shell.values import Field, Unknown, Unmodelled, Value, join


def b_unmodelled(what: str) -> Builtin:
    def run(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
        raise Unmodelled(what, line_of(node))

    return run


def b_runtime(what: str, unmodelled: str = "") -> Builtin:
    """A builtin that assigns nothing and changes nothing the reader tracks, whose output and status
    are known only at run time (``compgen -G``: which files match); options in ``unmodelled`` (which run
    code or assign) are not modelled."""

    def run(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
        words = [join(f) for f in args]
        for k, w in enumerate(words):
            if isinstance(w, str) and w.startswith("-") and any(c in w[1:] for c in unmodelled):
                raise Unmodelled(f"{what} {w}", line_of(node))
            before = words[k - 1] if k else ""
            if isinstance(w, Unknown) and unmodelled and not (isinstance(before, str) and before in _VALUED):
                # only a value of -G or -W may be unknown: anywhere else it could be an option
                raise Unmodelled(f"{what} with an argument known only at run time", line_of(node))
        ev.m.output_unknown(what)
        return ev.m.errexit(None, node, what)

    return run


_VALUED = ("-G", "-W")  # compgen's options whose value is a pattern or a word list


def b_noop(what: str) -> Builtin:
    def run(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
        if what in _PRINTING and not _silent(what, [join(f) for f in args]):
            ev.m.output_unknown(what)  # umask's mask, times, dirs, alias's list...: the shell's, at run time
        return ev.m.errexit(0, node, what)

    return run


# no-ops that print (to a $( ) that captures it): what they print is the shell's state at run time
_PRINTING = ("umask", "times", "dirs", "help", "bind", "alias", "complete", "jobs")


def _silent(what: str, words: list[Value]) -> bool:
    """``umask 022`` and ``alias a=b`` print nothing; their other forms list (umask alone, -S, -p)."""
    if what == "umask":
        return bool(words) and all(isinstance(w, str) and w[:1] not in "-" for w in words)
    if what == "alias":
        return bool(words) and all(isinstance(w, str) and "=" in w and w[:1] != "-" for w in words)
    return False


def b_shopt(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    if (words and words[0] in ("-q", "-p")) or not words:
        return ev.m.errexit(None, node, "shopt")
    raise Unmodelled(f"shopt {' '.join(str(w) for w in words)}", line_of(node))


def b_hash(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    if words and words != ["-r"]:
        raise Unmodelled(f"hash {' '.join(str(w) for w in words)}", line_of(node))
    if not words:  # bash lists the table ("hash table empty"); dash prints nothing or the table
        ev.m.output_unknown("hash")
    return ev.m.errexit(0, node, "hash")


def b_exec(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = list(args)
    if words and join(words[0]) == "--":
        words = words[1:]
    first = join(words[0]) if words else ""
    if isinstance(first, Unknown) or first.startswith("-"):
        raise Unmodelled(
            f"exec {first if isinstance(first, str) else '...'}: an option of exec", line_of(node)
        )
    if not words:  # its redirections stay the shell's own (``Commands.redirected_body``)
        ev.m.bare_exec = node
        return ev.m.errexit(0, node, "exec")
    return ev.invoke(words, prefix, node, execs=True, skip_functions=True)


def b_command(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    if not args:
        return ev.m.errexit(0, node, "command")
    first = join(args[0])
    if first == "-v" and len(args) == 2:
        return _command_v(ev, join(args[1]), node)
    if isinstance(first, str) and first.startswith("-"):
        raise Unmodelled(f"command {first}", line_of(node))
    return ev.invoke(list(args), prefix, node, skip_functions=True)


def _command_v(ev: Shell, name: Value, node: Node) -> int | None:
    """``command -v NAME``: a function's or builtin's name, else the file found on PATH (status 1 when
    there is none)."""
    if isinstance(name, Unknown):
        ev.m.output_unknown("command -v")
        return ev.m.errexit(None, node, "command -v")
    if name in ev.m.st.funcs or name in BUILTINS or name in RESERVED:
        ev.m.emit(name + "\n")
        return ev.m.errexit(0, node, "command -v")
    path_now = ev.vars.scalar("PATH")
    for d in [name] if "/" in name else (path_now.split(":") if isinstance(path_now, str) else []):
        ev.m.uses_cwd(d or ".")
    found = which(name, ev.vars.scalar("PATH") or Unknown("PATH is unset"), ev.m.st.cwd)
    if isinstance(found, str) and not ev.m.changed(found):
        ev.m.emit(found + "\n")
        return ev.m.errexit(0, node, "command -v")
    path = ev.vars.scalar("PATH")
    if isinstance(found, Unknown) and isinstance(path, str) and not isinstance(ev.m.st.cwd, Unknown):
        dirs = [os.path.join(str(ev.m.st.cwd), d or ".") for d in path.split(":")]
        if ev.m.st.dirty is not None and not any(ev.m.changed(d) for d in dirs) and "/" not in name:
            return ev.m.errexit(1, node, "command -v")
    ev.m.output_unknown("command -v")
    return ev.m.errexit(None, node, "command -v")


def b_builtin(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    if not args:
        return ev.m.errexit(0, node, "builtin")
    head = join(args[0])
    if isinstance(head, str) and head in ("exec", "command", "builtin"):
        status = BUILTINS[head](ev, args[1:], prefix, node)
        # bash: ``builtin exec 3>f`` opens 3 for that command only (``command exec 3>f``: for good)
        ev.m.bare_exec = None
        return status
    return ev.invoke(list(args), prefix, node, skip_functions=True, only_builtins=True)


# builtins whose status is 0 and which change nothing the reader tracks (a script's aliases are not
# expanded: bash expands them only with `shopt -s expand_aliases`)
_NO_OPS = (
    ":", "true", "alias", "unalias", "wait", "umask", "complete", "times", "disown", "jobs", "history",
    "bind", "help", "dirs",
)  # fmt: skip
# not modelled: jobs and signals, the directory stack, limits, the interactive history
_UNMODELLED = ("pushd", "popd", "ulimit", "kill", "fc", "suspend", "logout", "fg", "bg")
_DECLARATIONS = ("export", "declare", "typeset", "local", "readonly", "unset")

BUILTINS: dict[str, Builtin] = {
    **{name: b_noop(name) for name in _NO_OPS},
    **{name: b_unmodelled(name) for name in _UNMODELLED},
    **{name: b_export(name) for name in _DECLARATIONS},
    "false": b_false,
    "echo": b_echo,
    "printf": b_printf,
    "set": b_set,
    "shift": b_shift,
    "cd": b_cd,
    "pwd": b_pwd,
    "source": b_source,
    ".": b_source,
    "exit": b_exit,
    "return": b_return,
    "eval": b_eval,
    "read": b_read,
    "mapfile": b_unmodelled("mapfile/readarray: the array is read from input at run time"),
    "readarray": b_unmodelled("mapfile/readarray: the array is read from input at run time"),
    "trap": b_trap,
    "shopt": b_shopt,
    "enable": b_unmodelled("enable (switches builtins on or off)"),
    "hash": b_hash,
    "exec": b_exec,
    "command": b_command,
    "builtin": b_builtin,
    "test": b_test,
    "[": b_bracket,
    "let": b_let,
    "break": b_loop("break"),
    "continue": b_loop("continue"),
    "getopts": b_getopts,
    "type": b_runtime("type"),
    "caller": b_runtime("caller"),
    "compgen": b_runtime("compgen", "VFC"),
}


# what dash has too, with the same meaning for the uses modelled here
POSIX_BUILTINS = {
    ":", "true", "false", "echo", "printf", "export", "unset", "set", "shift", "cd", "pwd", ".", "exit",
    "return", "eval", "test", "[", "read", "trap", "exec", "command", "wait", "umask", "break", "continue",
    "hash",
}  # fmt: skip


__all__ = ["BUILTINS", "POSIX_BUILTINS", "PROGRAMS"]
