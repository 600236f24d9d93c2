"""The builtins that set variables, options and positional parameters: a declaration reached as a
command word (``builtin export X=1``: the declarations themselves are ``variables``'), ``set`` (options
and ``set --``), ``shift``, ``getopts``, ``let`` and ``read`` (whose values are known only at run time).
"""

from __future__ import annotations

from tree_sitter import Node

from validator.sources.launch.shell.api import Builtin, Shell
from validator.sources.launch.shell.machine import Prefix, known_words
from validator.sources.launch.shell.state import NAME
from validator.sources.launch.shell.syntax import OPTION_LETTERS, line_of
from validator.sources.launch.shell.values import Field, Unknown, Unmodelled, Value, join


def b_export(kind: str) -> Builtin:
    """A declaration builtin reached as a command word (``builtin export X=1``, ``command declare -x``):
    its arguments are the words as expanded."""

    def run(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
        if kind == "unset" or ev.m.posix:  # dash does not split an assignment after `command export`
            raise Unmodelled(f"{kind} given as a command word", line_of(node))
        if kind == "local" and not ev.m.in_function:
            return ev.m.errexit(1, node, kind)
        return ev.m.errexit(ev.vars.declare_words(kind, {}, [join(f) for f in args], node), node, kind)

    return run


_SET_LETTERS = {**OPTION_LETTERS, "h": "hashall", "B": "braceexpand"}  # set -e, set +x, ...
_SET_NAMES = {*_SET_LETTERS.values(), "pipefail", "errtrace", "functrace", "noclobber"}  # set -o NAME


def b_set(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    k = 0
    while k < len(words):
        w = words[k]
        if isinstance(w, Unknown):
            raise Unmodelled(f"set with an argument known only at run time: {w.reason}", line_of(node))
        if w in ("--", "-"):
            rest = words[k + 1 :]
            if w == "-" and not rest:
                break
            ev.m.st.positional = list(rest)
            return ev.m.errexit(0, node, "set")
        if w[:1] in "-+" and len(w) > 1:
            on = w[0] == "-"
            k += 1
            for letter in w[1:]:
                if letter == "o":
                    if k >= len(words):
                        raise Unmodelled("set -o with no option name (it lists them)", line_of(node))
                    opt = words[k]
                    k += 1
                    if ev.m.posix and opt == "pipefail":
                        raise Unmodelled("set -o pipefail in a /bin/sh script", line_of(node))
                    if not isinstance(opt, str) or opt not in _SET_NAMES or opt in ("errtrace", "functrace"):
                        raise Unmodelled(f"set -o {opt!r}", line_of(node))
                    (ev.m.st.opts.add if on else ev.m.st.opts.discard)(opt)
                    continue
                if letter not in _SET_LETTERS:
                    raise Unmodelled(f"set {w[0]}{letter}", line_of(node))
                (ev.m.st.opts.add if on else ev.m.st.opts.discard)(_SET_LETTERS[letter])
            continue
        ev.m.st.positional = list(words[k:])
        return ev.m.errexit(0, node, "set")
    return ev.m.errexit(0, node, "set")


def b_shift(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = known_words(args, node, "shift")
    n = int(words[0]) if words and words[0].isdigit() else (1 if not words else -1)
    if n < 0:
        raise Unmodelled(f"shift {words!r}", line_of(node))
    pos = ev.m.st.positional
    if isinstance(pos, Unknown):
        raise Unmodelled(f"shift: {pos.reason}", line_of(node))
    if n > len(pos):
        return ev.m.errexit(1, node, "shift")
    ev.m.st.positional = pos[n:]
    return ev.m.errexit(0, node, "shift")


def b_getopts(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    """``getopts OPTSTRING NAME [ARGS]``: one option per call from ``$OPTIND``, as bash parses them
    (``-p VALUE``, ``-pVALUE``, ``--``, a leading ``:`` for silent errors). Clusters (``-ab``) are not
    modelled."""
    words = known_words(args, node, "getopts")
    if len(words) < 2:
        return ev.m.errexit(2, node, "getopts")
    optstring, name = words[0], words[1]
    argv_v: list[Value] | Unknown = list(words[2:]) if len(words) > 2 else ev.vars.positional()
    if isinstance(argv_v, Unknown) or any(isinstance(a, Unknown) for a in argv_v):
        raise Unmodelled("getopts over arguments known only at run time", line_of(node))
    argv = [str(a) for a in argv_v]
    raw = ev.vars.scalar("OPTIND")
    if not isinstance(raw, str) or not raw.isdigit() or int(raw) < 1:
        raise Unmodelled(f"getopts with OPTIND {raw!r}", line_of(node))
    optind = int(raw)
    silent = optstring.startswith(":")
    k = optind - 1
    if k >= len(argv) or not argv[k].startswith("-") or argv[k] == "-":
        ev.vars.assign(name, "?", node)
        return ev.m.errexit(1, node, "getopts")
    if argv[k] == "--":
        ev.vars.assign("OPTIND", str(optind + 1), node)
        ev.vars.assign(name, "?", node)
        return ev.m.errexit(1, node, "getopts")
    arg, c = argv[k], argv[k][1]
    idx = optstring.find(c) if c != ":" else -1
    takes = idx >= 0 and optstring[idx + 1 : idx + 2] == ":"
    if len(arg) > 2 and not takes:
        raise Unmodelled(f"getopts on the option cluster {arg!r}", line_of(node))
    ev.m.st.vars.pop("OPTARG", None)
    if idx < 0:
        ev.vars.assign(name, "?", node)
        if silent:
            ev.vars.assign("OPTARG", c, node)
        ev.vars.assign("OPTIND", str(optind + 1), node)
        return ev.m.errexit(0, node, "getopts")
    if takes:
        if len(arg) > 2:
            ev.vars.assign("OPTARG", arg[2:], node)
            optind += 1
        elif k + 1 < len(argv):
            ev.vars.assign("OPTARG", argv[k + 1], node)
            optind += 2
        else:
            ev.vars.assign(name, ":" if silent else "?", node)
            if silent:
                ev.vars.assign("OPTARG", c, node)
            ev.vars.assign("OPTIND", str(optind + 1), node)
            return ev.m.errexit(0, node, "getopts")
    else:
        optind += 1
    ev.vars.assign(name, c, node)
    ev.vars.assign("OPTIND", str(optind), node)
    return ev.m.errexit(0, node, "getopts")


def b_let(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    """``let EXPR...``: each argument as arithmetic; the status is 1 when the last is 0."""
    last: Value = "0"
    for w in known_words(args, node, "let"):
        last = ev.words.arith(w, node)
    if not args:
        return ev.m.errexit(2, node, "let")
    return ev.m.errexit(None if isinstance(last, Unknown) else int(int(last) == 0), node, "let")


def b_read(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    for f in args:
        w = join(f)
        if isinstance(w, str) and NAME.fullmatch(w):
            ev.vars.assign(w, Unknown(f"{w} is read from input at run time (line {line_of(node)})"), node)
        elif isinstance(w, str) and w.startswith("-"):
            if any(c in w for c in "apdnNtu"):
                raise Unmodelled(f"read {w}", line_of(node))
        else:
            raise Unmodelled("read", line_of(node))
    if not args:
        ev.vars.assign("REPLY", Unknown("REPLY is read from input at run time"), node)
    return ev.m.errexit(None, node, "read")
