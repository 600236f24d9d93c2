"""The builtins a launcher script uses, and the few programs whose output is known statically
(``dirname``, ``basename``, ``uname``): each modelled exactly, or ``Unmodelled`` naming what it cannot know
(``mapfile``, ``trap ... DEBUG``, ``shopt``, ``hash -p``, ``eval`` of unknown text ...).

A builtin is ``f(evaluator, argument fields, prefix assignments, node) -> status`` (None: known only at
run time); the evaluator looks a command up in ``BUILTINS`` after the script's functions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from validator.sources.files import read_bounded
from validator.sources.shell_cond import test_words
from validator.sources.shell_parse import MAX_SCRIPT_BYTES, line_of, parse
from validator.sources.shell_state import (
    MAX_DEPTH,
    NAME,
    RESERVED,
    LoopJump,
    ShellExit,
    ShellReturn,
    Var,
    which,
)
from validator.sources.shell_words import Field, Unknown, Unmodelled, Value, join

if TYPE_CHECKING:
    from validator.sources.shell_eval import Evaluator

# -- builtins -------------------------------------------------------------------------------------------


def _words(ev: Evaluator, args: list[Field], node: Any, what: str) -> list[str]:
    out: list[str] = []
    for f in args:
        v = join(f)
        if isinstance(v, Unknown):
            raise Unmodelled(f"{what} with an argument known only at run time: {v.reason}", line_of(node))
        out.append(v)
    return out


def _b_true(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(0, node, ":")


def _b_false(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(1, node, "false")


def _b_echo(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    values = [join(f) for f in args]
    if ev.posix and any(isinstance(v, Unknown) or "\\" in v or v.startswith("-") for v in values):
        ev.output_unknown("dash's echo (it reads backslashes and options otherwise)")
        return ev.errexit(0, node, "echo")
    newline = True
    while values and isinstance(values[0], str) and re.fullmatch(r"-[neE]+", values[0]):
        if "e" in values[0]:
            ev.output_unknown("echo -e")
            return ev.errexit(0, node, "echo")
        newline = newline and "n" not in values[0]
        values = values[1:]
    parts: list[Value] = []
    for k, v in enumerate(values):
        if k:
            parts.append(" ")
        parts.append(v)
    ev.emit(join([*parts, "\n" if newline else ""]))
    return ev.errexit(0, node, "echo")


def _printf_format(fmt: str, values: list[Value], node: Any) -> Value:
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
                        if not re.fullmatch(r"[-+]?[0-9]+", v.strip() or "0"):
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


def _b_printf(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    values = [join(f) for f in args]
    target: str | None = None
    if ev.posix and values and values[0] == "-v":
        raise Unmodelled("printf -v in a /bin/sh script", line_of(node))
    if len(values) >= 2 and values[0] == "-v":
        name = values[1]
        if isinstance(name, Unknown):
            raise Unmodelled(f"printf -v into a name known only at run time: {name.reason}", line_of(node))
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\[.+\])?", name):
            return ev.errexit(2, node, "printf -v")
        target = name
        values = values[2:]
    if values and values[0] == "--":
        values = values[1:]
    if not values:
        return ev.errexit(2, node, "printf")
    fmt = values[0]
    if isinstance(fmt, Unknown):
        result: Value = Unknown(f"printf with a format known only at run time: {fmt.reason}")
    else:
        result = _printf_format(fmt, values[1:], node)
    if target is None:
        ev.emit(result)
        return ev.errexit(0, node, "printf")
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(.+)\])?", target)
    assert m is not None
    if m.group(2) is not None:
        raise Unmodelled(f"printf -v into an array element {target!r}", line_of(node))
    ev.assign(m.group(1), result, node)
    return ev.errexit(0, node, "printf")


def _b_export(kind: str) -> Builtin:
    """A declaration builtin reached as a command word (``builtin export X=1``, ``command declare -x``):
    its arguments are the words as expanded."""

    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        if kind == "unset" or ev.posix:  # dash does not split an assignment after `command export`
            raise Unmodelled(f"{kind} given as a command word", line_of(node))
        if kind == "local" and not ev.in_function:
            return ev.errexit(1, node, kind)
        return ev.errexit(ev.declare_words(kind, {}, [join(f) for f in args], node), node, kind)

    return run


def _b_set(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    k = 0
    letters = {
        "e": "errexit",
        "u": "nounset",
        "a": "allexport",
        "f": "noglob",
        "x": "xtrace",
        "v": "verbose",
        "h": "hashall",
        "B": "braceexpand",
    }
    names = {
        "errexit",
        "nounset",
        "allexport",
        "noglob",
        "xtrace",
        "verbose",
        "pipefail",
        "hashall",
        "braceexpand",
        "errtrace",
        "functrace",
        "noclobber",
    }
    while k < len(words):
        w = words[k]
        if isinstance(w, Unknown):
            raise Unmodelled(f"set with an argument known only at run time: {w.reason}", line_of(node))
        if w in ("--", "-"):
            rest = words[k + 1 :]
            if w == "-" and not rest:
                break
            ev.st.positional = list(rest)
            return ev.errexit(0, node, "set")
        if w[:1] in "-+" and len(w) > 1:
            on = w[0] == "-"
            k += 1
            for letter in w[1:]:
                if letter == "o":
                    if k >= len(words):
                        raise Unmodelled("set -o with no option name (it lists them)", line_of(node))
                    opt = words[k]
                    k += 1
                    if ev.posix and opt == "pipefail":
                        raise Unmodelled("set -o pipefail in a /bin/sh script", line_of(node))
                    if not isinstance(opt, str) or opt not in names or opt in ("errtrace", "functrace"):
                        raise Unmodelled(f"set -o {opt!r}", line_of(node))
                    (ev.st.opts.add if on else ev.st.opts.discard)(opt)
                    continue
                if letter not in letters:
                    raise Unmodelled(f"set {w[0]}{letter}", line_of(node))
                (ev.st.opts.add if on else ev.st.opts.discard)(letters[letter])
            continue
        ev.st.positional = [x for x in words[k:]]
        return ev.errexit(0, node, "set")
    return ev.errexit(0, node, "set")


def _b_shift(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = _words(ev, args, node, "shift")
    n = int(words[0]) if words and words[0].isdigit() else (1 if not words else -1)
    if n < 0:
        raise Unmodelled(f"shift {words!r}", line_of(node))
    pos = ev.st.positional
    if isinstance(pos, Unknown):
        raise Unmodelled(f"shift: {pos.reason}", line_of(node))
    if n > len(pos):
        return ev.errexit(1, node, "shift")
    ev.st.positional = pos[n:]
    return ev.errexit(0, node, "shift")


def _b_cd(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    while words and isinstance(words[0], str) and words[0] in ("-L", "--"):
        words = words[1:]
    if words and isinstance(words[0], str) and words[0].startswith("-") and words[0] != "-":
        raise Unmodelled(f"cd {words[0]}", line_of(node))
    if len(words) > 1:
        return ev.errexit(1, node, "cd")  # bash: too many arguments
    if not words:
        target: Value | None = ev.scalar("HOME")
        if target is None:
            return ev.errexit(1, node, "cd")
    else:
        target = words[0]
    if isinstance(target, Unknown):
        ev.st.cwd = Unknown(f"the directory is computed at run time ({target.reason})")
        return ev.errexit(None, node, "cd")
    if target in ("", "-"):
        raise Unmodelled(f"cd {target!r}", line_of(node))
    cdpath = ev.scalar("CDPATH")
    if cdpath and not target.startswith(("/", "./", "../")) and target not in (".", ".."):
        raise Unmodelled("cd with CDPATH set", line_of(node))
    if isinstance(ev.st.cwd, Unknown) and not target.startswith("/"):
        return ev.errexit(None, node, "cd")
    new = os.path.normpath(os.path.join(str(ev.st.cwd), target))
    if new.startswith("//"):
        new = "/" + new.lstrip("/")
    if ev.changed(new):
        ev.st.cwd = Unknown(f"cd {target}: a directory the script may have created")
        return ev.errexit(None, node, "cd")
    if not os.path.isdir(new) or not os.access(new, os.X_OK):
        return ev.errexit(1, node, f"cd {target}")
    old = ev.st.cwd
    ev.st.cwd = new
    var = ev.st.vars.get("OLDPWD")  # bash sets and exports OLDPWD at each cd
    if var is None:
        ev.st.vars["OLDPWD"] = Var(value=old, exported=True, origin="bash")
    else:
        var.value = old
    return ev.errexit(0, node, "cd")


def _b_pwd(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = _words(ev, args, node, "pwd")
    if words and words != ["-L"]:
        raise Unmodelled(f"pwd {' '.join(words)}", line_of(node))
    ev.emit(join([ev.st.cwd, "\n"]))
    return ev.errexit(0, node, "pwd")


def _b_source(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        return ev.errexit(2, node, "source")
    target = words[0]
    if isinstance(target, Unknown):
        raise Unmodelled(f"the sourced file is computed at run time: {target.reason}", line_of(node))
    path = _find_source(ev, target, node)
    if path is None and ev.posix:  # dash: a special builtin's failure ends a non-interactive shell
        raise ShellExit(2, line_of(node), f". {target}: no such file (dash stops)")
    if path is None:
        ev.notes.append(
            f"{ev.file}:{line_of(node)}: source {target}: no such file here; bash goes on (the values it "
            "would set are unknown)"
        )
        ev.missing_source.append(f"{target} (line {line_of(node)})")
        return ev.errexit(1, node, f"source {target}")
    data = read_bounded(Path(path), MAX_SCRIPT_BYTES, "sourced file")
    tree = parse(data, path)
    ev.depth += 1
    if ev.depth > MAX_DEPTH:
        raise Unmodelled(f"sourced files nested deeper than {MAX_DEPTH}", line_of(node))
    saved_file, saved_pos = ev.file, ev.st.positional
    if len(words) > 1:
        ev.st.positional = words[1:]
    ev.file = path
    ev.st.sources.append(target)
    try:
        status = ev.block(list(tree.root_node.children))
    except ShellReturn as r:
        status = r.status
    except Unmodelled as um:
        um.where = um.where or path
        raise
    finally:
        ev.file = saved_file
        ev.st.sources.pop()
        if len(words) > 1:
            ev.st.positional = saved_pos
        ev.depth -= 1
    ev.st.status = status
    return status


def _find_source(ev: Evaluator, target: str, node: Any) -> str | None:
    """The file ``source NAME`` reads: with a slash, relative to the directory; without, the first
    readable file on ``$PATH``, then the directory (bash outside POSIX mode)."""
    candidates: list[str] = []
    cwd = ev.st.cwd
    if "/" not in target:
        path = ev.scalar("PATH")
        if isinstance(path, Unknown):
            raise Unmodelled(f"source {target}: searched on a PATH known only at run time", line_of(node))
        for d in (path or "").split(":"):
            if not d.startswith("/"):
                if isinstance(cwd, Unknown):
                    raise Unmodelled(f"source {target}: a relative PATH entry", line_of(node))
                d = os.path.join(cwd, d or ".")
            candidates.append(os.path.join(d, target))
    if isinstance(cwd, Unknown) and not target.startswith("/"):
        raise Unmodelled(f"source {target}: {cwd.reason}", line_of(node))
    if "/" in target or not ev.posix:  # dash's . looks only on PATH for a name with no slash
        candidates.append(os.path.normpath(os.path.join(str(cwd), target)))
    for c in candidates:
        if ev.changed(c):
            raise Unmodelled(f"source {target}: {c} may have been written by the script", line_of(node))
        if os.path.isfile(c) and os.access(c, os.R_OK):
            return c
    return None


def _b_exit(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    status: int | None = ev.st.status
    if words:
        w = words[0]
        status = int(w) & 255 if isinstance(w, str) and w.isdigit() else None
    raise ShellExit(status, line_of(node), f"exit {status if status is not None else '?'}")


def _b_return(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    if not ev.in_function and ev.depth == 0:
        return ev.errexit(1, node, "return")
    words = [join(f) for f in args]
    status: int | None = ev.st.status
    if words:
        w = words[0]
        status = int(w) & 255 if isinstance(w, str) and w.isdigit() else None
    raise ShellReturn(status)


def _b_eval(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    joined = join([p for k, w in enumerate(words) for p in ((" ", w) if k else (w,))])
    if isinstance(joined, Unknown):
        raise Unmodelled(f"eval of text known only at run time: {joined.reason}", line_of(node))
    if not joined.strip():
        return ev.errexit(0, node, "eval")
    tree = parse(joined.encode(), f"{ev.file}:{line_of(node)} (eval)")
    return ev.block(list(tree.root_node.children))


def _b_read(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    for f in args:
        w = join(f)
        if isinstance(w, str) and NAME.fullmatch(w):
            ev.assign(w, Unknown(f"{w} is read from input at run time (line {line_of(node)})"), node)
        elif isinstance(w, str) and w.startswith("-"):
            if any(c in w for c in "apdnNtu"):
                raise Unmodelled(f"read {w}", line_of(node))
        else:
            raise Unmodelled("read", line_of(node))
    if not args:
        ev.assign("REPLY", Unknown("REPLY is read from input at run time"), node)
    ev.st.status = None
    return None if "errexit" not in ev.st.opts or ev.ignore_errexit else ev.errexit(None, node, "read")


def _b_unmodelled(what: str) -> Builtin:
    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        raise Unmodelled(what, line_of(node))

    return run


def _b_trap(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    sigs = words[1:]
    if any(isinstance(s, Unknown) for s in sigs) or not sigs:
        if not words or words in (["-l"], ["-p"]):
            return ev.errexit(0, node, "trap")
        raise Unmodelled("trap on signals known only at run time", line_of(node))
    for s in sigs:
        assert isinstance(s, str)
        name = s.upper().removeprefix("SIG")
        if name in ("DEBUG", "RETURN", "ERR"):
            raise Unmodelled(f"trap on {name}: it runs code around every command", line_of(node))
        if name in ("EXIT", "0"):
            if words[0] in ("", "-"):  # ignored or reset: nothing runs at exit
                ev.st.traps.pop("EXIT", None)
            else:
                ev.st.traps["EXIT"] = f"the EXIT trap set at line {line_of(node)} runs at exit"
    return ev.errexit(0, node, "trap")


def _b_shopt(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if (words and words[0] in ("-q", "-p")) or not words:
        return ev.errexit(None, node, "shopt")
    raise Unmodelled(f"shopt {' '.join(str(w) for w in words)}", line_of(node))


def _b_hash(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if words and words != ["-r"]:
        raise Unmodelled(f"hash {' '.join(str(w) for w in words)}", line_of(node))
    return ev.errexit(0, node, "hash")


def _b_alias(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    # a script's aliases are not expanded (bash expands them only with `shopt -s expand_aliases`)
    return ev.errexit(0, node, "alias")


def _b_exec(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = list(args)
    if words and join(words[0]) == "--":
        words = words[1:]
    first = join(words[0]) if words else ""
    if isinstance(first, Unknown) or first.startswith("-"):
        raise Unmodelled(
            f"exec {first if isinstance(first, str) else '...'}: an option of exec", line_of(node)
        )
    if not words:
        return ev.errexit(0, node, "exec")
    return ev.invoke(words, prefix, node, execs=True, skip_functions=True)


def _b_command(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = list(args)
    if words and join(words[0]) == "-v" and len(words) == 2:
        return _command_v(ev, join(words[1]), node)
    if words and isinstance(join(words[0]), str) and str(join(words[0])).startswith("-"):
        raise Unmodelled(f"command {join(words[0])}", line_of(node))
    if not words:
        return ev.errexit(0, node, "command")
    return ev.invoke(words, prefix, node, skip_functions=True)


def _command_v(ev: Evaluator, name: Value, node: Any) -> int | None:
    """``command -v NAME``: a function's or builtin's name, else the file found on PATH (status 1 when
    there is none)."""
    if isinstance(name, Unknown):
        ev.output_unknown("command -v")
        return ev.errexit(None, node, "command -v")
    if name in ev.st.funcs or name in BUILTINS or name in RESERVED:
        ev.emit(name + "\n")
        return ev.errexit(0, node, "command -v")
    found = which(name, ev.scalar("PATH") or Unknown("PATH is unset"), ev.st.cwd)
    if isinstance(found, str) and not ev.changed(found):
        ev.emit(found + "\n")
        return ev.errexit(0, node, "command -v")
    path = ev.scalar("PATH")
    if isinstance(found, Unknown) and isinstance(path, str) and not isinstance(ev.st.cwd, Unknown):
        dirs = [os.path.join(str(ev.st.cwd), d or ".") for d in path.split(":")]
        if ev.st.dirty is not None and not any(ev.changed(d) for d in dirs) and "/" not in name:
            return ev.errexit(1, node, "command -v")
    ev.output_unknown("command -v")
    return ev.errexit(None, node, "command -v")


def _b_builtin(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    if not args:
        return ev.errexit(0, node, "builtin")
    head = join(args[0])
    if isinstance(head, str) and head in ("exec", "command", "builtin"):
        return BUILTINS[head](ev, args[1:], prefix, node)
    return ev.invoke(list(args), prefix, node, skip_functions=True, only_builtins=True)


def _b_test(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    return ev.errexit(test_words(ev, words, node), node, "test")


def _b_bracket(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if not words or words[-1] != "]":
        return ev.errexit(2, node, "[")
    return ev.errexit(test_words(ev, words[:-1], node), node, "[")


def _b_let(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    """``let EXPR...``: each argument as arithmetic; the status is 1 when the last is 0."""
    last: Value = "0"
    for w in _words(ev, args, node, "let"):
        last = ev.arith(w, node)
    if not args:
        return ev.errexit(2, node, "let")
    return ev.errexit(None if isinstance(last, Unknown) else int(int(last) == 0), node, "let")


def _b_getopts(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    """``getopts OPTSTRING NAME [ARGS]``: one option per call from ``$OPTIND``, as bash parses them
    (``-p VALUE``, ``-pVALUE``, ``--``, a leading ``:`` for silent errors). Clusters (``-ab``) are not
    modelled."""
    words = _words(ev, args, node, "getopts")
    if len(words) < 2:
        return ev.errexit(2, node, "getopts")
    optstring, name = words[0], words[1]
    argv_v: list[Value] | Unknown = list(words[2:]) if len(words) > 2 else ev.positional()
    if isinstance(argv_v, Unknown) or any(isinstance(a, Unknown) for a in argv_v):
        raise Unmodelled("getopts over arguments known only at run time", line_of(node))
    argv = [str(a) for a in argv_v]
    raw = ev.scalar("OPTIND")
    if not isinstance(raw, str) or not raw.isdigit() or int(raw) < 1:
        raise Unmodelled(f"getopts with OPTIND {raw!r}", line_of(node))
    optind = int(raw)
    silent = optstring.startswith(":")
    k = optind - 1
    if k >= len(argv) or not argv[k].startswith("-") or argv[k] == "-":
        ev.assign(name, "?", node)
        return ev.errexit(1, node, "getopts")
    if argv[k] == "--":
        ev.assign("OPTIND", str(optind + 1), node)
        ev.assign(name, "?", node)
        return ev.errexit(1, node, "getopts")
    arg, c = argv[k], argv[k][1]
    idx = optstring.find(c) if c != ":" else -1
    takes = idx >= 0 and optstring[idx + 1 : idx + 2] == ":"
    if len(arg) > 2 and not takes:
        raise Unmodelled(f"getopts on the option cluster {arg!r}", line_of(node))
    ev.st.vars.pop("OPTARG", None)
    if idx < 0:
        ev.assign(name, "?", node)
        if silent:
            ev.assign("OPTARG", c, node)
        ev.assign("OPTIND", str(optind + 1), node)
        return ev.errexit(0, node, "getopts")
    if takes:
        if len(arg) > 2:
            ev.assign("OPTARG", arg[2:], node)
            optind += 1
        elif k + 1 < len(argv):
            ev.assign("OPTARG", argv[k + 1], node)
            optind += 2
        else:
            ev.assign(name, ":" if silent else "?", node)
            if silent:
                ev.assign("OPTARG", c, node)
            ev.assign("OPTIND", str(optind + 1), node)
            return ev.errexit(0, node, "getopts")
    else:
        optind += 1
    ev.assign(name, c, node)
    ev.assign("OPTIND", str(optind), node)
    return ev.errexit(0, node, "getopts")


def _b_loop(kind: str) -> Builtin:
    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        words = _words(ev, args, node, kind)
        raise LoopJump(kind, int(words[0]) if words and words[0].isdigit() else 1)

    return run


def _b_uname(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(None, node, "uname")


def _b_noop(what: str) -> Builtin:
    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        return ev.errexit(0, node, what)

    return run


Builtin = Callable[["Evaluator", list[Field], Any, Any], "int | None"]
BUILTINS: dict[str, Builtin] = {
    ":": _b_true,
    "true": _b_true,
    "false": _b_false,
    "echo": _b_echo,
    "printf": _b_printf,
    "export": _b_export("export"),
    "declare": _b_export("declare"),
    "typeset": _b_export("typeset"),
    "local": _b_export("local"),
    "readonly": _b_export("readonly"),
    "unset": _b_export("unset"),
    "set": _b_set,
    "shift": _b_shift,
    "cd": _b_cd,
    "pwd": _b_pwd,
    "source": _b_source,
    ".": _b_source,
    "exit": _b_exit,
    "return": _b_return,
    "eval": _b_eval,
    "read": _b_read,
    "mapfile": _b_unmodelled("mapfile/readarray: the array is read from input at run time"),
    "readarray": _b_unmodelled("mapfile/readarray: the array is read from input at run time"),
    "trap": _b_trap,
    "shopt": _b_shopt,
    "enable": _b_unmodelled("enable (switches builtins on or off)"),
    "hash": _b_hash,
    "alias": _b_alias,
    "unalias": _b_alias,
    "exec": _b_exec,
    "command": _b_command,
    "builtin": _b_builtin,
    "test": _b_test,
    "[": _b_bracket,
    "let": _b_let,
    "break": _b_loop("break"),
    "continue": _b_loop("continue"),
    "getopts": _b_getopts,
    "pushd": _b_unmodelled("pushd"),
    "popd": _b_unmodelled("popd"),
    "wait": _b_noop("wait"),
    "umask": _b_noop("umask"),
    "ulimit": _b_unmodelled("ulimit"),
    "type": _b_unmodelled("type"),
    "caller": _b_unmodelled("caller"),
    "compgen": _b_unmodelled("compgen"),
    "complete": _b_noop("complete"),
    "times": _b_noop("times"),
    "disown": _b_noop("disown"),
    "jobs": _b_noop("jobs"),
    "kill": _b_unmodelled("kill"),
    "fc": _b_unmodelled("fc"),
    "history": _b_noop("history"),
    "suspend": _b_unmodelled("suspend"),
    "logout": _b_unmodelled("logout"),
    "bind": _b_noop("bind"),
    "help": _b_noop("help"),
    "dirs": _b_noop("dirs"),
    "fg": _b_unmodelled("fg"),
    "bg": _b_unmodelled("bg"),
}


# what dash has too, with the same meaning for the uses modelled here
POSIX_BUILTINS = {
    ":", "true", "false", "echo", "printf", "export", "unset", "set", "shift", "cd", "pwd", ".", "exit",
    "return", "eval", "test", "[", "read", "trap", "exec", "command", "wait", "umask", "break", "continue",
    "hash",
}  # fmt: skip


def _pure(name: str) -> Builtin:
    """Programs whose output the reader computes (``dirname``, ``basename``, ``uname``); their
    arguments must be known."""

    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        words = [join(f) for f in args]
        if any(isinstance(w, Unknown) for w in words):
            ev.output_unknown(name)
            return ev.errexit(None, node, name)
        sw = [str(w) for w in words]
        if name == "dirname" and len(sw) == 1 and not sw[0].startswith("-"):
            ev.emit(_dirname(sw[0]) + "\n")
            return ev.errexit(0, node, name)
        if name == "basename" and len(sw) == 1 and not sw[0].startswith("-"):
            b = sw[0].rstrip("/")
            ev.emit((os.path.basename(b) if b else ("/" if sw[0] else "")) + "\n")
            return ev.errexit(0, node, name)
        if name == "uname" and (not sw or sw == ["-s"]):
            ev.emit(os.uname().sysname + "\n")
            return ev.errexit(0, node, name)
        ev.output_unknown(name)
        return ev.errexit(None, node, name)

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
    "dirname": _pure("dirname"),
    "basename": _pure("basename"),
    "uname": _pure("uname"),
}
