"""The builtins that steer control flow or run other code: ``:``/``true``/``false``, ``test``/``[``,
``exit``, ``return``, ``break``/``continue`` (raised as ``ShellExit``, ``ShellReturn``, ``LoopJump`` for
the statements to catch), ``eval`` and ``source`` (parsed and run in place, ``source`` found on ``PATH``
as bash finds it), ``cd`` (against the disk, unless the script may have made the directory) and ``trap``
(an ``EXIT`` trap is noted: the path's end is then unresolved; ``DEBUG``/``RETURN``/``ERR`` are not
modelled).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from validator.bounded_files import read_bounded
from validator.sources.shell.conditions import test_words
from validator.sources.shell.machine import Builtin, Machine, known_words
from validator.sources.shell.state import MAX_DEPTH, LoopJump, ShellExit, ShellReturn, Var
from validator.sources.shell.syntax import MAX_SCRIPT_BYTES, line_of, parse
from validator.sources.shell.values import Field, Unknown, Unmodelled, Value, join


def b_true(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(0, node, ":")


def b_false(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(1, node, "false")


def b_test(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    return ev.errexit(test_words(ev, words, node), node, "test")


def b_bracket(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if not words or words[-1] != "]":
        return ev.errexit(2, node, "[")
    return ev.errexit(test_words(ev, words[:-1], node), node, "[")


def b_exit(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    status: int | None = ev.st.status
    if words:
        w = words[0]
        status = int(w) & 255 if isinstance(w, str) and w.isdigit() else None
    raise ShellExit(status, line_of(node), f"exit {status if status is not None else '?'}")


def b_return(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
    if not ev.in_function and ev.depth == 0:
        return ev.errexit(1, node, "return")
    words = [join(f) for f in args]
    status: int | None = ev.st.status
    if words:
        w = words[0]
        status = int(w) & 255 if isinstance(w, str) and w.isdigit() else None
    raise ShellReturn(status)


def b_loop(kind: str) -> Builtin:
    def run(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
        words = known_words(args, node, kind)
        raise LoopJump(kind, int(words[0]) if words and words[0].isdigit() else 1)

    return run


def b_eval(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    joined = join([p for k, w in enumerate(words) for p in ((" ", w) if k else (w,))])
    if isinstance(joined, Unknown):
        raise Unmodelled(f"eval of text known only at run time: {joined.reason}", line_of(node))
    if not joined.strip():
        return ev.errexit(0, node, "eval")
    tree = parse(joined.encode(), f"{ev.file}:{line_of(node)} (eval)")
    return ev.block(list(tree.root_node.children))


def b_source(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
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


def _find_source(ev: Machine, target: str, node: Any) -> str | None:
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


def b_cd(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
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


def b_trap(ev: Machine, args: list[Field], prefix: Any, node: Any) -> int | None:
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
